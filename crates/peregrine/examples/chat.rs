//! A small chat: TLS (HTTP/1.1 and HTTP/2 by ALPN), cleartext HTTP/1.1 and h2c, WebSocket,
//! server-sent events.
//!
//! ```sh
//! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
//!   -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout key.pem -out cert.pem
//! TLS_CERT=cert.pem TLS_KEY=key.pem cargo run --example chat --features tls,http2,ws
//! # open https://localhost:8443/ in two tabs (WebSocket), https://localhost:8443/feed (the
//! # room over server-sent events), or, in two terminals:
//! curl -k -N https://localhost:8443/events                         # the room, as SSE
//! curl -k --http2 https://localhost:8443/say -d 'hello from curl'  # sent to 1 listener(s)
//! ```
//!
//! Configured by `peregrine::config::from_env_and_args`: `ADDR` (default 127.0.0.1:8080) serves
//! HTTP/1.1 and h2c; `TLS_ADDR` (default 127.0.0.1:8443) serves TLS when `TLS_CERT`/`TLS_KEY`
//! (or `--tls-cert`/`--tls-key`) are set, certificates reloaded on SIGHUP; `H2C_ADDR`, if set,
//! serves HTTP/2 only (cleartext). SIGTERM / SIGINT drain every listener. `/echo` is a plain
//! WebSocket echo (for conformance clients); `/big` answers 128 KiB, more than HTTP/2's
//! 65,535-byte initial window (h2spec's path, so its flow-control cases are decided by the
//! window, not by how fast the stream ends). `POST /trailers` streams the body back with
//! trailer fields (its length, the request's own `x-sum` trailer). Built with `http3`, the TLS
//! port serves HTTP/3 too; `H3_ZERO_RTT=1` accepts 0-RTT there (safe requests only; the
//! conformance run's second server).

use peregrine::sse::{Event, Sse};
use peregrine::ws::{Message, WebSocket, WebSocketUpgrade};
use peregrine::{get, post, App, Error, Html, Request, Response, StreamBody, Trailers};
use tokio::sync::broadcast;

/// Every connected client's messages go to every other client, across worker threads.
struct Room(broadcast::Sender<String>);

/// Longest chat line accepted, in bytes (larger → close 1009).
const MAX_LINE: usize = 4096;

async fn page(_req: Request) -> Html<&'static str> {
    Html(PAGE)
}

async fn join(req: Request) -> Result<Response, Error> {
    let upgrade = WebSocketUpgrade::from_request(&req)?.max_message_size(MAX_LINE);
    let room = req.state::<Room>()?.0.clone();
    Ok(upgrade.on_upgrade(move |ws| chat(ws, room)))
}

