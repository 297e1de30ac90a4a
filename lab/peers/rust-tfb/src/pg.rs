//! One PostgreSQL connection per worker, as TechEmpower's ntex-db entry holds it: tokio-postgres,
//! the three statements prepared once when the worker starts, a request's N reads pipelined on the
//! connection, its updates in one statement.

use crate::db_rules::{
    fortunes_page, random_id, renumber, Fortune, World, SELECT_FORTUNES, SELECT_WORLD,
    UPDATE_WORLDS,
};
use futures_util::future::try_join_all;
use std::future::Future;
use tokio_postgres::{Client, NoTls, Statement};

/// `DATABASE_URL`, or None: then the peer serves no database route.
pub fn url() -> Option<String> {
    std::env::var("DATABASE_URL").ok()
}

/// A failure of the database path, answered with a 500.
#[derive(Debug)]
pub struct DbError(pub String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "database: {}", self.0)
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError(e.to_string())
    }
}

/// A worker's connection and its prepared statements.
pub struct Connection {
    client: Client,
    world: Statement,
    fortunes: Statement,
    update: Statement,
}

impl Connection {
    /// Connects to `url` and prepares the statements; `spawn` runs the connection's I/O task on
    /// the worker's runtime.
    pub async fn open<S>(url: &str, spawn: S) -> Result<Connection, DbError>
    where
        S: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()>>>),
    {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        spawn(Box::pin(async move {
            if let Err(e) = connection.await {
                eprintln!("postgres connection: {e}");
            }
        }));
        // Once per worker, at its start: one after the other is as good as pipelined here.
        Ok(Connection {
            world: client.prepare(SELECT_WORLD).await?,
            fortunes: client.prepare(SELECT_FORTUNES).await?,
            update: client.prepare(UPDATE_WORLDS).await?,
            client,
        })
    }

    async fn fetch(&self) -> Result<World, DbError> {
        let row = self.client.query_one(&self.world, &[&random_id()]).await?;
        Ok(World {
            id: row.get(0),
            random_number: row.get(1),
        })
    }

    /// `/db`
    pub async fn single(&self) -> Result<World, DbError> {
        self.fetch().await
    }

    /// `/queries?q=N`: N reads pipelined on the connection.
    pub async fn queries(&self, n: usize) -> Result<Vec<World>, DbError> {
        try_join_all((0..n).map(|_| self.fetch())).await
    }

    /// `/updates?q=N`: N pipelined reads, new numbers, one batch update.
    pub async fn updates(&self, n: usize) -> Result<Vec<World>, DbError> {
        let mut worlds = self.queries(n).await?;
        let (ids, numbers) = renumber(&mut worlds);
        self.client.execute(&self.update, &[&ids, &numbers]).await?;
        Ok(worlds)
    }

    /// `/fortunes`
    pub async fn fortunes(&self) -> Result<String, DbError> {
        let rows = self.client.query(&self.fortunes, &[]).await?;
        let fortunes = rows
            .iter()
            .map(|r| Fortune {
                id: r.get(0),
                message: r.get(1),
            })
            .collect();
        fortunes_page(fortunes).map_err(|e| DbError(e.to_string()))
    }
}
