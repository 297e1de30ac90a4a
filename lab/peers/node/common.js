'use strict';
// What every Node.js peer shares: the environment settings (ADDR, WORKERS), process clustering and
// the data of the lab's scenario contract (lab/contract/scenarios.json).

const cluster = require('node:cluster');

/** Listen address from ADDR (host:port), defaulting to 127.0.0.1:8080. */
function addr() {
  const raw = process.env.ADDR || '127.0.0.1:8080';
  const at = raw.lastIndexOf(':');
  const port = Number(raw.slice(at + 1));
  if (at < 0 || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`ADDR=${JSON.stringify(raw)} is not host:port`);
  }
  return { host: raw.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port };
}

/** Worker process count from WORKERS, defaulting to 1. */
function workers() {
  const raw = process.env.WORKERS || '1';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    throw new Error(`WORKERS=${JSON.stringify(raw)} is not a positive integer`);
  }
  return n;
}

/**
 * Runs `start` in this process when WORKERS is 1, else forks WORKERS cluster workers that each run
 * it (they share the listening socket; the primary only supervises). A worker that dies takes the
 * whole server down, so a broken peer fails loudly instead of silently running on fewer workers;
 * SIGTERM/SIGINT on the primary stop the workers and then the primary.
 */
function clustered(start) {
  const n = workers();
  if (n === 1 || !cluster.isPrimary) {
    start();
    return;
  }
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) {
      console.error(`worker ${worker.process.pid} exited (${signal || code}); stopping`);
      stop();
      process.exitCode = 1;
    }
    if (Object.keys(cluster.workers).length === 0) process.exit();
  });
  for (let i = 0; i < n; i++) cluster.fork();
}

/** RFC 9457 problem details answered by the error scenario. */
const PROBLEM = Object.freeze({ type: 'about:blank', title: 'Internal Server Error', status: 500 });

/** The error scenario's handler: always fails. */
function fail() {
  throw new Error('the error scenario always fails');
}

/**
 * Builds the large_json data structure (~10 KiB serialised) once at startup; handlers serialise it
 * per request, as the contract asks (no pre-encoded string).
 */
function buildLarge() {
  const items = [];
  for (let id = 0; id < 134; id++) {
    items.push({ id, name: `item-${id}`, active: id % 2 === 0, score: (id * 7) % 100, tags: ['alpha', 'beta'] });
  }
  return { items };
}

/** Parses a path segment as a non-negative integer, or returns null. */
function uint(segment) {
  return /^[0-9]{1,15}$/.test(segment) ? Number(segment) : null;
}

/** Validates the POST /users body into the typed record echoed back (null if it does not fit). */
function newUser(body) {
  if (body === null || typeof body !== 'object') return null;
  const { name, email, age } = body;
  if (typeof name !== 'string' || typeof email !== 'string' || !Number.isInteger(age) || age < 0) return null;
  return { name, email, age };
}

/**
 * Idle keep-alive timeout for the Node peers: 65 s instead of node:http's 5 s (Fastify's default is
 * already 72 s). The lab's idle-memory step opens thousands of connections one after the other,
 * which takes longer than 5 s on Node, and measures them while they are idle: with 5 s the first
 * ones would already be closed. 65 s is nginx's Debian value; headersTimeout stays above it, as
 * Node's documentation advises for servers behind keep-alive clients.
 */
function keepAlive(server) {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  return server;
}

module.exports = { addr, workers, clustered, PROBLEM, fail, buildLarge, uint, newUser, keepAlive };
