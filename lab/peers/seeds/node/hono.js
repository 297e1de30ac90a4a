'use strict';
// Hono 4 on @hono/node-server as NextRush's benchmark app (SEED=nextrush).

const { need, addr, seed } = require('./shape');

seed(['nextrush']);
const { Hono } = need('hono');
const { serve } = need('@hono/node-server');
const app = new Hono();
app.get('/', (c) => c.json({ message: 'Hello World' }));
app.get('/text', (c) => c.text('Hello World'));
app.get('/users/:id', (c) => c.json({ id: c.req.param('id') }));
app.get('/search', (c) => c.json({ q: c.req.query('q') }));
app.post('/users', async (c) => c.json(await c.req.json(), 201));
const { host, port } = addr();
serve({ fetch: app.fetch, hostname: host, port });
