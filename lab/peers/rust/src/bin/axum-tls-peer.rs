//! axum over TLS: the lab's HTTPS and HTTP/2 lanes (`./scripts/lab protocols`). The ordinary way
//! to serve axum over rustls without axum-server: a tokio-rustls acceptor, then hyper-util's
//! `auto` builder (HTTP/2 or HTTP/1.1 by ALPN) on a multi-thread runtime with `WORKERS` workers,
//! one task per connection. Serves `/plaintext` (the lanes' route) with the contract's headers.

use axum::http::header::SERVER;
use axum::http::HeaderValue;
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use tower_http::set_header::SetResponseHeaderLayer;

async fn plaintext() -> &'static str {
    "Hello, World!"
}

fn app() -> Router {
    Router::new()
        .route("/plaintext", get(plaintext))
        // hyper adds Date; nothing adds Server, which the contract requires.
        .layer(SetResponseHeaderLayer::overriding(
            SERVER,
            HeaderValue::from_static("axum"),
        ))
}

async fn serve(listener: tokio::net::TcpListener) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(peers::rustls_config()));
    let service = TowerToHyperService::new(app());
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        // Small responses go out at once, as with the other peers (Nagle off).
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = service.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

fn main() {
    let addr = peers::addr();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(peers::workers())
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .expect("bind ADDR");
            serve(listener).await
        })
}
