//! # peregrine-server
//!
//! The engine: N worker threads, each a tokio current-thread runtime with its own `SO_REUSEPORT`
//! listener (no work stealing), driving HTTP/1.1 connections with the strict
//! [`peregrine_codec`] parser. Handlers are async and may await anything in the tokio ecosystem;
//! their futures run on the worker that owns the connection and need not be `Send`.
//!
//! ```no_run
//! use peregrine_server::{service_fn, Method, Request, Response, Server, ServerConfig};
//!
//! let service = service_fn(|mut req: Request| async move {
//!     match (req.method_kind(), req.path()) {
//!         (Method::Get, "/plaintext") => Response::text("Hello, World!"),
//!         (Method::Post, "/echo") => match req.body_mut().to_bytes(64 * 1024).await {
//!             Ok(body) => Response::text(body),
//!             Err(e) => Response::text(e.to_string()).with_status(e.status()),
//!         },
//!         _ => Response::new(404),
//!     }
//! });
//! Server::new(ServerConfig::default()).run_until_signal(service).unwrap();
//! ```
//!
//! ## How a connection is driven
//!
//! * One task per connection. While idle it holds only its socket, the peer address and a small
//!   registration with the worker's idle sweeper: no buffers, no timer (under 1 KiB per idle
//!   keep-alive connection, tokio's own task and I/O registration included).
//! * When bytes arrive it takes a read buffer from the worker's pool, parses every complete
//!   request in it, runs the handlers in order (their futures live inside the connection's
//!   future), appends the responses to one output buffer and writes them with one `write(2)` per
//!   batch. An invalid request after valid ones: the valid ones are answered, then the error
//!   with `Connection: close`, then the connection closes (after a bounded lingering read, so
//!   the client sees the answer rather than a reset).
//! * Request bodies are pulled from the socket only when the handler reads them (`100 Continue`
//!   is sent then); what the handler leaves unread is drained (up to 256 KiB) or the connection
//!   is closed. Large response bodies are written from their own buffers; streamed ones are sent
//!   chunked with the pending output bounded by
//!   [`Limits::max_pending_output`](config::Limits::max_pending_output).
//! * Limits and timeouts are in [`ServerConfig`]; graceful shutdown through
//!   [`ServerHandle::shutdown`] or SIGTERM/SIGINT ([`Server::run_until_signal`]). A shutdown
//!   first raises its [`DrainSignal`] ([`Server::with_drain_signal`]) and keeps accepting for
//!   [`Timeouts::drain_delay`](config::Timeouts::drain_delay), so readiness checks fail before
//!   the listeners close.
//! * Operations: [`events`] is the interface through which the engine reports connections and
//!   the requests it refuses by itself ([`Server::with_events`]); [`proxy_protocol`] parses
//!   HAProxy's PROXY protocol v1/v2 header.
//!
//! API CONTRACT: the public items below are what the framework crate (`peregrine`) is written
//! against. Their names and signatures are fixed; internals are free.

#![deny(unsafe_op_in_unsafe_fn)]
// docs.rs (nightly) shows beside each item the cargo feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod body;
pub mod config;
mod cpus;
mod drain;
pub mod events;
#[cfg(feature = "http2")]
mod extended_connect;
mod field_value;
mod grow;
mod h1;
#[cfg(feature = "http2")]
pub mod h2;
#[cfg(feature = "http3")]
pub mod h3;
mod idle;
pub mod listener;
mod pace;
mod pooled;
mod protocol;
pub mod proxy_protocol;
pub mod request;
pub mod response;
pub mod server;
pub mod service;
mod shutdown;
mod steering;
#[cfg(feature = "tls")]
pub mod tls;
pub mod trailers;
pub mod transport;
pub mod upgrade;
mod worker;

pub use body::{Body, BodyError, DEFAULT_BODY_LIMIT};
pub use config::{Limits, ServerConfig, ServerConfigBuilder, Timeouts};
pub use listener::Listener;
/// The codec the engine is built on (request parsing, response encoding, the HTTP grammar).
pub use peregrine_codec as codec;
pub use peregrine_codec::{Method, Version};
pub use request::Request;
pub use response::{FieldValue, Response, ResponseBody};
pub use server::{DrainSignal, Server, ServerHandle};
pub use service::{service_fn, Service};
pub use trailers::{TrailerError, Trailers};
pub use transport::{Accept, Accepted, Acceptor, PlainAcceptor, Stream, Transport};
