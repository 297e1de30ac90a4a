'use strict';
// Express peer: Express 5 with its defaults (x-powered-by off, as Express's production guide says),
// one process per worker (node:cluster when WORKERS > 1). Middleware are route-level middleware
// functions, errors go through an error-handling middleware.

const express = require('express');
const { addr, clustered, PROBLEM, fail, buildLarge, newUser, keepAlive } = require('./common');

const LARGE = buildLarge();
const UINT = /^[0-9]{1,15}$/;

function build() {
  const app = express();
  app.disable('x-powered-by');

  // Express (through node:http) sends Date but no Server header, which the contract requires.
  app.use((req, res, next) => {
    res.setHeader('Server', 'Express');
    next();
  });

  app.get('/plaintext', (req, res) => {
    res.type('text/plain').send('Hello, World!');
  });

  app.get('/json', (req, res) => {
    res.json({ message: 'Hello, World!' });
  });

  app.get('/users/:id', (req, res, next) => {
    if (!UINT.test(req.params.id)) return next('route');
    const id = Number(req.params.id);
    res.json({ id, name: `user-${id}` });
  });

  app.post('/users', express.json(), (req, res) => {
    const user = newUser(req.body);
    if (!user) return res.status(400).json({ error: 'name, email and age are required' });
    res.status(201).json(user);
  });

  app.get('/search', (req, res) => {
    const { q, limit } = req.query;
    if (typeof q !== 'string' || typeof limit !== 'string' || !UINT.test(limit)) {
      return res.status(400).json({ error: 'q and an integer limit are required' });
    }
    res.json({ q, limit: Number(limit) });
  });

  app.get('/api/v1/orgs/:org/teams/:team/members/:member', (req, res, next) => {
    const { org, team, member } = req.params;
    if (![org, team, member].every((s) => UINT.test(s))) return next('route');
    res.json({ org: Number(org), team: Number(team), member: Number(member) });
  });

  // Five middleware layers, each setting its own header before passing on.
  const mark = (n) => (req, res, next) => {
    res.setHeader(`x-mw-${n}`, '1');
    next();
  };
  app.get('/middleware', mark(1), mark(2), mark(3), mark(4), mark(5), (req, res) => {
    res.type('text/plain').send('OK');
  });

  app.get('/error', () => {
    fail();
  });

  app.get('/large', (req, res) => {
    res.json(LARGE);
  });

  app.get('/empty', (req, res) => {
    res.status(204).end();
  });

  // The error path: Express routes anything a handler throws here.
  app.use((err, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err.status >= 400 && err.status < 500) {
      return res.status(err.status).json({ error: err.message });
    }
    res.status(500).type('application/problem+json').send(JSON.stringify(PROBLEM));
  });

  return app;
}

clustered(() => {
  const { host, port } = addr();
  keepAlive(
    build().listen(port, host, (err) => {
      if (err) {
        console.error(err);
        process.exit(1);
      }
    }),
  );
});
