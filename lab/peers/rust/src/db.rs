//! The database scenarios (`lab/contract/db.json`, TechEmpower's rules) for the axum and actix-web
//! peers: what their communities use, tokio-postgres behind a deadpool-postgres pool shared by the
//! runtime's threads, statements prepared once per connection (`prepare_cached`), the N queries
//! of one request pipelined on its connection (`try_join_all`), sailfish for the fortunes page.
//! Each framework keeps its own routing, extraction and error path around these functions.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::try_join_all;
use sailfish::TemplateSimple;
use serde::Serialize;
use tokio_postgres::NoTls;

pub const WORLD_ROWS: i32 = 10_000;

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// One statement per batch; ids sorted so concurrent batches lock rows in the same order.
const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = w.r \
     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS w \
     WHERE world.id = w.id";

/// A failure of the database path; each framework answers it with a 500.
#[derive(Debug)]
pub struct DbError(pub String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "database: {}", self.0)
    }
}

impl std::error::Error for DbError {}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError(e.to_string())
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        DbError(e.to_string())
    }
}

/// `DATABASE_URL`, or None: then the peer serves no database route.
pub fn url() -> Option<String> {
    std::env::var("DATABASE_URL").ok()
}

/// `DB_POOL`: connections in total for the whole server (default 8).
pub fn pool_total() -> usize {
    std::env::var("DB_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(8)
}

/// A deadpool-postgres pool of `size` connections to `url` (connections open on first use).
pub fn pool(url: &str, size: usize) -> Pool {
    let config: tokio_postgres::Config = url.parse().expect("DATABASE_URL");
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            // The pool's default (Verified) runs a query before every checkout; Fast does not.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .build()
        .expect("deadpool pool")
}

#[derive(Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

pub fn random_id() -> i32 {
    fastrand::i32(1..=WORLD_ROWS)
}

/// `q` of a query string, TechEmpower's way: not a number → 1, then clamped to 1..=500.
pub fn query_count(query: Option<&str>) -> usize {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("q="))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(1)
        .clamp(1, 500) as usize
}

async fn fetch(
    client: &deadpool_postgres::Client,
    stmt: &tokio_postgres::Statement,
) -> Result<World, DbError> {
    let id = random_id();
    let row = client.query_one(stmt, &[&id]).await?;
    Ok(World {
        id: row.get(0),
        random_number: row.get(1),
    })
}

/// `/db`
pub async fn single(pool: &Pool) -> Result<World, DbError> {
    let client = pool.get().await?;
    let stmt = client.prepare_cached(SELECT_WORLD).await?;
    fetch(&client, &stmt).await
}

/// `/queries?q=N`: N reads pipelined on one connection.
pub async fn queries(pool: &Pool, n: usize) -> Result<Vec<World>, DbError> {
    let client = pool.get().await?;
    let stmt = client.prepare_cached(SELECT_WORLD).await?;
    try_join_all((0..n).map(|_| fetch(&client, &stmt))).await
}

/// `/updates?q=N`: N pipelined reads, new numbers, one batch update.
pub async fn updates(pool: &Pool, n: usize) -> Result<Vec<World>, DbError> {
    let client = pool.get().await?;
    let (select, update) = tokio::try_join!(
        client.prepare_cached(SELECT_WORLD),
        client.prepare_cached(UPDATE_WORLDS)
    )?;
    let mut worlds = try_join_all((0..n).map(|_| fetch(&client, &select))).await?;
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
    client.execute(&update, &[&ids, &numbers]).await?;
    Ok(worlds)
}

pub struct Fortune {
    pub id: i32,
    pub message: String,
}

/// `templates/fortunes.stpl`: TechEmpower's table; `<%= %>` HTML-escapes.
#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage {
    fortunes: Vec<Fortune>,
}

/// `/fortunes`: every row plus one added at request time, sorted by message, rendered.
pub async fn fortunes(pool: &Pool) -> Result<String, DbError> {
    let client = pool.get().await?;
    let stmt = client.prepare_cached(SELECT_FORTUNES).await?;
    let rows = client.query(&stmt, &[]).await?;
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
    FortunesPage { fortunes }
        .render_once()
        .map_err(|e| DbError(e.to_string()))
}
