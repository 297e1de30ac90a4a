//! actix-web over TLS: the lab's HTTPS and HTTP/2 lanes (`./scripts/lab protocols`). The
//! ordinary `HttpServer::bind_rustls_0_23` (HTTP/2 or HTTP/1.1 by ALPN) with `WORKERS` workers.
//! Serves `/plaintext` (the lanes' route) with the contract's headers.

use actix_web::middleware::DefaultHeaders;
use actix_web::{web, App, HttpResponse, HttpServer};

async fn plaintext() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("Hello, World!")
}

fn main() -> std::io::Result<()> {
    let addr = peers::addr();
    let workers = peers::workers();
    let tls = peers::rustls_config();
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || {
            App::new()
                // actix adds Date; nothing adds Server, which the contract requires.
                .wrap(DefaultHeaders::new().add(("Server", "actix-web")))
                .route("/plaintext", web::get().to(plaintext))
        })
        .workers(workers)
        // As the plaintext actix peer: idle connections held by the idle-memory step outlive
        // actix's 5 s default.
        .keep_alive(std::time::Duration::from_secs(65))
        .shutdown_timeout(1)
        .bind_rustls_0_23(addr, tls)?
        .run()
        .await
    })
}
