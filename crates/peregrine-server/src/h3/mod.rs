//! HTTP/3 over QUIC (feature `http3`): quinn for QUIC, `h3` for HTTP/3 framing and QPACK. Each
//! request stream becomes an engine [`crate::Request`] (with `version() == Version::Http3`) for
//! the same [`crate::Service`] as HTTP/1.1 and HTTP/2, and its [`crate::Response`] goes back as
//! HEADERS and DATA frames.
//!
//! * Served beside a TLS listener ([`Server::with_http3`](crate::Server::with_http3)) on the
//!   same port over UDP, one socket per worker (`SO_REUSEPORT`), with the listener's
//!   certificates (and their reloads), client authentication and handshake timeout; ALPN `h3`.
//! * Datagrams steered by connection ID ([`Http3Config::steer_by_connection_id`], on Linux): a
//!   connection's datagrams reach the worker that holds it also after its client's address
//!   changed, so NAT rebinding and migration work with any number of workers.
//! * 0-RTT off by default; with [`Http3Config::zero_rtt`] a resuming client's early requests
//!   are served when their method is safe (marked `early-data: 1`) and answered
//!   `425 Too Early` otherwise.
//! * Responses over TCP advertise it: `Alt-Svc: h3=":PORT"; ma=86400`
//!   ([`Http3Config::alt_svc`]).
//! * Limits ([`Http3Config`] and the engine's): concurrent request streams (QUIC's stream
//!   credit: a client cannot open more), the header section size (larger → 431, sent by h3),
//!   `max_body_size`, the body and write timeouts per stream, the engine's `idle` timeout as
//!   QUIC's idle timeout, `header` for a request's head, `max_connections` (a QUIC connection
//!   holds a slot as a TCP one does) and `max_requests_per_connection` (then `GOAWAY`).
//! * Address validation: past [`Http3Config::max_unvalidated_handshakes`] handshakes from
//!   unvalidated addresses, a new connection is sent a Retry first (an Initial flood from
//!   spoofed addresses holds no slots). The stateless-reset, token and connection-ID keys are
//!   one per server, shared by the workers' endpoints.
//! * Graceful shutdown: the endpoint refuses new connections, each connection sends `GOAWAY`
//!   and lets its open streams finish for up to the `shutdown` timeout, then closes with
//!   `H3_NO_ERROR`; a handshake still under way is abandoned.
//! * QUIC's idle timeout counts packets, not streams: a handler that sends nothing for longer
//!   than `idle` while the client sends nothing either (no keep-alive PINGs) loses its
//!   connection, where HTTP/2 would wait for it.
//! * Extended CONNECT ([`Http3Config::extended_connect`], off by default): a `CONNECT` with a
//!   `:protocol` reaches the service as over HTTP/2 (`GET` with `Upgrade`), and a 101 upgrade
//!   runs on the request stream (`tunnel`). Off, such a request is answered 400; a request with
//!   a connection-specific field is too (RFC 9114 §4.2), so `Upgrade` cannot be forged.
//! * Trailers both ways: a response's as a HEADERS frame after the DATA (`send_trailers`), a
//!   request's read after its DATA for [`Body::trailers`](crate::Body::trailers).
//! * Not yet: WebSocket over HTTP/3 (RFC 9220): h3 0.0.8's `h3::ext::Protocol` parses only
//!   `webtransport` and `connect-udp` and resets a request with `:protocol websocket` as
//!   malformed (`H3_MESSAGE_ERROR`) before the server sees it, so extended CONNECT stays
//!   unannounced by default (RFC 9220 clients then use WebSocket over TCP); qlog output (see
//!   docs/protocols.md).

mod alt_svc;
mod config;
mod conn;
mod context;
mod early;
mod endpoint;
mod request;
mod respond;
mod sockets;
mod steer;
mod tunnel;
mod unvalidated;

pub(crate) use alt_svc::AltSvc;
pub use config::Http3Config;
pub(crate) use endpoint::accept_loop;
pub use endpoint::{Http3, ALPN_H3};
pub(crate) use sockets::{QuicSockets, WorkerSocket};