async fn chat(mut ws: WebSocket, room: broadcast::Sender<String>) {
    let mut inbox = room.subscribe();
    loop {
        tokio::select! {
            msg = ws.recv() => match msg {
                Some(Ok(Message::Text(line))) => {
                    let _ = room.send(line);
                }
                Some(Ok(_)) => {}
                _ => break,
            },
            line = inbox.recv() => match line {
                Ok(line) => {
                    if ws.send(Message::Text(line)).await.is_err() {
                        break;
                    }
                }
                // A slow client missed lines: tell it, and go on.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let _ = ws.send(Message::Text(format!("({n} messages missed)"))).await;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
}

/// `POST /say` with a text body: for clients without WebSocket (`curl --http2`). An empty room
/// is not an error: the line reaches nobody, and the answer says so.
async fn say(mut req: Request) -> Result<String, Error> {
    let line = req.text().await?;
    let version = req.version();
    let listeners = req
        .state::<Room>()?
        .0
        .send(format!("{line} (via {version:?})"))
        .unwrap_or(0);
    Ok(format!("sent to {listeners} listener(s)\n"))
}

/// `GET /events`: the room's lines as server-sent events, for clients without WebSocket
/// (`curl -N`). The stream ends with the client: the engine drops it, and its receiver with it.
async fn events(req: Request) -> Result<Sse, Error> {
    let inbox = req.state::<Room>()?.0.subscribe();
    let lines = futures_util::stream::unfold(inbox, |mut inbox| async move {
        let event = match inbox.recv().await {
            Ok(line) => Event::data(line),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Event::data(format!("({n} messages missed)"))
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((event, inbox))
    });
    Ok(Sse::new(lines))
}

async fn echo(req: Request) -> Result<Response, Error> {
    let upgrade = WebSocketUpgrade::from_request(&req)?.max_message_size(64 * 1024);
    Ok(upgrade.on_upgrade(|mut ws| async move {
        while let Some(Ok(msg)) = ws.recv().await {
            if matches!(msg, Message::Text(_) | Message::Binary(_)) && ws.send(msg).await.is_err() {
                break;
            }
        }
    }))
}

/// The request body streamed back, ended by trailers known once it was sent: `x-length` (its
/// size) and `x-request-sum` (the request's own `x-sum` trailer, or `none`), for conformance
/// clients to check trailers both ways.
async fn trailers(mut req: Request) -> Result<StreamBody, Error> {
    let body = req.bytes().await?;
    let sum = req
        .body_mut()
        .trailers()
        .and_then(|t| t.get("x-sum"))
        .map_or_else(
            || "none".to_owned(),
            |v| String::from_utf8_lossy(v).into_owned(),
        );
    let (tx, stream) = StreamBody::channel(1);
    let (sent, length) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(async move {
        let len = body.len();
        if tx.send(body).await.is_ok() {
            let _ = sent.send(len);
        }
    });
    Ok(stream.trailers(async move {
        let len = length
            .await
            .map_or_else(|_| "none".to_owned(), |n| n.to_string());
        Trailers::new()
            .with("x-length", len)
            .and_then(|t| t.with("x-request-sum", sum))
            .unwrap_or_default()
    }))
}

/// 128 KiB of text: twice HTTP/2's initial flow-control window.
async fn big(_req: Request) -> &'static str {
    static BIG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIG.get_or_init(|| "0123456789abcdef".repeat(8 * 1024))
        .as_str()
}

fn app(room: &broadcast::Sender<String>) -> App {
    App::new()
        .with_state(Room(room.clone()))
        .route("/", get(page))
        .route("/feed", get(feed))
        .route("/ws", get(join))
        .route("/say", post(say))
        .route("/events", get(events))
        .route("/echo", get(echo))
        .route("/big", get(big))
        .route("/trailers", post(trailers))
}

const PAGE: &str = r#"<!doctype html>
<meta charset="utf-8"><title>Peregrine chat</title>
<style>body{font:16px system-ui;max-width:40em;margin:2em auto}#log{height:20em;overflow:auto;border:1px solid #ccc;padding:.5em}</style>
<h1>Peregrine chat</h1>
<div id="log"></div>
<form id="f"><input id="m" autocomplete="off" size="50" autofocus> <button>Send</button></form>
<script>
const log = document.getElementById("log");
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
const add = (t) => { const p = document.createElement("div"); p.textContent = t; log.append(p); log.scrollTop = log.scrollHeight; };
ws.onmessage = (e) => add(e.data);
ws.onclose = (e) => add("(closed " + e.code + ")");
document.getElementById("f").onsubmit = (e) => {
  e.preventDefault();
  const m = document.getElementById("m");
  if (m.value) { ws.send(m.value); m.value = ""; }
};
</script>
"#;

async fn feed(_req: Request) -> Html<&'static str> {
    Html(FEED)
}

/// The room read-only, over server-sent events (the browser's `EventSource`).
const FEED: &str = r#"<!doctype html>
<meta charset="utf-8"><title>Peregrine chat feed</title>
<style>body{font:16px system-ui;max-width:40em;margin:2em auto}#log{height:20em;overflow:auto;border:1px solid #ccc;padding:.5em}</style>
<h1>Peregrine chat feed (SSE)</h1>
<div id="log"></div>
<script>
const log = document.getElementById("log");
const events = new EventSource("/events");
events.onopen = () => document.body.dataset.open = "1";
events.onmessage = (e) => { const p = document.createElement("div"); p.textContent = e.data; log.append(p); };
</script>
"#;

fn main() -> std::io::Result<()> {
    use peregrine::server::h2::Http2OnlyAcceptor;
    let bad = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    // ADDR, WORKERS, TLS_CERT / TLS_KEY... from the environment, or --addr, --tls-cert... flags.
    let config = peregrine::config::from_env_and_args(std::env::args().skip(1)).map_err(bad)?;
    #[cfg(feature = "http3")]
    let config = {
        let mut config = config;
        config.server.http3.zero_rtt = std::env::var("H3_ZERO_RTT").as_deref() == Ok("1");
        config
    };
    let (room, _) = broadcast::channel(256);
    let mut others = Vec::new();
    // Optionally a cleartext port that speaks only HTTP/2 (h2c with prior knowledge): an
    // acceptor of the engine's own, so through `into_server`.
    if let Ok(addr) = std::env::var("H2C_ADDR") {
        let addr = addr.parse().map_err(|e| bad(format!("H2C_ADDR: {e}")))?;
        let h2c = peregrine::ServerConfig {
            addr,
            ..config.server.clone()
        };
        let (server, service) = app(&room).into_server(h2c)?;
        let handle = server.with_acceptor(Http2OnlyAcceptor).serve(service)?;
        println!("http://{} (HTTP/2 only)", handle.local_addr());
        others.push(handle);
    }
    // ADDR always serves cleartext (HTTP/1.1, and h2c for clients starting with its preface);
    // with certificates, TLS_ADDR serves TLS: HTTP/2 or HTTP/1.1 by ALPN, reloaded on SIGHUP.
    let main = match &config.tls {
        None => config,
        Some(_) => {
            let plain = app(&room).serve(config.server.clone())?;
            println!("http://{} (HTTP/1.1 and h2c)", plain.local_addr());
            others.push(plain);
            let addr = std::env::var("TLS_ADDR").unwrap_or_else(|_| "127.0.0.1:8443".into());
            let mut tls = config;
            tls.server.addr = addr.parse().map_err(|e| bad(format!("TLS_ADDR: {e}")))?;
            println!("https://{} (HTTP/2 and HTTP/1.1 by ALPN)", tls.server.addr);
            tls
        }
    };
    // Until SIGTERM / SIGINT; then every listener drains.
    let result = app(&room).run(main);
    for handle in others {
        handle.shutdown();
    }
    result
}
