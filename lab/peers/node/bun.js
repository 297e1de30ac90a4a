'use strict';
// Bun peer: Bun.serve with its `routes` table, run by the Bun binary from the `bun` npm package
// (node_modules/.bin/bun). WORKERS > 1 starts WORKERS Bun processes sharing the port through
// SO_REUSEPORT (`reusePort`), the way Bun's documentation scales Bun.serve over cores. It serves
// every scenario but `middleware`: Bun.serve has no middleware layers. Handlers that throw go
// through Bun.serve's `error` handler.

const { addr, workers, PROBLEM, fail, buildLarge, uint, newUser } = require('./common');

const db = require('./db');

const LARGE = buildLarge();
// Bun sends Date but no Server header, which the contract requires.
const SERVER = { Server: 'Bun' };
const TEXT = { ...SERVER, 'Content-Type': 'text/plain; charset=utf-8' };

function json(value, status = 200) {
  return Response.json(value, { status, headers: SERVER });
}

function notFound() {
  return new Response('Not Found', { status: 404, headers: TEXT });
}

/**
 * The database scenarios on Bun's built-in SQL client (Bun.sql: prepared statements by
 * default, concurrent queries pipelined), DB_POOL ÷ WORKERS connections per process; {} (no
 * routes) without DATABASE_URL. Thrown driver errors reach the `error` handler (500).
 */
function dbRoutes() {
  const url = process.env.DATABASE_URL;
  if (!url) return {};
  const { SQL } = require('bun');
  const sql = new SQL({ url, max: db.poolSize() });
  const world = async (id) => {
    const [row] = await sql`SELECT id, randomnumber FROM world WHERE id = ${id}`;
    return { id: row.id, randomNumber: row.randomnumber };
  };
  const many = (n) => Promise.all(Array.from({ length: n }, () => world(db.randomId())));
  const count = (req) => db.queryCount(new URL(req.url).searchParams.get('q'));
  return {
    '/db': { GET: async () => json(await world(db.randomId())) },
    '/queries': { GET: async (req) => json(await many(count(req))) },
    '/updates': {
      GET: async (req) => {
        const [worlds, ids, nums] = db.newNumbers(await many(count(req)));
        await sql`UPDATE world SET randomnumber = w.r
          FROM (SELECT unnest(${sql.array(ids, 'int4')}::int[]) AS id, unnest(${sql.array(nums, 'int4')}::int[]) AS r) AS w
          WHERE world.id = w.id`;
        return json(worlds);
      },
    },
    '/fortunes': {
      GET: async () =>
        new Response(db.renderFortunes(await sql`SELECT id, message FROM fortune`), {
          headers: { ...SERVER, 'Content-Type': 'text/html; charset=utf-8' },
        }),
    },
  };
}

function start() {
  const { host, port } = addr();
  Bun.serve({
    hostname: host,
    port,
    reusePort: workers() > 1,
    development: false,
    // Bun closes idle connections after 10 s by default; 65 s like the other peers (see common.js).
    idleTimeout: 65,
    routes: {
      '/plaintext': { GET: () => new Response('Hello, World!', { headers: TEXT }) },
      '/json': { GET: () => json({ message: 'Hello, World!' }) },
      '/users/:id': {
        GET: (req) => {
          const id = uint(req.params.id);
          return id === null ? notFound() : json({ id, name: `user-${id}` });
        },
      },
      '/users': {
        POST: async (req) => {
          let user;
          try {
            user = newUser(await req.json());
          } catch {
            user = null;
          }
          return user ? json(user, 201) : json({ error: 'name, email and age are required' }, 400);
        },
      },
      '/search': {
        GET: (req) => {
          const params = new URL(req.url).searchParams;
          const q = params.get('q');
          const limit = uint(params.get('limit') ?? '');
          return q !== null && limit !== null ? json({ q, limit }) : json({ error: 'q and an integer limit are required' }, 400);
        },
      },
      '/api/v1/orgs/:org/teams/:team/members/:member': {
        GET: (req) => {
          const org = uint(req.params.org);
          const team = uint(req.params.team);
          const member = uint(req.params.member);
          return org === null || team === null || member === null ? notFound() : json({ org, team, member });
        },
      },
      '/error': {
        GET: () => {
          fail();
        },
      },
      '/large': { GET: () => json(LARGE) },
      '/empty': { GET: () => new Response(null, { status: 204, headers: SERVER }) },
      ...dbRoutes(),
    },
    fetch: () => notFound(),
    error: () =>
      new Response(JSON.stringify(PROBLEM), {
        status: 500,
        headers: { ...SERVER, 'Content-Type': 'application/problem+json' },
      }),
  });
}

const n = workers();
if (n === 1 || process.env.BUN_PEER_CHILD) {
  start();
} else {
  // Supervisor: start n servers; if one dies, stop the rest and fail; SIGTERM/SIGINT stop all.
  const children = [];
  let stopping = false;
  const stop = (code) => {
    stopping = true;
    for (const child of children) child.kill('SIGTERM');
    Promise.all(children.map((c) => c.exited)).then(() => process.exit(code));
  };
  for (let i = 0; i < n; i++) {
    const child = Bun.spawn([process.execPath, __filename], {
      env: { ...process.env, BUN_PEER_CHILD: '1' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.exited.then((code) => {
      if (!stopping) {
        console.error(`bun worker ${child.pid} exited (${code}); stopping`);
        stop(1);
      }
    });
    children.push(child);
  }
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
}
