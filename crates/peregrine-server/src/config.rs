//! Server configuration, grouped: where and how to listen at the top, then [`Limits`],
//! [`Timeouts`] and (feature `http2`) [`Http2Config`](crate::h2::Http2Config). Defaults are in
//! the spirit of nginx/h2o (`docs/http1-rules.md` section H); [`ServerConfig::builder`] sets any
//! field by name, [`ServerConfig::from_env_and_args`] reads them for binaries.
//!
//! Every field says which protocols it applies to: HTTP/1.1, HTTP/2 (feature `http2`), and
//! upgraded connections (WebSocket over HTTP/1.1, RFC 8441 tunnels over HTTP/2).
//! `docs/security.md` has the table of every limit by protocol, with the test of each. TLS is
//! not a setting here: it is the acceptor the server runs ([`Server::with_acceptor`](crate::Server::with_acceptor)).
//! Neither are the live handles of a running server (its drain signal, its event observer):
//! they are given to the [`Server`](crate::Server) itself.

mod builder;
mod env;
mod settings;

pub use builder::ServerConfigBuilder;
pub use env::{parse_listen_addr, ConfigError, ListenAddr, MAX_TIMEOUT};
pub use settings::{Limits, ServerConfig, Timeouts};
