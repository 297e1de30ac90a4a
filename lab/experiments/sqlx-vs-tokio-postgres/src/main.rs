//! `/db` and `/fortunes` (TechEmpower's rules, as in `crates/peregrine/examples/scenarios-db`) on
//! Peregrine with the driver named by `DRIVER`: `tokio-postgres` (explicitly prepared statements)
//! or `sqlx` (`PgPool`, statements prepared and cached per connection by sqlx). One pool of
//! `DB_POOL / WORKERS` connections per worker, built in `App::on_worker_start`.

use peregrine::{
    get, App, Error, Html, IntoResponse, Json, Local, Request, Response, WorkerContext,
};
use sailfish::TemplateSimple;
use serde::Serialize;
use std::cell::Cell;

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

struct Fortune {
    id: i32,
    message: String,
}

#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage {
    fortunes: Vec<Fortune>,
}

fn page(mut fortunes: Vec<Fortune>) -> Result<Response, Error> {
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.".to_owned(),
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    let html = FortunesPage { fortunes }
        .render_once()
        .map_err(Error::internal_from)?;
    Ok(Html(html).into_response())
}

struct Settings {
    url: String,
    per_worker: usize,
}

/// tokio-postgres: connections round-robin, statements prepared once per connection.
struct Tp {
    conns: Vec<(
        tokio_postgres::Client,
        tokio_postgres::Statement,
        tokio_postgres::Statement,
    )>,
    next: Cell<usize>,
}

impl Tp {
    async fn connect(s: &Settings) -> Result<Tp, tokio_postgres::Error> {
        let mut conns = Vec::new();
        for _ in 0..s.per_worker {
            let (client, conn) = tokio_postgres::connect(&s.url, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            let world = client.prepare(SELECT_WORLD).await?;
            let fortunes = client.prepare(SELECT_FORTUNES).await?;
            conns.push((client, world, fortunes));
        }
        Ok(Tp {
            conns,
            next: Cell::new(0),
        })
    }

    fn conn(
        &self,
    ) -> &(
        tokio_postgres::Client,
        tokio_postgres::Statement,
        tokio_postgres::Statement,
    ) {
        let i = self.next.get();
        self.next.set((i + 1) % self.conns.len());
        &self.conns[i]
    }
}

async fn tp_db(_req: Request, Local(tp): Local<Tp>) -> Result<Response, Error> {
    let (client, world, _) = tp.conn();
    let id = fastrand::i32(1..=10_000);
    let row = client
        .query_one(world, &[&id])
        .await
        .map_err(Error::internal_from)?;
    Ok(Json(World {
        id: row.get(0),
        random_number: row.get(1),
    })
    .into_response())
}

async fn tp_fortunes(_req: Request, Local(tp): Local<Tp>) -> Result<Response, Error> {
    let (client, _, fortunes) = tp.conn();
    let rows = client
        .query(fortunes, &[])
        .await
        .map_err(Error::internal_from)?;
    page(
        rows.iter()
            .map(|r| Fortune {
                id: r.get(0),
                message: r.get(1),
            })
            .collect(),
    )
}

/// sqlx: its own pool of the same size on each worker.
struct Sx(sqlx::PgPool);

async fn sx_db(_req: Request, Local(sx): Local<Sx>) -> Result<Response, Error> {
    let id = fastrand::i32(1..=10_000);
    let (id, random_number): (i32, i32) = sqlx::query_as(SELECT_WORLD)
        .bind(id)
        .fetch_one(&sx.0)
        .await
        .map_err(Error::internal_from)?;
    Ok(Json(World { id, random_number }).into_response())
}

async fn sx_fortunes(_req: Request, Local(sx): Local<Sx>) -> Result<Response, Error> {
    let rows: Vec<(i32, String)> = sqlx::query_as(SELECT_FORTUNES)
        .fetch_all(&sx.0)
        .await
        .map_err(Error::internal_from)?;
    page(
        rows.into_iter()
            .map(|(id, message)| Fortune { id, message })
            .collect(),
    )
}

fn main() -> std::io::Result<()> {
    let config = peregrine::config::from_env_and_args(std::env::args().skip(1))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let settings = Settings {
        url: std::env::var("DATABASE_URL").expect("DATABASE_URL"),
        per_worker: (env("DB_POOL", 8) / env("WORKERS", 1)).max(1),
    };
    let app = App::new().with_state(settings);
    let app = match std::env::var("DRIVER").as_deref() {
        Ok("sqlx") => app
            .on_worker_start(|w: WorkerContext| async move {
                let s = w.state::<Settings>().expect("registered");
                sqlx::postgres::PgPoolOptions::new()
                    // The default pings the connection (a round trip) on every acquire; off, as
                    // deadpool's Fast recycling in the axum/actix peers.
                    .test_before_acquire(false)
                    .max_connections(s.per_worker as u32)
                    .min_connections(s.per_worker as u32)
                    .connect(&s.url)
                    .await
                    .map(Sx)
            })
            .route("/db", get(sx_db))
            .route("/fortunes", get(sx_fortunes)),
        _ => app
            .on_worker_start(|w: WorkerContext| async move {
                Tp::connect(&w.state::<Settings>().expect("registered")).await
            })
            .route("/db", get(tp_db))
            .route("/fortunes", get(tp_fortunes)),
    };
    app.run(config)
}
