//! The database scenarios (`lab/contract/db.json`, TechEmpower's rules) for the axum and actix-web
//! peers: what their communities use, tokio-postgres behind a deadpool-postgres pool shared by the
//! runtime's threads, statements prepared once per connection (`prepare_cached`), the N queries
//! of one request pipelined on its connection (`try_join_all`), sailfish for the fortunes page.
//! Each framework keeps its own routing, extraction and error path around these functions.

use crate::db_rules::{fortunes_page, renumber, SELECT_FORTUNES, SELECT_WORLD, UPDATE_WORLDS};
pub use crate::db_rules::{query_count, random_id, Fortune, World, WORLD_ROWS};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::try_join_all;
use tokio_postgres::NoTls;

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
    let (ids, numbers) = renumber(&mut worlds);
    client.execute(&update, &[&ids, &numbers]).await?;
    Ok(worlds)
}

/// `/fortunes`: every row plus one added at request time, sorted by message, rendered.
pub async fn fortunes(pool: &Pool) -> Result<String, DbError> {
    let client = pool.get().await?;
    let stmt = client.prepare_cached(SELECT_FORTUNES).await?;
    let rows = client.query(&stmt, &[]).await?;
    let fortunes = rows
        .iter()
        .map(|r| Fortune {
            id: r.get(0),
            message: r.get(1),
        })
        .collect();
    fortunes_page(fortunes).map_err(|e| DbError(e.to_string()))
}
