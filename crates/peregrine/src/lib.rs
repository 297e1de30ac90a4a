//! # peregrine
//!
//! A small web framework on the Peregrine thread-per-core HTTP/1.1 engine, in the spirit of
//! axum's small core: handlers are `async fn(Request) -> Result<impl IntoResponse, Error>`,
//! routes are compiled once into a radix tree (matchit), middleware is composed once at startup,
//! and errors become RFC 9457 problem documents that never leak internals.
//!
//! ```no_run
//! use peregrine::{App, Error, Json, Request, get, post};
//! use peregrine::middleware::Logger;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct User { id: u64, name: String }
//!
//! async fn show(req: Request) -> Result<Json<User>, Error> {
//!     let id: u64 = req.param("id")?;
//!     Ok(Json(User { id, name: format!("user-{id}") }))
//! }
//!
//! async fn create(mut req: Request) -> Result<(u16, Json<User>), Error> {
//!     let user: User = req.json().await?;
//!     Ok((201, Json(user)))
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     App::new()
//!         .route("/users/{id}", get(show))
//!         .route("/users", post(create))
//!         .layer(Logger::new())
//!         .run(peregrine::server::ServerConfig::default())
//! }
//! ```
//!
//! Handler futures run on the worker thread that owns the connection and need not be `Send`.
//!
//! # Cargo features
//!
//! The core (routing, extractors, JSON, forms, cookies, SSE, health, proxy headers, the
//! `Logger`/`Cors`/`Timeout`/`RequestIdLayer`/`Trace` layers) is always there. The heavier parts are
//! features; the defaults are what most services use, and cost few crates:
//!
//! | feature | default | gives | pulls |
//! |---|---|---|---|
//! | `compression` | yes | `middleware::Compression` (gzip), gzip/deflate request bodies | flate2 |
//! | `static-files` | yes | `fs`: `ServeDir`, `ServeFile` | mime_guess |
//! | `brotli` | | br in `Compression` and in request bodies (implies `compression`) | brotli |
//! | `multipart` | | `Request::multipart` | multer |
//! | `metrics` | | `metrics`: the Prometheus recorder, `Metrics` layer, `/metrics` | metrics-exporter-prometheus |
//! | `rate-limit` | | `middleware::RateLimit` | governor |
//! | `tower` | | `tower`: tower layers and services | tower-service, http-body |
//! | `ws` | | `ws`: WebSocket | tokio-tungstenite |
//! | `tls` | | `tls`: TLS listeners | rustls |
//! | `http2` | | HTTP/2 (h2c, and over TLS with ALPN) | h2 |
//! | `http3` | | HTTP/3 over QUIC beside TLS (same port and certificates; `Alt-Svc` on TCP) | quinn, h3 |
//! | `opentelemetry` | | `Trace` continues the `traceparent` as OpenTelemetry parent | opentelemetry |
//!
//! Without `compression`, a request body with `Content-Encoding: gzip` gets 415 (with
//! `Accept-Encoding: identity`) instead of being decoded.

#![forbid(unsafe_code)]
// docs.rs (nightly) shows beside each item the cargo feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod access_log;
mod app;
mod body;
pub mod config;
pub mod cookie;
mod decode;
mod error;
#[cfg(feature = "static-files")]
#[cfg_attr(docsrs, doc(cfg(feature = "static-files")))]
pub mod fs;
mod future_slot;
// The fuzz targets' checks exercise static files and every coding.
#[cfg(all(feature = "static-files", feature = "brotli"))]
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod header;
pub mod health;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
pub mod middleware;
#[cfg(feature = "multipart")]
mod multipart;
pub mod path;
pub mod proxy;
mod request;
mod response;
mod router;
pub mod sse;
mod state;
mod status;
mod stream_body;
mod test_client;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
#[cfg(feature = "ws")]
#[cfg_attr(docsrs, doc(cfg(feature = "ws")))]
pub mod ws;

pub use app::{App, AppFuture, AppService, DEFAULT_BODY_LIMIT};
pub use body::BodyStream;
pub use error::Error;
pub use handler::{BoxFuture, Handler, IntoHandler, IsHandler, TryExtract};
pub use header::{Headers, IntoHeaderValue, IntoHeaders};
#[cfg(feature = "multipart")]
#[cfg_attr(docsrs, doc(cfg(feature = "multipart")))]
pub use multipart::{Field, Multipart, MultipartLimits};
pub use request::Request;
pub use response::{BodySender, Disconnected, Html, IntoResponse, Json, Redirect, StreamBody};
pub use router::{
    any, delete, get, head, on, options, patch, post, put, trace, MethodRouter, Router,
};
pub use state::{Extract, Local, Need, State, WorkerContext};
pub use status::StatusCode;
pub use test_client::{TestClient, TestRequest, TestResponse};

/// The engine underneath (configuration, raw request/response types, acceptors, listeners).
#[doc(inline)]
pub use peregrine_server as server;
#[doc(inline)]
pub use peregrine_server::{
    DrainSignal, Listener, Response, ResponseBody, Server, ServerConfig, ServerHandle,
    TrailerError, Trailers,
};

/// TLS termination with rustls (feature `tls`): what [`config::Config::tls`] holds and what
/// [`App::run`] builds from it, for code that sets TLS up itself. The engine's
/// [`server::tls`], shown here.
///
/// ```no_run
/// use peregrine::config::Config;
/// use peregrine::tls::{CertificateFiles, TlsConfig};
/// use peregrine::{get, App, Request};
///
/// // Two certificates on one listener, chosen by SNI; the first is the default.
/// let tls = TlsConfig::new(vec![
///     CertificateFiles::new("example.com.crt", "example.com.key"),
///     CertificateFiles::new("api.example.net.crt", "api.example.net.key"),
/// ]);
/// App::new()
///     .route("/", get(|_r: Request| async { "hi" }))
///     .run(Config::new(peregrine::ServerConfig::default()).with_tls(tls))?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub mod tls {
    #[doc(inline)]
    pub use peregrine_server::tls::{
        negotiated, read_certs, read_key, read_roots, reload_on_sighup, reload_when_changed,
        CertStore, CertificateFiles, ClientAuth, Negotiated, TlsAcceptor, TlsConfig, TlsStream,
        TlsTransport, ALPN_H2, ALPN_HTTP11,
    };
}

// The migration guides' Peregrine snippets run as doc tests. Under `cfg(doctest)` only: the
// files live outside the crate directory, which a packaged crate would not contain.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/coming-from-axum.md")]
pub struct ComingFromAxum;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/coming-from-actix.md")]
pub struct ComingFromActix;
