//! The database scenarios of the lab (`lab/contract/db.json`, TechEmpower's rules): `/db`,
//! `/queries?q=N`, `/fortunes` and `/updates?q=N` against PostgreSQL.
//!
//! Registered only when `DATABASE_URL` is set, so the plaintext scenarios app is the same app
//! without a database. By default each worker thread owns its own small pool: a request never
//! leaves its worker's runtime. `DB_POOL` is the most connections the app opens in total; each
//! worker opens `DB_POOL / WORKERS` of them, but no more than [`PER_WORKER_MAX`] (or
//! `DB_POOL_PER_WORKER` when set): the queries of a worker's requests pipeline on its
//! connections, and fewer connections carry more messages per system call on both sides
//! (measured in docs/performance.md, "Database paths": 1 or 2 per worker against 8).
//! `DB_POOL_SHARED=1` shares one pool of the same size between the workers instead (measured
//! against it there too).
//!
//! Driver: tokio-postgres. Its `Client` pipelines every query polled concurrently on one
//! connection, so the N reads of `/queries` go out together (`try_join_all`), and `/updates`
//! sends its N reads and one batched write in a single round trip, as TechEmpower's leaders
//! do; statements are prepared once per connection. Fortune messages are borrowed from the
//! rows and escaped straight into the page. Chosen over sqlx without measuring sqlx here:
//! sqlx sends one query per connection at a time (no pipelining), so the N queries of one
//! request would need N connections or N round trips.
//! Templates: sailfish (compiled templates, HTML escaping on `<%= %>`).

use futures_util::future::{try_join, try_join_all};
use peregrine::{
    get, App, Error, Html, IntoResponse, Json, Local, Request, Response, WorkerContext,
};
use sailfish::TemplateSimple;
use serde::Serialize;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls, Statement};

const WORLD_ROWS: i32 = 10_000;

/// The most connections a worker opens unless `DB_POOL_PER_WORKER` says otherwise. Two, not
/// one: as cheap per request as one in the lab's database runs, and a slow statement on one
/// connection leaves the other to the worker's next requests.
pub const PER_WORKER_MAX: usize = 2;

/// Adds the four routes when `DATABASE_URL` is set; the app is unchanged otherwise.
pub fn routes(app: App) -> App {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        return app;
    };
    let workers = env_count("WORKERS", 1);
    let per_worker = match std::env::var("DB_POOL_PER_WORKER") {
        Ok(_) => env_count("DB_POOL_PER_WORKER", PER_WORKER_MAX),
        Err(_) => (env_count("DB_POOL", 8) / workers).clamp(1, PER_WORKER_MAX),
    };
    match std::env::var("DB_POOL_SHARED").as_deref() {
        Ok("1") => routes_shared(app, url, per_worker, workers),
        _ => routes_with(app, url, per_worker),
    }
}

/// The four routes on the database at `url`, each worker with its own pool of `per_worker`
/// connections.
pub fn routes_with(app: App, url: String, per_worker: usize) -> App {
    routes_on(app, url, per_worker, None)
}

/// The four routes on the database at `url`, with one pool of `per_worker × workers`
/// connections shared by every worker (`DB_POOL_SHARED=1`; measured against per-worker pools
/// in docs/performance.md): each worker opens its share on its own runtime, and a request
/// may use a connection whose I/O runs on another worker.
pub fn routes_shared(app: App, url: String, per_worker: usize, workers: usize) -> App {
    let shared = Arc::new(Pool::empty(&url, per_worker * workers.max(1)));
    routes_on(app, url, per_worker, Some(shared))
}

