//! The database scenarios of the lab (`lab/contract/db.json`, TechEmpower's rules): `/db`,
//! `/queries?q=N`, `/fortunes` and `/updates?q=N` against PostgreSQL.
//!
//! Registered only when `DATABASE_URL` is set, so the plaintext scenarios app is the same app
//! without a database. Each worker thread owns its own small pool (`DB_POOL` connections in
//! total, split over `WORKERS`): a request never leaves its worker, and no lock or cross-thread
//! handoff sits between a handler and its connection.
//!
//! Driver: tokio-postgres. Its `Client` pipelines every query polled concurrently on one
//! connection, so the N queries of `/queries` and `/updates` go out together (`try_join_all`),
//! and statements are prepared once per connection. Chosen over sqlx without measuring sqlx
//! here (no time left for it): sqlx sends one query per connection at a time (no pipelining),
//! so the N queries of one request would need N connections or N round trips.
//! Templates: sailfish (compiled templates, HTML escaping on `<%= %>`).

use futures_util::future::try_join_all;
use peregrine::{
    get, App, Error, Html, IntoResponse, Json, Local, Request, Response, WorkerContext,
};
use sailfish::TemplateSimple;
use serde::Serialize;
use std::cell::Cell;
use tokio_postgres::{Client, NoTls, Statement};

const WORLD_ROWS: i32 = 10_000;

/// Adds the four routes when `DATABASE_URL` is set; the app is unchanged otherwise.
pub fn routes(app: App) -> App {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        return app;
    };
    let per_worker = pool_size_per_worker();
    app.with_state(Settings { url, per_worker })
        // Each worker opens its own pool on its own runtime (before its first request).
        .on_worker_start(|w: WorkerContext| async move {
            let s = w.state::<Settings>().expect("registered above");
            Pool::connect(&s.url, s.per_worker).await
        })
        .route("/db", get(single_query))
        .route("/queries", get(queries))
        .route("/fortunes", get(fortunes))
        .route("/updates", get(updates))
}

/// What every worker needs to open its pool (shared state, read by the start hook).
pub struct Settings {
    url: String,
    per_worker: usize,
}

/// `DB_POOL` (connections in total, default 8) ÷ `WORKERS`, at least one per worker.
fn pool_size_per_worker() -> usize {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(d)
    };
    (env("DB_POOL", 8) / env("WORKERS", 1)).max(1)
}

/// One connection with its prepared statements.
struct Conn {
    client: Client,
    world: Statement,
    fortunes: Statement,
    update: Statement,
}

/// A worker's connections, handed out round-robin (each one pipelines, so none is ever "busy").
pub struct Pool {
    conns: Vec<Conn>,
    next: Cell<usize>,
}

impl Pool {
    /// Opens `size` connections and prepares the statements on each.
    pub async fn connect(url: &str, size: usize) -> Result<Pool, tokio_postgres::Error> {
        let mut conns = Vec::with_capacity(size);
        for _ in 0..size {
            let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
            // The connection task runs on this worker's runtime, next to its handlers.
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!("scenarios: database connection closed: {e}");
                }
            });
            let (world, fortunes, update) = tokio::try_join!(
                client.prepare("SELECT id, randomnumber FROM world WHERE id = $1"),
                client.prepare("SELECT id, message FROM fortune"),
                // One statement for the whole batch; ids sorted by the caller so concurrent
                // batches lock rows in the same order (no deadlock).
                client.prepare(
                    "UPDATE world SET randomnumber = w.r \
                     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS w \
                     WHERE world.id = w.id"
                ),
            )?;
            conns.push(Conn {
                client,
                world,
                fortunes,
                update,
            });
        }
        Ok(Pool {
            conns,
            next: Cell::new(0),
        })
    }

    fn conn(&self) -> &Conn {
        let i = self.next.get();
        self.next
            .set(if i + 1 == self.conns.len() { 0 } else { i + 1 });
        &self.conns[i]
    }
}

// ---------------------------------------------------------------- handlers

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

fn random_id() -> i32 {
    fastrand::i32(1..=WORLD_ROWS)
}

async fn fetch_world(conn: &Conn, id: i32) -> Result<World, Error> {
    let row = conn
        .client
        .query_one(&conn.world, &[&id])
        .await
        .map_err(Error::internal_from)?;
    Ok(World {
        id: row.get(0),
        random_number: row.get(1),
    })
}

/// `q` of the query string, TechEmpower's way: not a number → 1, then clamped to 1..=500.
fn query_count(req: &Request) -> usize {
    let q = req
        .query_string()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("q="))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(1);
    q.clamp(1, 500) as usize
}

async fn single_query(_req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let world = fetch_world(pool.conn(), random_id()).await?;
    Ok(Json(world).into_response())
}

/// N reads, pipelined on one connection.
async fn fetch_worlds(conn: &Conn, n: usize) -> Result<Vec<World>, Error> {
    try_join_all((0..n).map(|_| fetch_world(conn, random_id()))).await
}

async fn queries(req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let n = query_count(&req);
    Ok(Json(fetch_worlds(pool.conn(), n).await?).into_response())
}

async fn updates(req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let n = query_count(&req);
    let conn = pool.conn();
    let mut worlds = fetch_worlds(conn, n).await?;
    for w in &mut worlds {
        w.random_number = random_id();
    }
    // One id drawn twice gets one value: the last one drawn, in the answer and the database.
    let mut batch: Vec<(i32, i32)> = worlds.iter().map(|w| (w.id, w.random_number)).collect();
    batch.sort_unstable_by_key(|&(id, _)| id);
    batch.dedup_by_key(|&mut (id, _)| id);
    for w in &mut worlds {
        let i = batch
            .binary_search_by_key(&w.id, |&(id, _)| id)
            .unwrap_or(0);
        w.random_number = batch[i].1;
    }
    let (ids, numbers): (Vec<i32>, Vec<i32>) = batch.into_iter().unzip();
    conn.client
        .execute(&conn.update, &[&ids, &numbers])
        .await
        .map_err(Error::internal_from)?;
    Ok(Json(worlds).into_response())
}

struct Fortune {
    id: i32,
    message: String,
}

/// `templates/fortunes.stpl`: TechEmpower's table; `<%= %>` HTML-escapes.
#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage {
    fortunes: Vec<Fortune>,
}

async fn fortunes(_req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let conn = pool.conn();
    let rows = conn
        .client
        .query(&conn.fortunes, &[])
        .await
        .map_err(Error::internal_from)?;
    let mut fortunes: Vec<Fortune> = rows
        .iter()
        .map(|r| Fortune {
            id: r.get(0),
            message: r.get(1),
        })
        .collect();
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.".to_owned(),
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    let page = FortunesPage { fortunes }
        .render_once()
        .map_err(Error::internal_from)?;
    Ok(Html(page).into_response())
}
