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
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls, Statement};

const WORLD_ROWS: i32 = 10_000;

/// Adds the four routes when `DATABASE_URL` is set; the app is unchanged otherwise.
pub fn routes(app: App) -> App {
    match std::env::var("DATABASE_URL") {
        Ok(url) => routes_with(app, url, pool_size_per_worker()),
        Err(_) => app,
    }
}

/// The four routes on the database at `url`, `per_worker` connections per worker.
pub fn routes_with(app: App, url: String, per_worker: usize) -> App {
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

impl Conn {
    /// Connects and prepares the statements.
    async fn open(url: &str) -> Result<Conn, tokio_postgres::Error> {
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
        Ok(Conn {
            client,
            world,
            fortunes,
            update,
        })
    }
}

/// How long a reconnection may take before the request gets its 503.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed reconnection, requests get 503 at once for this long (no connection storm
/// against a database that is down).
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);
/// The longest a request waits for the database once connected (well under the lab's request
/// timeouts): a database that stops answering gives 503s, not hung clients.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// A worker's connections, handed out round-robin (each one pipelines, so none is ever "busy").
/// A connection the database closed (a restart, a crash) is replaced on demand: a request
/// that finds no live connection reconnects one, at most once per [`RECONNECT_PAUSE`]; while
/// the database is down, requests get `503` + `Retry-After` at once.
pub struct Pool {
    url: String,
    conns: Vec<RefCell<Option<Rc<Conn>>>>,
    next: Cell<usize>,
    /// No reconnection before this (set after a failed one, and while one is under way).
    retry_at: Cell<Option<Instant>>,
}

impl Pool {
    /// Opens `size` connections and prepares the statements on each.
    pub async fn connect(url: &str, size: usize) -> Result<Pool, tokio_postgres::Error> {
        let mut conns = Vec::with_capacity(size);
        for _ in 0..size {
            conns.push(RefCell::new(Some(Rc::new(Conn::open(url).await?))));
        }
        Ok(Pool {
            url: url.to_owned(),
            conns,
            next: Cell::new(0),
            retry_at: Cell::new(None),
        })
    }

    /// A live connection: the next one round-robin, else any live one; `503` when none is
    /// live and the database cannot be reached. A dead slot is reconnected: in the
    /// background while a live connection serves, by this request when none is left.
    async fn conn(pool: &Rc<Pool>) -> Result<Rc<Conn>, Error> {
        let n = pool.conns.len();
        let start = pool.next.get();
        pool.next.set((start + 1) % n);
        let (mut live, mut dead) = (None, None);
        for i in (0..n).map(|k| (start + k) % n) {
            match &*pool.conns[i].borrow() {
                Some(c) if !c.client.is_closed() => live = live.or_else(|| Some(c.clone())),
                _ => dead = dead.or(Some(i)),
            }
        }
        let may_retry = pool.retry_at.get().is_none_or(|t| Instant::now() >= t);
        if may_retry && dead.is_some() {
            // Set now, not in the attempt: the requests polled before it starts must not
            // start their own.
            pool.retry_at.set(Some(Instant::now() + CONNECT_TIMEOUT));
        }
        match (live, dead) {
            (Some(c), Some(slot)) if may_retry => {
                tokio::task::spawn_local(Pool::reconnect(pool.clone(), slot));
                Ok(c)
            }
            (Some(c), _) => Ok(c),
            (None, Some(slot)) if may_retry => Pool::reconnect(pool.clone(), slot)
                .await
                .ok_or_else(|| unavailable("the database is unreachable")),
            (None, _) => Err(unavailable("the database is unreachable")),
        }
    }

    /// Opens a new connection into `slot`; `None` (and a pause before the next attempt) if
    /// the database cannot be reached within [`CONNECT_TIMEOUT`].
    async fn reconnect(pool: Rc<Pool>, slot: usize) -> Option<Rc<Conn>> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Conn::open(&pool.url)).await {
            Ok(Ok(c)) => {
                let c = Rc::new(c);
                *pool.conns[slot].borrow_mut() = Some(c.clone());
                pool.retry_at.set(None);
                Some(c)
            }
            failed => {
                if let Ok(Err(e)) = failed {
                    eprintln!("scenarios: database reconnection failed: {e}");
                }
                pool.retry_at.set(Some(Instant::now() + RECONNECT_PAUSE));
                None
            }
        }
    }
}

/// `503` with `Retry-After`: the database is down or did not answer in time; the client may
/// retry shortly.
fn unavailable(detail: &'static str) -> Error {
    Error::new(503)
        .with_detail(detail)
        .with_header("retry-after", "1")
}

/// A query's error as the client sees it: the connection lost (the database stopped or
/// restarted) or the database refusing work while it shuts down or starts (SQLSTATE class 57,
/// "operator intervention") is `503`; anything else is the server's own `500`.
fn db_error(e: tokio_postgres::Error) -> Error {
    let down = e.is_closed()
        || e.code().is_some_and(|c| c.code().starts_with("57"))
        || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    if down {
        eprintln!("scenarios: database unavailable: {e}");
        unavailable("the database is unavailable")
    } else {
        Error::internal_from(e)
    }
}

/// Runs a request's database work within [`QUERY_TIMEOUT`]; `503` past it.
async fn within_timeout<T>(work: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    tokio::time::timeout(QUERY_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(unavailable("the database did not answer in time")))
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
        .map_err(db_error)?;
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
    within_timeout(async {
        let world = fetch_world(&*Pool::conn(&pool).await?, random_id()).await?;
        Ok(Json(world).into_response())
    })
    .await
}

/// N reads, pipelined on one connection.
async fn fetch_worlds(conn: &Conn, n: usize) -> Result<Vec<World>, Error> {
    try_join_all((0..n).map(|_| fetch_world(conn, random_id()))).await
}

async fn queries(req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let n = query_count(&req);
    within_timeout(async {
        Ok(Json(fetch_worlds(&*Pool::conn(&pool).await?, n).await?).into_response())
    })
    .await
}

async fn updates(req: Request, Local(pool): Local<Pool>) -> Result<Response, Error> {
    let n = query_count(&req);
    within_timeout(update_worlds(&pool, n)).await
}

async fn update_worlds(pool: &Rc<Pool>, n: usize) -> Result<Response, Error> {
    let conn = &*Pool::conn(pool).await?;
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
        .map_err(db_error)?;
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
    let rows = within_timeout(async {
        let conn = Pool::conn(&pool).await?;
        conn.client
            .query(&conn.fortunes, &[])
            .await
            .map_err(db_error)
    })
    .await?;
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
