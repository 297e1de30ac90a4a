//! actix-web set up as TechEmpower's actix-web entry sets it up (`main_web.rs` there): no
//! per-request `client_request_timeout` timer, keep-alive left to the OS (no actix idle timer), no
//! `DefaultHeaders` middleware (each handler sets `Server` itself), a 1024 backlog. `/plaintext`
//! and `/json` as that entry serves them; with `DATABASE_URL`, the four database tests as its
//! `web-pg-deadpool` entry serves them (`main_pg_deadpool.rs`): tokio-postgres behind one
//! deadpool-postgres pool, prepared statements, a request's reads pipelined on one connection and
//! its updates in one statement (`peers::db`). The full actix peer is `actix-peer`.

use actix_web::http::header::{HeaderValue, CONTENT_TYPE, SERVER};
use actix_web::http::{KeepAlive, StatusCode};
use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use deadpool_postgres::Pool;
use peers::db::{self, DbError};
use peers::Message;
use std::time::Duration;

/// A 200 with the contract's headers set in the handler, as TechEmpower's entry does.
fn answer(content_type: &'static str, body: Bytes) -> HttpResponse<Bytes> {
    let mut res = HttpResponse::with_body(StatusCode::OK, body);
    let headers = res.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("actix-web"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

async fn plaintext() -> HttpResponse<Bytes> {
    answer("text/plain", Bytes::from_static(b"Hello, World!"))
}

async fn json() -> HttpResponse<Bytes> {
    let message = Message {
        message: "Hello, World!",
    };
    // Serialised per request, as the contract asks; a two-field struct cannot fail to serialise.
    let body = serde_json::to_vec(&message).unwrap_or_default();
    answer("application/json", Bytes::from(body))
}

/// A database answer: the JSON of `value`, or a 500 naming the failure (the entry's error path).
fn json_or_500<T: serde::Serialize>(value: Result<T, DbError>) -> HttpResponse<Bytes> {
    match value.and_then(|v| serde_json::to_vec(&v).map_err(|e| DbError(e.to_string()))) {
        Ok(body) => answer("application/json", Bytes::from(body)),
        Err(e) => failure(e),
    }
}

fn failure(e: DbError) -> HttpResponse<Bytes> {
    let mut res = answer("text/plain", Bytes::from(e.to_string()));
    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    res
}

async fn db_single(pool: web::Data<Pool>) -> HttpResponse<Bytes> {
    json_or_500(db::single(&pool).await)
}

async fn db_queries(pool: web::Data<Pool>, req: HttpRequest) -> HttpResponse<Bytes> {
    json_or_500(db::queries(&pool, db::query_count(Some(req.query_string()))).await)
}

async fn db_updates(pool: web::Data<Pool>, req: HttpRequest) -> HttpResponse<Bytes> {
    json_or_500(db::updates(&pool, db::query_count(Some(req.query_string()))).await)
}

async fn db_fortunes(pool: web::Data<Pool>) -> HttpResponse<Bytes> {
    match db::fortunes(&pool).await {
        Ok(page) => answer("text/html; charset=utf-8", Bytes::from(page)),
        Err(e) => failure(e),
    }
}

fn main() -> std::io::Result<()> {
    let addr = peers::addr();
    let workers = peers::workers();
    // One pool of DB_POOL connections for every worker, as the entry's (created before the server).
    let pool = db::url().map(|url| web::Data::new(db::pool(&url, db::pool_total())));
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || {
            let app = App::new()
                .service(web::resource("/plaintext").to(plaintext))
                .service(web::resource("/json").to(json));
            match &pool {
                Some(pool) => app
                    .app_data(pool.clone())
                    .service(web::resource("/db").to(db_single))
                    .service(web::resource("/queries").to(db_queries))
                    .service(web::resource("/fortunes").to(db_fortunes))
                    .service(web::resource("/updates").to(db_updates)),
                None => app,
            }
        })
        .workers(workers)
        .backlog(1024)
        // No idle timer: the OS keeps connections, as TechEmpower's entry (KeepAlive::Os).
        .keep_alive(KeepAlive::Os)
        // Zero turns off the timer armed for every request's head (5 s by default).
        .client_request_timeout(Duration::ZERO)
        // The lab stops servers with SIGTERM; do not linger 30 s draining connections.
        .shutdown_timeout(1)
        .bind(addr)?
        .run()
        .await
    })
}
