'use strict';
// The database scenarios (lab/contract/db.json, TechEmpower's rules) shared by the Node peers
// (node:http, Fastify): the `postgres` driver (postgres.js: prepared statements by default, queries
// pipelined on its connections), DB_POOL connections in total split over the WORKERS processes, an
// escaping template literal for the fortunes page. Bun's peer uses Bun's own SQL client with the
// same helpers (queryCount, renderFortunes).

const WORLD_ROWS = 10000;
const ADDITIONAL = 'Additional fortune added at request time.';

const randomId = () => 1 + Math.floor(Math.random() * WORLD_ROWS);

/** q of the query string, TechEmpower's way: not a number → 1, then clamped to 1..500. */
function queryCount(raw) {
  const n = Number.parseInt(raw, 10);
  if (!Number.isInteger(n) || n < 1) return 1;
  return n > 500 ? 500 : n;
}

/** Connections for this process: DB_POOL (default 8) ÷ WORKERS, at least one. */
function poolSize() {
  const total = Number(process.env.DB_POOL) || 8;
  const workers = Number(process.env.WORKERS) || 1;
  return Math.max(1, Math.floor(total / workers));
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (s) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** Every row plus the one added at request time, sorted by message, as TechEmpower's table. */
function renderFortunes(rows) {
  const all = rows.map((r) => ({ id: r.id, message: r.message }));
  all.push({ id: 0, message: ADDITIONAL });
  all.sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
  let html = '<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>';
  for (const f of all) html += `<tr><td>${f.id}</td><td>${escapeHtml(f.message)}</td></tr>`;
  return html + '</table></body></html>';
}

/**
 * The new numbers of an update: one per row read; an id drawn twice gets the last number drawn, in
 * the answer and the database. Returns [worlds, sorted ids, their numbers] (sorted so concurrent
 * batches lock rows in the same order).
 */
function newNumbers(worlds) {
  const latest = new Map();
  for (const w of worlds) {
    w.randomNumber = randomId();
    latest.set(w.id, w.randomNumber);
  }
  for (const w of worlds) w.randomNumber = latest.get(w.id);
  const ids = [...latest.keys()].sort((a, b) => a - b);
  return [worlds, ids, ids.map((id) => latest.get(id))];
}

/** The scenarios on postgres.js, or null without DATABASE_URL. */
function open() {
  const url = process.env.DATABASE_URL;
  if (!url) return null;
  const postgres = require('postgres');
  // fetch_types stays on: without it postgres.js cannot send the update's int[] parameters.
  const sql = postgres(url, { max: poolSize(), prepare: true });
  const world = async (id) => {
    const [row] = await sql`SELECT id, randomnumber FROM world WHERE id = ${id}`;
    return { id: row.id, randomNumber: row.randomnumber };
  };
  // N queries issued together: postgres.js pipelines them on its connections.
  const many = (n) => Promise.all(Array.from({ length: n }, () => world(randomId())));
  return {
    single: () => world(randomId()),
    queries: many,
    async updates(n) {
      const [worlds, ids, nums] = newNumbers(await many(n));
      await sql`UPDATE world SET randomnumber = w.r
        FROM (SELECT unnest(${ids}::int[]) AS id, unnest(${nums}::int[]) AS r) AS w
        WHERE world.id = w.id`;
      return worlds;
    },
    async fortunes() {
      return renderFortunes(await sql`SELECT id, message FROM fortune`);
    },
  };
}

module.exports = { open, queryCount, renderFortunes, newNumbers, randomId, poolSize };
