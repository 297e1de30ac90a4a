'use strict';
// node:http in the seeds' shape: NURL's `GET /` (Hello, World!\n) and rust-http's Apache fake,
// one process, Node's defaults (the seeds' "Node" rows).

const http = require('node:http');
const { addr, seed, NURL_BODY, APACHE_BODY, APACHE_FIELDS } = require('./shape');

const which = seed(['nurl', 'rust-http']);
const server = http.createServer((req, res) => {
  if (req.method !== 'GET' || req.url !== '/') {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not Found');
  } else if (which === 'nurl') {
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end(NURL_BODY);
  } else {
    res.writeHead(200, APACHE_FIELDS).end(APACHE_BODY);
  }
});
const { host, port } = addr();
server.listen(port, host);
