//! actix-web set up as TechEmpower's actix-web entry sets it up (`main_web.rs` there): no
//! per-request `client_request_timeout` timer, keep-alive left to the OS (no actix idle timer), no
//! `DefaultHeaders` middleware (each handler sets `Server` itself), a 1024 backlog. It serves what
//! that entry serves, `/plaintext` and `/json`; the full actix peer is `actix-peer`.

use actix_web::http::header::{HeaderValue, CONTENT_TYPE, SERVER};
use actix_web::http::{KeepAlive, StatusCode};
use actix_web::web::{self, Bytes};
use actix_web::{App, HttpResponse, HttpServer};
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

fn main() -> std::io::Result<()> {
    let addr = peers::addr();
    let workers = peers::workers();
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(|| {
            App::new()
                .service(web::resource("/plaintext").to(plaintext))
                .service(web::resource("/json").to(json))
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
