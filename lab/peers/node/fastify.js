'use strict';
// Fastify peer: Fastify 5 with its defaults (logger off), one process per worker (node:cluster when
// WORKERS > 1). JSON routes declare response schemas, as Fastify's documentation advises (they let
// fast-json-stringify compile each serialiser); POST /users declares its body schema too.
// Middleware are Fastify hooks, errors go through setErrorHandler.

const Fastify = require('fastify');
const { addr, clustered, PROBLEM, fail, buildLarge, newUser } = require('./common');

const db = require('./db');

const LARGE = buildLarge();

const int = { type: 'integer' };
const str = { type: 'string' };
const obj = (properties) => ({ type: 'object', properties, required: Object.keys(properties) });
const reply200 = (schema) => ({ schema: { response: { 200: schema } } });
const USER = obj({ name: str, email: str, age: { type: 'integer', minimum: 0 } });
const LARGE_SCHEMA = obj({
  items: {
    type: 'array',
    items: obj({ id: int, name: str, active: { type: 'boolean' }, score: int, tags: { type: 'array', items: str } }),
  },
});

function build() {
  const app = Fastify({ logger: false });

  // Fastify (through node:http) sends Date but no Server header, which the contract requires.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('server', 'Fastify');
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    if (error.statusCode >= 400 && error.statusCode < 500) {
      // Fastify's own client errors (bad JSON body, ...) keep their status.
      reply.code(error.statusCode).send({ error: error.message });
      return;
    }
    reply.code(500).type('application/problem+json').send(JSON.stringify(PROBLEM));
  });

  app.get('/plaintext', async (request, reply) => {
    reply.type('text/plain; charset=utf-8');
    return 'Hello, World!';
  });

  app.get('/json', reply200(obj({ message: str })), async () => ({ message: 'Hello, World!' }));

  app.get('/users/:id', reply200(obj({ id: int, name: str })), async (request, reply) => {
    const id = Number(request.params.id);
    if (!/^[0-9]{1,15}$/.test(request.params.id)) return reply.callNotFound();
    return { id, name: `user-${id}` };
  });

  app.post('/users', { schema: { body: USER, response: { 201: USER } } }, async (request, reply) => {
    const user = newUser(request.body);
    if (!user) return reply.code(400).send({ error: 'name, email and age are required' });
    return reply.code(201).send(user);
  });

  app.get('/search', reply200(obj({ q: str, limit: int })), async (request, reply) => {
    const { q, limit } = request.query;
    if (typeof q !== 'string' || !/^[0-9]{1,15}$/.test(limit ?? '')) {
      return reply.code(400).send({ error: 'q and an integer limit are required' });
    }
    return { q, limit: Number(limit) };
  });

  app.get('/api/v1/orgs/:org/teams/:team/members/:member', reply200(obj({ org: int, team: int, member: int })), async (request, reply) => {
    const { org, team, member } = request.params;
    if (![org, team, member].every((s) => /^[0-9]{1,15}$/.test(s))) return reply.callNotFound();
    return { org: Number(org), team: Number(team), member: Number(member) };
  });

  // Five middleware layers as five hooks, in an encapsulated plugin so only /middleware runs them.
  app.register(async (scope) => {
    for (let n = 1; n <= 5; n++) {
      const name = `x-mw-${n}`;
      scope.addHook('onRequest', (request, reply, done) => {
        reply.header(name, '1');
        done();
      });
    }
    scope.get('/middleware', async (request, reply) => {
      reply.type('text/plain; charset=utf-8');
      return 'OK';
    });
  });

  app.get('/error', async () => {
    fail();
  });

  app.get('/large', reply200(LARGE_SCHEMA), async () => LARGE);

  app.get('/empty', async (request, reply) => {
    reply.code(204).send();
  });

  // The database scenarios, when DATABASE_URL is set (driver errors reach setErrorHandler).
  const DB = db.open();
  if (DB) {
    app.get('/db', async () => DB.single());
    app.get('/queries', async (request) => DB.queries(db.queryCount(request.query.q)));
    app.get('/updates', async (request) => DB.updates(db.queryCount(request.query.q)));
    app.get('/fortunes', async (request, reply) => {
      reply.type('text/html; charset=utf-8');
      return DB.fortunes();
    });
  }

  return app;
}

clustered(() => {
  const { host, port } = addr();
  build().listen({ host, port }, (err) => {
    if (err) {
      console.error(err);
      process.exit(1);
    }
  });
});
