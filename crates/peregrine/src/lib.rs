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

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod app;
mod body;
pub mod config;
pub mod cookie;
mod decode;
mod error;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod header;
pub mod health;
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
pub mod tower;
#[cfg(feature = "ws")]
pub mod ws;

pub use app::{App, AppFuture, AppService, DEFAULT_BODY_LIMIT};
pub use body::BodyStream;
pub use error::Error;
pub use handler::{BoxFuture, Handler, IntoHandler, IsHandler, TryExtract};
pub use header::{Headers, IntoHeaderValue, IntoHeaders};
#[cfg(feature = "multipart")]
pub use multipart::{Field, Multipart, MultipartLimits};
pub use request::Request;
pub use response::{BodySender, Disconnected, Html, IntoResponse, Json, Redirect, StreamBody};
pub use router::{
    any, delete, get, head, on, options, patch, post, put, trace, MethodRouter, Router,
};
pub use state::{Extract, Local, Need, State, WorkerContext};
pub use status::StatusCode;
pub use test_client::{TestClient, TestRequest, TestResponse};

/// The engine underneath (configuration, raw request/response types).
pub use peregrine_server as server;
pub use peregrine_server::{Response, ResponseBody, ServerConfig};
