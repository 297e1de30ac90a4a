'use strict';
// Fastify as NextRush's benchmark app (SEED=nextrush) or as Lemire's post writes it
// (SEED=lemire: `f.get('/simple', async () => "hello")`, nothing configured). Runs on Node or Bun.

const { need, addr, seed, logLine } = require('./shape');

const which = seed(['nextrush', 'lemire']);
const f = need('fastify')();
if (which === 'lemire') {
  f.get('/simple', async () => 'hello');
} else {
  f.get('/', async () => ({ message: 'Hello World' }));
  f.get('/text', async () => 'Hello World');
  f.get('/users/:id', async (req) => ({ id: req.params.id }));
  f.get('/search', async (req) => ({ q: req.query.q }));
  f.post('/users', async (req, reply) => reply.code(201).send(req.body));
  f.register(async (mw) => {
    mw.addHook('onRequest', async (req) => {
      req.started = process.hrtime.bigint();
    });
    mw.addHook('onResponse', async (req, reply) => {
      logLine(req.method, req.url, reply.statusCode);
    });
    mw.addHook('onRequest', async (req, reply) => {
      if (!(req.headers.authorization || '').startsWith('Bearer ')) {
        return reply.code(401).send('Unauthorized');
      }
      return undefined;
    });
    mw.addHook('onSend', async (req, reply, payload) => {
      reply.header('Access-Control-Allow-Origin', '*');
      reply.header('X-Response-Time', `${(process.hrtime.bigint() - req.started) / 1000n}us`);
      return payload;
    });
    mw.get('/middleware', async () => ({ ok: true }));
  });
}
const { host, port } = addr();
f.listen({ host, port }).catch((e) => {
  console.error(e);
  process.exit(1);
});
