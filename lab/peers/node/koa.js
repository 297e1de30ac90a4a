'use strict';
// Koa peer: Koa 3 with @koa/router and @koa/bodyparser, one process per worker (node:cluster when
// WORKERS > 1). Middleware are Koa middleware on the route, errors go through an error-handling
// middleware at the top of the stack (Koa's documented pattern).

const Koa = require('koa');
const { Router } = require('@koa/router');
const { bodyParser } = require('@koa/bodyparser');
const { addr, clustered, PROBLEM, fail, buildLarge, newUser, keepAlive } = require('./common');

const LARGE = buildLarge();
const UINT = /^[0-9]{1,15}$/;

function build() {
  const app = new Koa();
  const router = new Router();

  router.get('/plaintext', (ctx) => {
    ctx.body = 'Hello, World!';
  });

  router.get('/json', (ctx) => {
    ctx.body = { message: 'Hello, World!' };
  });

  router.get('/users/:id', (ctx) => {
    if (!UINT.test(ctx.params.id)) return; // unmatched: Koa answers 404
    const id = Number(ctx.params.id);
    ctx.body = { id, name: `user-${id}` };
  });

  router.post('/users', bodyParser(), (ctx) => {
    const user = newUser(ctx.request.body);
    if (!user) ctx.throw(400, 'name, email and age are required');
    ctx.status = 201;
    ctx.body = user;
  });

  router.get('/search', (ctx) => {
    const { q, limit } = ctx.query;
    if (typeof q !== 'string' || typeof limit !== 'string' || !UINT.test(limit)) {
      ctx.throw(400, 'q and an integer limit are required');
    }
    ctx.body = { q, limit: Number(limit) };
  });

  router.get('/api/v1/orgs/:org/teams/:team/members/:member', (ctx) => {
    const { org, team, member } = ctx.params;
    if (![org, team, member].every((s) => UINT.test(s))) return;
    ctx.body = { org: Number(org), team: Number(team), member: Number(member) };
  });

  // Five middleware layers on /middleware, each setting its own header after the handler ran.
  const mark = (n) => async (ctx, next) => {
    await next();
    ctx.set(`x-mw-${n}`, '1');
  };
  router.get('/middleware', mark(1), mark(2), mark(3), mark(4), mark(5), (ctx) => {
    ctx.body = 'OK';
  });

  router.get('/error', () => {
    fail();
  });

  router.get('/large', (ctx) => {
    ctx.body = LARGE;
  });

  router.get('/empty', (ctx) => {
    ctx.status = 204;
  });

  // Koa (through node:http) sends Date but no Server header, which the contract requires; and
  // the error path: anything thrown below lands here.
  app.use(async (ctx, next) => {
    ctx.set('Server', 'Koa');
    try {
      await next();
    } catch (err) {
      if (err.status >= 400 && err.status < 500) {
        ctx.status = err.status;
        ctx.body = { error: err.message };
        return;
      }
      ctx.status = 500;
      ctx.type = 'application/problem+json';
      ctx.body = JSON.stringify(PROBLEM);
    }
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}

clustered(() => {
  const { host, port } = addr();
  keepAlive(build().listen(port, host));
});
