'use strict';
// Koa 3 with @koa/router and @koa/bodyparser as NextRush's benchmark app (SEED=nextrush).

const { need, addr, seed } = require('./shape');

seed(['nextrush']);
const Koa = need('koa');
const { Router } = need('@koa/router');
const { bodyParser } = need('@koa/bodyparser');
const app = new Koa();
const router = new Router();
router.get('/', (ctx) => {
  ctx.body = { message: 'Hello World' };
});
router.get('/text', (ctx) => {
  ctx.body = 'Hello World';
});
router.get('/users/:id', (ctx) => {
  ctx.body = { id: ctx.params.id };
});
router.get('/search', (ctx) => {
  ctx.body = { q: ctx.query.q };
});
router.post('/users', bodyParser(), (ctx) => {
  ctx.status = 201;
  ctx.body = ctx.request.body;
});
app.use(router.routes()).use(router.allowedMethods());
const { host, port } = addr();
app.listen(port, host);
