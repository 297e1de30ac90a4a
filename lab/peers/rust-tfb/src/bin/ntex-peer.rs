//! ntex as TechEmpower's ntex entry (`main.rs`, the `default` test) sets it up: ntex's web App with
//! a handler per route that sets `Server` and `Content-Type` itself, the tokio runtime (one
//! single-thread runtime per worker thread), a 1024 backlog, the entry's buffer sizes (64 KiB read
//! and write buffers, 2 KiB low-water mark), keep-alive left to the OS and no client, header-read or
//! payload-read timers, mimalloc as the global allocator. ntex writes the responses of a read's
//! pipelined requests in one write. Differences: no CPU affinity (the lab pins the server to its
//! CPUs with taskset) and serde_json instead of sonic-rs (see lab/peers/README.md).
//!
//! With `DATABASE_URL`, the four database tests as the entry's `ntex-db` serves them: one
//! PostgreSQL connection per worker opened when the worker starts, statements prepared then, a
//! request's reads pipelined, updates in one statement (`tfb::pg`), routed in the same App.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use ntex::http::header::{HeaderValue, CONTENT_TYPE, SERVER};
use ntex::http::{HttpServiceConfig, KeepAlive};
use ntex::io::IoConfig;
use ntex::time::Seconds;
use ntex::util::Bytes;
use ntex::{http, web, SharedCfg};
use tfb::db_rules::query_count;
use tfb::pg::{Connection, DbError};

const HDR_SERVER: HeaderValue = HeaderValue::from_static("ntex");

/// A 200 with the contract's headers, set in the handler as the entry does.
fn answer(content_type: &'static str, body: Bytes) -> web::HttpResponse {
    let mut response = web::HttpResponse::with_body(http::StatusCode::OK, body.into());
    let headers = response.headers_mut();
    headers.insert(SERVER, HDR_SERVER);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[web::get("/plaintext")]
async fn plaintext() -> web::HttpResponse {
    answer("text/plain", Bytes::from_static(tfb::PLAINTEXT.as_bytes()))
}

#[web::get("/json")]
async fn json() -> web::HttpResponse {
    // Serialised per request; a one-field struct of a static str cannot fail.
    let body = serde_json::to_vec(&tfb::HELLO).unwrap_or_default();
    answer("application/json", Bytes::from(body))
}

/// The JSON of a database answer, or a 500 naming the failure.
fn json_or_500<T: serde::Serialize>(value: Result<T, DbError>) -> web::HttpResponse {
    match value.and_then(|v| serde_json::to_vec(&v).map_err(|e| DbError(e.to_string()))) {
        Ok(body) => answer("application/json", Bytes::from(body)),
        Err(e) => failure(e),
    }
}

fn failure(e: DbError) -> web::HttpResponse {
    let mut res = answer("text/plain", Bytes::from(e.to_string()));
    *res.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    res
}

type Db = web::types::State<Connection>;

#[web::get("/db")]
async fn db_single(db: Db) -> web::HttpResponse {
    json_or_500(db.single().await)
}

#[web::get("/queries")]
async fn db_queries(db: Db, req: web::HttpRequest) -> web::HttpResponse {
    json_or_500(db.queries(query_count(req.uri().query())).await)
}

#[web::get("/updates")]
async fn db_updates(db: Db, req: web::HttpRequest) -> web::HttpResponse {
    json_or_500(db.updates(query_count(req.uri().query())).await)
}

#[web::get("/fortunes")]
async fn db_fortunes(db: Db) -> web::HttpResponse {
    match db.fortunes().await {
        Ok(page) => answer("text/html; charset=utf-8", Bytes::from(page)),
        Err(e) => failure(e),
    }
}

/// The entry's shared configuration: buffer sizes and no per-connection timers.
fn config() -> SharedCfg {
    SharedCfg::new("tfb")
        .add(
            IoConfig::new()
                .set_read_buf(65535, 2048, 128)
                .set_write_buf(65535, 2048, 128),
        )
        .add(
            HttpServiceConfig::new()
                .set_keepalive(KeepAlive::Os)
                .set_client_timeout(Seconds::ZERO)
                .set_headers_read_rate(Seconds::ZERO, Seconds::ZERO, 0)
                .set_payload_read_rate(Seconds::ZERO, Seconds::ZERO, 0),
        )
        .into()
}

#[ntex::main]
async fn main() -> std::io::Result<()> {
    ntex::server::build()
        .workers(tfb::workers())
        .backlog(1024)
        // The lab stops servers with SIGTERM; do not linger draining connections.
        .shutdown_timeout(Seconds(1))
        .bind("tfb", tfb::addr(), async move |_| {
            let app = web::App::new().service(json).service(plaintext);
            let app = match tfb::pg::url() {
                // Each worker builds its App, so each opens its own connection.
                Some(url) => app
                    .state_factory(async move || {
                        Connection::open(&url, |io| drop(ntex::rt::spawn(io))).await
                    })
                    .service((db_single, db_queries, db_fortunes, db_updates)),
                None => app,
            };
            http::HttpService::h1(app.finish())
        })?
        .config("tfb", config())
        .run()
        .await
}
