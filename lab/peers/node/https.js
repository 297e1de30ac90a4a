'use strict';
// node:https peer for the lab's HTTPS lanes (./scripts/lab protocols): the built-in server with the
// lab's certificate (TLS_CERT, TLS_KEY), one process per worker (node:cluster when WORKERS > 1). It
// serves /plaintext (the lanes' route) as the node:http peer does.

const fs = require('node:fs');
const https = require('node:https');
const { addr, clustered, keepAlive } = require('./common');

const HELLO = 'Hello, World!';

function handle(req, res) {
  if (req.url === '/plaintext' && (req.method === 'GET' || req.method === 'HEAD')) {
    res.writeHead(200, {
      Server: 'Node.js https',
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': HELLO.length,
    });
    res.end(HELLO);
    return;
  }
  res.writeHead(404, { Server: 'Node.js https', 'Content-Type': 'text/plain; charset=utf-8' });
  res.end('Not Found');
}

clustered(() => {
  const { host, port } = addr();
  const options = {
    cert: fs.readFileSync(process.env.TLS_CERT),
    key: fs.readFileSync(process.env.TLS_KEY),
    // TLS 1.2 and 1.3 only, as every server of the lane; Node's default ciphers.
    minVersion: 'TLSv1.2',
  };
  keepAlive(https.createServer(options, handle)).listen(port, host);
});
