'use strict';
// Express set up as TechEmpower's Express entry sets it up (frameworks/JavaScript/express,
// src/server.mjs there): x-powered-by and ETag off, and /plaintext and /json answered with
// node:http's own res.writeHead().end() instead of Express's res.send()/res.json(), headers given
// in the writeHead call. It serves what that entry serves without a database: /plaintext and /json.
// The idiomatic Express peer (res.send, ETag on by default) is express.js.

const express = require('express');
const { addr, clustered } = require('./common');

const HELLO = 'Hello, World!';

function build() {
  const app = express();
  app.set('x-powered-by', false);
  app.set('etag', false);

  // Content-Length is the one header added to TechEmpower's: with writeHead() first, node:http
  // would send the body chunked, and the lab's contract wants a length.
  app.get('/plaintext', (req, res) => {
    res
      .writeHead(200, {
        'content-type': 'text/plain',
        'content-length': HELLO.length,
        server: 'Express',
      })
      .end(HELLO);
  });

  app.get('/json', (req, res) => {
    // Serialised per request, as the contract asks.
    const body = JSON.stringify({ message: HELLO });
    res
      .writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        server: 'Express',
      })
      .end(body);
  });

  return app;
}

clustered(() => {
  const { host, port } = addr();
  const server = build().listen(port, host, (err) => {
    if (err) {
      console.error(err);
      process.exit(1);
    }
  });
  // TechEmpower's setting: no keep-alive timeout (idle connections stay open, which the lab's
  // idle-memory step needs too).
  server.keepAliveTimeout = 0;
});
