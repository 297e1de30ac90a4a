//! The README quickstart, runnable: `cargo run --example quickstart`, then
//! `curl localhost:3000/hello/world`.

use peregrine::middleware::{Compression, Logger};
use peregrine::{get, post, App, Error, Json, Request};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Application state: shared by every worker, no globals.
struct Visits(AtomicU64);

async fn hello(req: Request) -> Result<String, Error> {
    let name = req.param_str("name")?; // percent-decoded
    let n = req.state::<Visits>()?.0.fetch_add(1, Ordering::Relaxed) + 1;
    Ok(format!("Hello, {name}! (visit {n})\n"))
}

#[derive(Deserialize, Serialize)]
struct Todo {
    title: String,
    done: bool,
}

async fn create_todo(mut req: Request) -> Result<(u16, Json<Todo>), Error> {
    let todo: Todo = req.json().await?; // 415 / 400 / 413 as problem+json
    if todo.title.is_empty() {
        return Err(Error::new(422).with_detail("title must not be empty"));
    }
    Ok((201, Json(todo)))
}

fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();

    // ADDR / WORKERS env vars or --addr / --workers flags; default 127.0.0.1:3000 here.
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("ADDR").is_none() && !args.iter().any(|a| a.starts_with("--addr")) {
        args.extend(["--addr".into(), "127.0.0.1:3000".into()]);
    }
    let config = peregrine::config::from_env_and_args(args)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    println!("listening on http://{}", config.server.addr);

    App::new()
        .with_state(Visits(AtomicU64::new(0)))
        .route("/hello/{name}", get(hello))
        .route("/todos", post(create_todo))
        .layer(Compression::new())
        .layer(Logger::new())
        .run(config) // until Ctrl-C / SIGTERM
}
