'use strict';
// Hono peer: Hono 4 on @hono/node-server, one process per worker (node:cluster when WORKERS > 1).
// Middleware are Hono middleware (app.use), errors go through app.onError.

const { Hono } = require('hono');
const { HTTPException } = require('hono/http-exception');
const { serve } = require('@hono/node-server');
const { addr, clustered, PROBLEM, fail, buildLarge, newUser, keepAlive } = require('./common');

const LARGE = buildLarge();
const UINT = /^[0-9]{1,15}$/;

function build() {
  const app = new Hono();

  // @hono/node-server (through node:http) sends Date but no Server header, which the contract requires.
  app.use(async (c, next) => {
    c.header('Server', 'Hono');
    await next();
  });

  app.get('/plaintext', (c) => c.text('Hello, World!'));

  app.get('/json', (c) => c.json({ message: 'Hello, World!' }));

  app.get('/users/:id', (c) => {
    const raw = c.req.param('id');
    if (!UINT.test(raw)) return c.notFound();
    const id = Number(raw);
    return c.json({ id, name: `user-${id}` });
  });

  // No body limit: Hono sets none by default, and its bodyLimit middleware costs ~100 us per
  // request here (post_json 31 -> 131-142 us/request), which would dominate this cell; see
  // lab/peers/README.md.
  app.post('/users', async (c) => {
    let user;
    try {
      user = newUser(await c.req.json());
    } catch {
      user = null;
    }
    if (!user) return c.json({ error: 'name, email and age are required' }, 400);
    return c.json(user, 201);
  });

  app.get('/search', (c) => {
    const q = c.req.query('q');
    const limit = c.req.query('limit');
    if (q === undefined || limit === undefined || !UINT.test(limit)) {
      return c.json({ error: 'q and an integer limit are required' }, 400);
    }
    return c.json({ q, limit: Number(limit) });
  });

  app.get('/api/v1/orgs/:org/teams/:team/members/:member', (c) => {
    const { org, team, member } = c.req.param();
    if (![org, team, member].every((s) => UINT.test(s))) return c.notFound();
    return c.json({ org: Number(org), team: Number(team), member: Number(member) });
  });

  // Five middleware layers on /middleware, each setting its own header after the handler ran.
  for (let n = 1; n <= 5; n++) {
    const name = `x-mw-${n}`;
    app.use('/middleware', async (c, next) => {
      await next();
      c.header(name, '1');
    });
  }
  app.get('/middleware', (c) => c.text('OK'));

  app.get('/error', () => {
    fail();
  });

  app.get('/large', (c) => c.json(LARGE));

  app.get('/empty', (c) => c.body(null, 204));

  // The error path: Hono routes anything a handler throws here. HTTPExceptions (Hono's own client
  // errors) carry their own answer.
  app.onError((err, c) => {
    if (err instanceof HTTPException) {
      const res = err.getResponse();
      res.headers.set('Server', 'Hono');
      return res;
    }
    return c.body(JSON.stringify(PROBLEM), 500, { 'Content-Type': 'application/problem+json' });
  });

  return app;
}

clustered(() => {
  const { host, port } = addr();
  keepAlive(serve({ fetch: build().fetch, hostname: host, port }));
});
