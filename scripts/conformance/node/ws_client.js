// WebSocket conformance against a running echo endpoint with Node's `ws` package (a second client
// no one here wrote, beside Python's websockets): echo, fragmentation with a ping between the
// fragments, ping/pong, close handshake, invalid UTF-8 -> 1007 (also split across fragments),
// oversize -> 1009. Every check is bounded (5 s).
// Usage: node ws_client.js ws://127.0.0.1:PORT/path MAX_MESSAGE_BYTES   (wss:// too)
"use strict";

const WebSocket = require("ws");

const [url, maxArg] = process.argv.slice(2);
const maxSize = Number(maxArg);
const results = [];

function check(name, ok, detail = "") {
  results.push(ok);
  console.log(`${ok ? "PASS" : "FAIL"} ${name} ${detail}`.trimEnd());
}

// An open client; over wss:// the test server's self-signed certificate is accepted.
function open() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { rejectUnauthorized: false, maxPayload: 0 });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function nextMessage(ws) {
  return within(
    5000,
    new Promise((resolve) => ws.once("message", (data, isBinary) => resolve({ data, isBinary }))),
    "message",
  );
}

function closed(ws) {
  return within(
    5000,
    new Promise((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() }))),
    "close",
  );
}

async function echo() {
  const ws = await open();
  ws.send("hello, ünïcödé ✓");
  let m = await nextMessage(ws);
  check("text echo", !m.isBinary && m.data.toString() === "hello, ünïcödé ✓");
  const bytes = Buffer.from([...Array(256).keys()]);
  ws.send(bytes);
  m = await nextMessage(ws);
  check("binary echo", m.isBinary && Buffer.compare(m.data, bytes) === 0);
  ws.terminate();
}

async function fragmentsWithControlFrameBetween() {
  const ws = await open();
  // Both listeners first: the echo may arrive before the pong is handled.
  const pong = within(5000, new Promise((resolve) => ws.once("pong", resolve)), "pong");
  const echoed = nextMessage(ws);
  // One text message in three frames, a ping between the first two (RFC 6455 §5.4, §5.5).
  ws.send("frag", { fin: false });
  ws.ping(Buffer.from("between fragments"));
  ws.send("men", { fin: false });
  ws.send("ted ✓", { fin: true });
  const got = await pong;
  check("ping between fragments answered", got.toString() === "between fragments");
  const m = await echoed;
  check("fragmented text reassembled", !m.isBinary && m.data.toString() === "fragmented ✓");
  ws.send(Buffer.from([0, 1]), { binary: true, fin: false });
  ws.send(Buffer.from([2]), { binary: true, fin: true });
  const b = await nextMessage(ws);
  check("fragmented binary reassembled", b.isBinary && Buffer.compare(b.data, Buffer.from([0, 1, 2])) === 0);
  ws.terminate();
}

async function pingPong() {
  const ws = await open();
  const pong = within(5000, new Promise((resolve) => ws.once("pong", resolve)), "pong");
  ws.ping(Buffer.from("are you there"));
  check("ping answered with the same payload", (await pong).toString() === "are you there");
  ws.terminate();
}

async function closeHandshake() {
  const ws = await open();
  const done = closed(ws);
  ws.close(1000, "bye");
  const { code } = await done;
  check("close handshake echoes 1000", code === 1000, `got ${code}`);
}

async function expectClose(name, code, send) {
  const ws = await open();
  const done = closed(ws);
  ws.on("error", () => {}); // the server closing mid-send is expected
  send(ws);
  const got = await done;
  check(name, got.code === code, `close code ${got.code}`);
}

async function main() {
  const steps = [
    echo,
    fragmentsWithControlFrameBetween,
    pingPong,
    closeHandshake,
    () =>
      expectClose("invalid UTF-8 closes 1007", 1007, (ws) =>
        ws.send(Buffer.from([0x62, 0x61, 0x64, 0x20, 0xff, 0xfe]), { binary: false }),
      ),
    () =>
      expectClose("invalid UTF-8 across fragments closes 1007", 1007, (ws) => {
        ws.send(Buffer.from([0x6f, 0x6b, 0x20, 0xc3]), { binary: false, fin: false });
        ws.send(Buffer.from([0x28]), { binary: false, fin: true });
      }),
    () => expectClose("oversize message closes 1009", 1009, (ws) => ws.send(Buffer.alloc(maxSize + 1, 0x78))),
  ];
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      check(step.name || "step", false, String(e));
    }
  }
  const failed = results.filter((ok) => !ok).length;
  console.log(`node ws: ${results.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
