'use strict';
// What the seeds' Node.js and Bun servers share: the packages of the lab's Node peers
// (lab/peers/node, installed there by its `npm ci`), ADDR, the seed named by SEED and its answers.

const { createRequire } = require('node:module');
const path = require('node:path');

const peers = path.join(__dirname, '..', '..', 'node', 'common.js');
/** require() from lab/peers/node: the same fastify, express, hono and koa the lab's peers run. */
const need = createRequire(peers);
const { addr } = require(peers);

const SEEDS = ['nurl', 'rust-http', 'kourier', 'nextrush', 'lemire'];

/** The seed named by SEED; an unknown one stops the server with a clear message. */
function seed(allowed) {
  const s = process.env.SEED || '';
  if (!SEEDS.includes(s) || !allowed.includes(s)) {
    throw new Error(`SEED=${JSON.stringify(s)}: this server serves ${allowed.join(', ')}`);
  }
  return s;
}

const NURL_BODY = 'Hello, World!\n';
// rust-http's "Apache fake": Apache 2.2's default page (177 bytes) and its header fields.
const APACHE_BODY =
  '<html><body><h1>It works!</h1>\n<p>This is the default web page for this server.</p>\n' +
  '<p>The web server software is running but no content has been added, yet.</p>\n</body></html>\n';
const APACHE_FIELDS = {
  'Content-Type': 'text/html',
  Server: 'Apache/2.2.22 (Ubuntu)',
  'Last-Modified': 'Thu, 05 May 2011 11:46:42 GMT',
  ETag: '"501b29-b1-4a285ed47404a"',
  'Accept-Ranges': 'bytes',
  Vary: 'Accept-Encoding',
};

/** NextRush's deep-profile middleware: a log line formatted and dropped (no terminal I/O). */
function logLine(method, url, status) {
  return `${method} ${url} ${status}`.length;
}

module.exports = { need, addr, seed, NURL_BODY, APACHE_BODY, APACHE_FIELDS, logLine };
