'use strict';
// node:http2 peer for the lab's HTTP/2 lane (./scripts/lab protocols): http2.createSecureServer with
// the lab's certificate (TLS_CERT, TLS_KEY), the compatibility API's request handler, HTTP/2 only
// (ALPN h2; HTTP/1.1 clients are the node:https peer's), one process per worker (node:cluster when
// WORKERS > 1).

const fs = require('node:fs');
const http2 = require('node:http2');
const { addr, clustered } = require('./common');

const HELLO = 'Hello, World!';

function handle(req, res) {
  if (req.url === '/plaintext' && (req.method === 'GET' || req.method === 'HEAD')) {
    res.writeHead(200, {
      server: 'Node.js http2',
      'content-type': 'text/plain; charset=utf-8',
      'content-length': HELLO.length,
    });
    res.end(HELLO);
    return;
  }
  res.writeHead(404, { server: 'Node.js http2', 'content-type': 'text/plain; charset=utf-8' });
  res.end('Not Found');
}

clustered(() => {
  const { host, port } = addr();
  const server = http2.createSecureServer(
    {
      cert: fs.readFileSync(process.env.TLS_CERT),
      key: fs.readFileSync(process.env.TLS_KEY),
      minVersion: 'TLSv1.2',
    },
    handle,
  );
  // The idle-memory step holds connections open longer than the 2-minute default allows anyway;
  // set it like the other Node peers' keep-alive (65 s).
  server.setTimeout(65_000);
  server.listen(port, host);
});