fn routes_on(app: App, url: String, per_worker: usize, shared: Option<Arc<Pool>>) -> App {
    app.with_state(Settings {
        url,
        per_worker,
        shared,
    })
    // Each worker opens its connections on its own runtime (before its first request).
    .on_worker_start(|w: WorkerContext| async move {
        let s = w.state::<Settings>().expect("registered above");
        let pool = match &s.shared {
            Some(pool) => pool.clone(),
            None => Arc::new(Pool::empty(&s.url, s.per_worker)),
        };
        pool.fill(s.per_worker).await?;
        Ok::<_, tokio_postgres::Error>(pool)
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
    /// The pool every worker uses, when shared.
    shared: Option<Arc<Pool>>,
}

/// A positive count from the environment, else `default`.
fn env_count(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
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

/// Connections handed out round-robin (each one pipelines, so none is ever "busy"): a
/// worker's own, or every worker's when shared. A connection the database closed (a restart,
/// a crash) is replaced on demand: a request whose turn falls on a dead one reconnects it, at
/// most once per [`RECONNECT_PAUSE`]; while the database is down, requests get `503` +
/// `Retry-After` at once.
pub struct Pool {
    url: String,
    conns: Vec<Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    /// No reconnection before this (set after a failed one, and while one is under way).
    retry_at: Mutex<Option<Instant>>,
}

/// A lock's value: nothing panics while holding one of the pool's locks, and a value left
/// behind by a panic elsewhere is still a valid slot or instant.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// A pool of `size` empty slots, filled by [`Pool::fill`] (or on demand).
    fn empty(url: &str, size: usize) -> Pool {
        Pool {
            url: url.to_owned(),
            conns: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            retry_at: Mutex::new(None),
        }
    }

    /// Opens `n` connections on this runtime into empty slots (one with no slot left is closed).
    async fn fill(&self, n: usize) -> Result<(), tokio_postgres::Error> {
        for _ in 0..n {
            let conn = Arc::new(Conn::open(&self.url).await?);
            if let Some(mut slot) = self.conns.iter().map(locked).find(|s| s.is_none()) {
                *slot = Some(conn);
            }
        }
        Ok(())
    }

    /// A live connection: the next one round-robin, else any live one; `503` when none is
    /// live and the database cannot be reached. A dead slot is reconnected: in the
    /// background while a live connection serves, by this request when none is left.
    async fn conn(pool: &Arc<Pool>) -> Result<Arc<Conn>, Error> {
        let n = pool.conns.len();
        let start = pool.next.fetch_add(1, Ordering::Relaxed) % n;
        match &*locked(&pool.conns[start]) {
            Some(c) if !c.client.is_closed() => return Ok(c.clone()),
            _ => {}
        }
        // This turn's slot is dead: any live one serves while it is reconnected.
        let live = (1..n).find_map(|k| match &*locked(&pool.conns[(start + k) % n]) {
            Some(c) if !c.client.is_closed() => Some(c.clone()),
            _ => None,
        });
        let may_retry = {
            let mut retry_at = locked(&pool.retry_at);
            let may = retry_at.is_none_or(|t| Instant::now() >= t);
            if may {
                // Set now, not in the attempt: the requests polled before it starts must not
                // start their own.
                *retry_at = Some(Instant::now() + CONNECT_TIMEOUT);
            }
            may
        };
        match live {
            Some(c) => {
                if may_retry {
                    tokio::task::spawn_local(Pool::reconnect(pool.clone(), start));
                }
                Ok(c)
            }
            None if may_retry => Pool::reconnect(pool.clone(), start)
                .await
                .ok_or_else(|| unavailable("the database is unreachable")),
            None => Err(unavailable("the database is unreachable")),
        }
    }

    /// Opens a new connection into `slot`; `None` (and a pause before the next attempt) if
    /// the database cannot be reached within [`CONNECT_TIMEOUT`].
    async fn reconnect(pool: Arc<Pool>, slot: usize) -> Option<Arc<Conn>> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Conn::open(&pool.url)).await {
            Ok(Ok(c)) => {
                let c = Arc::new(c);
                *locked(&pool.conns[slot]) = Some(c.clone());
                *locked(&pool.retry_at) = None;
                Some(c)
            }
            failed => {
                if let Ok(Err(e)) = failed {
                    eprintln!("scenarios: database reconnection failed: {e}");
                }
                *locked(&pool.retry_at) = Some(Instant::now() + RECONNECT_PAUSE);
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

async fn single_query(_req: Request, Local(pool): Local<Arc<Pool>>) -> Result<Response, Error> {
    within_timeout(async {
        let world = fetch_world(&*Pool::conn(&pool).await?, random_id()).await?;
        Ok(Json(world).into_response())
    })
    .await
}

async fn queries(req: Request, Local(pool): Local<Arc<Pool>>) -> Result<Response, Error> {
    let n = query_count(&req);
    within_timeout(async {
        let conn = &*Pool::conn(&pool).await?;
        // N reads pipelined on one connection: all sent before the first answer is awaited.
        let worlds = try_join_all((0..n).map(|_| fetch_world(conn, random_id()))).await?;
        Ok(Json(worlds).into_response())
    })
    .await
}

async fn updates(req: Request, Local(pool): Local<Arc<Pool>>) -> Result<Response, Error> {
    let n = query_count(&req);
    within_timeout(update_worlds(&pool, n)).await
}

async fn update_worlds(pool: &Arc<Pool>, n: usize) -> Result<Response, Error> {
    let conn = &*Pool::conn(pool).await?;
    let mut worlds: Vec<World> = (0..n)
        .map(|_| World {
            id: random_id(),
            random_number: random_id(),
        })
        .collect();
    // One id drawn twice gets one value, in the answer and the database alike.
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
    // The N reads and the batched write in one round trip, as TechEmpower's leaders send them:
    // `try_join` polls the reads first, so they reach the connection (and PostgreSQL, which
    // runs one connection's statements in order) before the write.
    let reads = try_join_all(worlds.iter().map(|w| fetch_world(conn, w.id)));
    let write = async {
        conn.client
            .execute(&conn.update, &[&ids, &numbers])
            .await
            .map_err(db_error)
    };
    try_join(reads, write).await?;
    Ok(Json(worlds).into_response())
}

/// A fortune row; the message borrowed from the row's own buffer (no `String` per row).
struct Fortune<'a> {
    id: i32,
    message: &'a str,
}

/// `templates/fortunes.stpl`: TechEmpower's table; `<%= %>` HTML-escapes straight into the
/// page's buffer.
#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage<'a> {
    fortunes: Vec<Fortune<'a>>,
}

async fn fortunes(_req: Request, Local(pool): Local<Arc<Pool>>) -> Result<Response, Error> {
    let rows = within_timeout(async {
        let conn = Pool::conn(&pool).await?;
        conn.client
            .query(&conn.fortunes, &[])
            .await
            .map_err(db_error)
    })
    .await?;
    let mut fortunes = Vec::with_capacity(rows.len() + 1);
    for r in &rows {
        fortunes.push(Fortune {
            id: r.try_get(0).map_err(Error::internal_from)?,
            message: r.try_get(1).map_err(Error::internal_from)?,
        });
    }
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.",
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(b.message));
    let page = FortunesPage { fortunes }
        .render_once()
        .map_err(Error::internal_from)?;
    Ok(Html(page).into_response())
}
