'use strict';
// node:http peer: the built-in server with hand routing, one process per worker (node:cluster when
// WORKERS > 1). It serves every scenario but `middleware`: node:http has no middleware layers, and
// one handler setting five headers would not be the scenario. Errors thrown by a handler are turned
// into the problem+json 500 by the dispatcher.

const http = require('node:http');
const { addr, clustered, PROBLEM, fail, buildLarge, uint, newUser, keepAlive } = require('./common');

const db = require('./db');

const LARGE = buildLarge();
let DB = null; // the database scenarios, opened per process when DATABASE_URL is set
const HELLO = 'Hello, World!';

// node:http sends Date but no Server header, which the contract requires.
function send(res, status, contentType, body) {
  const headers = { Server: 'Node.js http' };
  if (contentType !== null) {
    headers['Content-Type'] = contentType;
    headers['Content-Length'] = Buffer.byteLength(body);
  }
  res.writeHead(status, headers);
  res.end(body);
}

function json(res, status, value) {
  send(res, status, 'application/json', JSON.stringify(value));
}

function notFound(res) {
  send(res, 404, 'text/plain; charset=utf-8', 'Not Found');
}

function badRequest(res) {
  send(res, 400, 'text/plain; charset=utf-8', 'Bad Request');
}

const BODY_LIMIT = 1 << 20;

class TooLarge extends Error {}

// A body over the limit is refused from its declared length when there is one, so that a client
// announcing a huge body is answered at once instead of being waited for.
function readBody(req, limit = BODY_LIMIT) {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length']) > limit) {
      reject(new TooLarge());
      return;
    }
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > limit) reject(new TooLarge());
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// POST /users is the only route that waits (for the body); every other route answers
// synchronously, so a request costs no promise of its own.
async function createUser(req, res) {
  let user;
  try {
    user = newUser(JSON.parse(await readBody(req)));
  } catch (err) {
    if (err instanceof TooLarge) {
      // The rest of the body is not read, so the connection cannot be reused.
      res.shouldKeepAlive = false;
      return send(res, 413, 'text/plain; charset=utf-8', 'Content Too Large');
    }
    user = null;
  }
  return user ? json(res, 201, user) : badRequest(res);
}

function route(req, res) {
  let target = req.url;
  if (target.charCodeAt(0) !== 0x2f) {
    // absolute-form (`GET http://host/path`), which servers must accept (RFC 9112 §3.2.2)
    try {
      const url = new URL(target);
      target = url.pathname + url.search;
    } catch {
      return badRequest(res);
    }
  }
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const parts = path.split('/');
  // HEAD is routed like GET (RFC 9110 §9.3.2); node:http leaves the body out of a HEAD answer.
  const get = req.method === 'GET' || req.method === 'HEAD';
  // parts[0] is the empty string before the leading '/'.
  switch (parts[1]) {
    case 'plaintext':
      if (get && parts.length === 2) return send(res, 200, 'text/plain; charset=utf-8', HELLO);
      break;
    case 'json':
      if (get && parts.length === 2) return json(res, 200, { message: HELLO });
      break;
    case 'users':
      if (req.method === 'POST' && parts.length === 2) return createUser(req, res).catch(() => serverError(res));
      if (get && parts.length === 3) {
        const id = uint(parts[2]);
        if (id !== null) return json(res, 200, { id, name: `user-${id}` });
      }
      break;
    case 'search':
      if (get && parts.length === 2) {
        const params = new URLSearchParams(q < 0 ? '' : target.slice(q + 1));
        const limit = uint(params.get('limit') ?? '');
        const text = params.get('q');
        return text !== null && limit !== null ? json(res, 200, { q: text, limit }) : badRequest(res);
      }
      break;
    case 'api':
      if (get && parts.length === 9 && parts[2] === 'v1' && parts[3] === 'orgs' && parts[5] === 'teams' && parts[7] === 'members') {
        const org = uint(parts[4]);
        const team = uint(parts[6]);
        const member = uint(parts[8]);
        if (org !== null && team !== null && member !== null) return json(res, 200, { org, team, member });
      }
      break;
    case 'error':
      // fail() throws; handle() turns the exception into the problem+json 500.
      if (get && parts.length === 2) return fail();
      break;
    case 'large':
      if (get && parts.length === 2) return json(res, 200, LARGE);
      break;
    case 'empty':
      if (get && parts.length === 2) return send(res, 204, null, undefined);
      break;
    // database scenarios, the only asynchronous routes (see answerLater)
    case 'db':
      if (DB && get && parts.length === 2) return answerLater(res, DB.single(), (row) => json(res, 200, row));
      break;
    case 'queries':
    case 'updates':
      if (DB && get && parts.length === 2) {
        const n = db.queryCount(new URLSearchParams(q < 0 ? '' : target.slice(q + 1)).get('q'));
        const rows = parts[1] === 'queries' ? DB.queries(n) : DB.updates(n);
        return answerLater(res, rows, (value) => json(res, 200, value));
      }
      break;
    case 'fortunes':
      if (DB && get && parts.length === 2) {
        return answerLater(res, DB.fortunes(), (html) => send(res, 200, 'text/html; charset=utf-8', html));
      }
      break;
  }
  return notFound(res);
}

// The database answers arrive later: route() stays synchronous (no promise per request on the other
// routes), so a driver error, which handle()'s try/catch cannot see, becomes the 500 here.
function answerLater(res, promise, respond) {
  promise.then(respond).catch(() => serverError(res));
}

function serverError(res) {
  if (res.headersSent) {
    res.destroy();
  } else {
    send(res, 500, 'application/problem+json', JSON.stringify(PROBLEM));
  }
}

function handle(req, res) {
  try {
    route(req, res);
  } catch {
    serverError(res);
  }
}

clustered(() => {
  DB = db.open();
  const { host, port } = addr();
  keepAlive(http.createServer(handle)).listen(port, host);
});
