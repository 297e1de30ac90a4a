//! The lab's scenario application ("peregrine" in the lab): exactly the contract of
//! `lab/contract/scenarios.json`.
//!
//! ```sh
//! ADDR=127.0.0.1:8080 WORKERS=2 cargo run --release --example scenarios
//! # or: cargo run --release --example scenarios -- --addr 127.0.0.1:8080 --workers 2
//! ```
//!
//! Stops gracefully on SIGTERM / SIGINT. With `DATABASE_URL` set it also serves the database
//! scenarios of `lab/contract/db.json` (`scenarios-db/db.rs`); without it, exactly the above.

use peregrine::middleware::Hook;
use peregrine::{get, post, App, Error, IntoResponse, Json, Request, Response, Router};
use serde::{Deserialize, Serialize};

#[path = "scenarios-db/db.rs"]
mod db;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

async fn plaintext(_req: Request) -> &'static str {
    "Hello, World!"
}

async fn json(_req: Request) -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

#[derive(Serialize)]
struct User {
    id: u64,
    name: String,
}

async fn user(req: Request) -> Result<Response, Error> {
    let id: u64 = req.param("id")?;
    // The name is built as a String, as every peer builds it (the lab compares like with like).
    Ok(Json(User {
        id,
        name: format!("user-{id}"),
    })
    .into_response())
}

#[derive(Serialize, Deserialize)]
struct Search {
    q: String,
    limit: u32,
}

async fn search(req: Request) -> Result<Json<Search>, Error> {
    Ok(Json(req.query::<Search>()?))
}

#[derive(Serialize, Deserialize)]
struct NewUser {
    name: String,
    email: String,
    age: u32,
}

async fn create_user(mut req: Request) -> Result<(u16, Json<NewUser>), Error> {
    let user: NewUser = req.json().await?;
    Ok((201, Json(user)))
}

#[derive(Serialize)]
struct Member {
    org: u64,
    team: u64,
    member: u64,
}

async fn member(req: Request) -> Result<Json<Member>, Error> {
    Ok(Json(Member {
        org: req.param("org")?,
        team: req.param("team")?,
        member: req.param("member")?,
    }))
}

async fn middleware_ok(_req: Request) -> &'static str {
    "OK"
}

/// One of the five layers of the middleware scenario: adds `x-mw-N: 1` to the response.
/// A synchronous [`Hook`]: it awaits nothing, so the five of them are composed into one
/// wrapper at startup (one allocation per request for the whole stack).
struct MarkLayer(&'static str);

impl Hook for MarkLayer {
    fn after(&self, res: &mut Response) {
        res.headers.push((self.0.into(), b"1"[..].into()));
    }
}

async fn error(_req: Request) -> Result<&'static str, Error> {
    // A failure from below (here: an I/O error) goes through the framework's error path: the
    // client gets the bare 500 problem document, the cause goes to the log.
    Err(std::io::Error::other("simulated backend failure"))?
}

#[derive(Serialize)]
struct Item {
    id: u32,
    name: String,
    active: bool,
    score: u32,
    tags: [&'static str; 2],
}

#[derive(Serialize)]
struct Large {
    items: Vec<Item>,
}

impl Large {
    /// The data of `lab/contract/large.json`: 134 items.
    fn build() -> Self {
        let items = (0..134)
            .map(|i| Item {
                id: i,
                name: format!("item-{i}"),
                active: i % 2 == 0,
                score: i * 7 % 100,
                tags: ["alpha", "beta"],
            })
            .collect();
        Large { items }
    }
}

async fn large(req: Request) -> Result<Response, Error> {
    // Serialised per request from the structure built at startup (shared state).
    let large = req.state::<Large>()?;
    Ok(Json(large).into_response())
}

async fn empty(_req: Request) -> Response {
    Response::new(204)
}

/// The application, also used by `tests/scenarios.rs`.
pub fn app() -> App {
    let layered = Router::new()
        .route("/middleware", get(middleware_ok))
        .hook(MarkLayer("x-mw-5"))
        .hook(MarkLayer("x-mw-4"))
        .hook(MarkLayer("x-mw-3"))
        .hook(MarkLayer("x-mw-2"))
        .hook(MarkLayer("x-mw-1"));
    let app = App::new()
        .with_state(Large::build())
        .route("/plaintext", get(plaintext))
        .route("/json", get(json))
        .route("/users/{id}", get(user))
        .route("/users", post(create_user))
        .route("/search", get(search))
        .route(
            "/api/v1/orgs/{org}/teams/{team}/members/{member}",
            get(member),
        )
        .route("/error", get(error))
        .route("/large", get(large))
        .route("/empty", get(empty))
        .merge(layered);
    db::routes(app)
}

fn main() {
    let config = match peregrine::config::from_env_and_args(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scenarios: {e}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "scenarios: listening on {} with {} workers",
        config.addr, config.workers
    );
    if let Err(e) = app().run(config) {
        eprintln!("scenarios: {e}");
        std::process::exit(1);
    }
}
