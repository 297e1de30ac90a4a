'use strict';
// Bun.serve as Lemire's post writes it (SEED=lemire): `/simple` → Hello, anything else Not Found.

const { addr, seed } = require('./shape');

seed(['lemire']);
const { host, port } = addr();
Bun.serve({
  hostname: host,
  port,
  fetch(req) {
    if (new URL(req.url).pathname === '/simple') return new Response('Hello');
    return new Response('Not Found.');
  },
});
