//! Peregrine's framework (`peregrine::App`) in the shape of each seed's own app: the paths and
//! answers of the seed named by `SEED`; `ADDR` and `WORKERS` (default one per CPU the process
//! may use) as `peregrine::config::from_env_and_args` reads them.
//!
//! NextRush's suite: `GET /` → `{"message":"Hello World"}`, `GET /text` → `Hello World`,
//! `GET /users/{id}` → `{"id":"…"}`, `GET /search?q=` → `{"q":"…"}`, `POST /users` → the JSON body
//! back with 201, and `GET /middleware` → `{"ok":true}` through the layers NextRush's deep profile
//! stacks (timing, logging, auth check, CORS; body parsing is the framework's own, on demand).

use std::io::Write;
use std::time::Instant;

use peregrine::middleware::{from_fn, Next};
use peregrine::{get, post, App, BoxFuture, Error, Json, Request, Response};
use seeds::Seed;
use serde_json::{json, Value};

async fn user(req: Request) -> Result<Json<Value>, Error> {
    Ok(Json(json!({ "id": req.param_str("id")? })))
}

async fn search(req: Request) -> Json<Value> {
    #[derive(serde::Deserialize)]
    struct Q {
        q: Option<String>,
    }
    // A missing or unreadable q answers null, as `ctx.query.q` does in NextRush's app.
    let q = req.query::<Q>().ok().and_then(|q| q.q);
    Json(json!({ "q": q }))
}

async fn create(mut req: Request) -> Result<(u16, Json<Value>), Error> {
    Ok((201, Json(req.json::<Value>().await?)))
}

fn timing(req: Request, next: Next) -> BoxFuture<Response> {
    Box::pin(async move {
        let start = Instant::now();
        let mut res = next.run(req).await;
        let took = format!("{}us", start.elapsed().as_micros());
        res.headers
            .push(("x-response-time".into(), took.into_bytes().into()));
        res
    })
}

fn logging(req: Request, next: Next) -> BoxFuture<Response> {
    Box::pin(async move {
        let line = format!("{} {}", req.method(), req.path());
        let res = next.run(req).await;
        // The line is formatted as a logger would, then discarded: the suite measures the
        // framework, not a terminal.
        let _ = writeln!(std::io::sink(), "{line} {}", res.status);
        res
    })
}

fn auth(req: Request, next: Next) -> BoxFuture<Response> {
    let ok = req
        .header("authorization")
        .is_some_and(|v| v.starts_with("Bearer "));
    if !ok {
        return Box::pin(async { Response::text("Unauthorized").with_status(401) });
    }
    next.run(req)
}

fn cors(req: Request, next: Next) -> BoxFuture<Response> {
    Box::pin(async move {
        let mut res = next.run(req).await;
        res.headers
            .push(("access-control-allow-origin".into(), b"*"[..].into()));
        res
    })
}

fn app(seed: Seed) -> App {
    let app = App::new();
    match seed {
        Seed::Nurl => app.route("/", get(|_r: Request| async { seeds::NURL_BODY })),
        Seed::Kourier => app.route("/hello", get(|_r: Request| async { seeds::KOURIER_BODY })),
        Seed::Lemire => app.route("/simple", get(|_r: Request| async { seeds::LEMIRE_BODY })),
        Seed::RustHttp => app.route(
            "/",
            get(|_r: Request| async {
                let mut r = Response::text(seeds::APACHE_BODY);
                r.insert_header("content-type", "text/html");
                seeds::APACHE_FIELDS
                    .iter()
                    .fold(r, |r, (k, v)| r.with_header(*k, *v))
            }),
        ),
        Seed::NextRush => {
            let layered = peregrine::Router::new()
                .route(
                    "/middleware",
                    get(|_r: Request| async { Json(json!({ "ok": true })) }),
                )
                .layer(from_fn(cors))
                .layer(from_fn(auth))
                .layer(from_fn(logging))
                .layer(from_fn(timing));
            app.route(
                "/",
                get(|_r: Request| async { Json(json!({ "message": "Hello World" })) }),
            )
            .route("/text", get(|_r: Request| async { "Hello World" }))
            .route("/users/{id}", get(user))
            .route("/search", get(search))
            .route("/users", post(create))
            .merge(layered)
        }
    }
}

fn main() -> std::io::Result<()> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let seed = Seed::from_env().map_err(invalid)?;
    let config =
        peregrine::config::from_env_and_args(std::iter::empty::<String>()).map_err(invalid)?;
    app(seed).run(config)
}
