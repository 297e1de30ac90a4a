//! What the engine does on its own, told to whoever listens: connections opening and closing,
//! and every request it answers or drops without calling the service (a malformed request line,
//! a header section over the limit, a timeout...). The framework's access log and metrics
//! implement [`EngineEvents`] so these show up next to the requests handlers answered.
//!
//! Cost when nobody listens: without [`Server::with_events`](crate::Server::with_events) the
//! observer is `None` and every emit point is one predictable branch on it; nothing is built, formatted or
//! allocated.
//!
//! ```
//! use peregrine_server::events::{ConnectionClosed, ConnectionOpened, EngineEvents, Rejection};
//! use peregrine_server::{Server, ServerConfig};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! #[derive(Default)]
//! struct Count(AtomicU64);
//!
//! impl EngineEvents for Count {
//!     fn rejected(&self, r: &Rejection) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         eprintln!("{} refused {} ({})", r.peer, r.status, r.reason.as_str());
//!     }
//! }
//! let server = Server::new(ServerConfig::default()).with_events(Arc::new(Count::default()));
//! # let _ = server;
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Why the engine refused or dropped a request (or a connection) without the service.
///
/// Every reason is emitted: the error responses the driver writes itself (the status-carrying
/// reasons, `HeaderTimeout`, `BodyTimeout`, `InvalidResponse`, `BodyFailed`, `HandlerPanic`),
/// and the closes without a response (status 0): `IdleClose`, `HeaderTimeout` for a new
/// connection that sent nothing, `WriteTimeout`, `LimitReached` and `ProxyProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The request line or a header field is malformed (400).
    BadRequest,
    /// The request line (target) is longer than the limit (414).
    UriTooLong,
    /// The header section is larger than the limit, or has too many fields (431).
    HeaderTooLarge,
    /// The body failed past its size limit (`Body::limit`, from `max_body_size`) and the
    /// service answered success all the same (413).
    BodyTooLarge,
    /// An `Expect` other than `100-continue` (417).
    ExpectationFailed,
    /// A protocol version the engine does not speak (505).
    VersionNotSupported,
    /// A transfer coding the engine does not implement (501).
    NotImplemented,
    /// The header section did not arrive within `header_timeout` (408).
    HeaderTimeout,
    /// The body stalled for longer than `body_timeout` (408, or a close mid-body).
    BodyTimeout,
    /// A keep-alive connection stayed idle for `idle_timeout` and was closed (no response).
    IdleClose,
    /// A write made no progress for `write_timeout` (or the client read slower than
    /// `write_min_rate`); the connection was closed.
    WriteTimeout,
    /// A connection limit (no response; [`Rejection::detail`] says which):
    /// `max_connections_per_addr` refused a new connection, `max_connections` made one wait for
    /// a slot, or an idle connection was closed to make room at `max_connections`.
    LimitReached,
    /// The handler returned a response the engine could not send (invalid status or header
    /// field); 500 was sent instead.
    InvalidResponse,
    /// The handler answered success on a request body that did not arrive intact; the body's
    /// error status was sent instead.
    BodyFailed,
    /// The handler panicked (500).
    HandlerPanic,
    /// A PROXY protocol header was missing or malformed on a listener that requires it.
    ProxyProtocol,
}

impl RejectReason {
    /// A stable snake_case name, for log fields and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::BadRequest => "bad_request",
            RejectReason::UriTooLong => "uri_too_long",
            RejectReason::HeaderTooLarge => "header_too_large",
            RejectReason::BodyTooLarge => "body_too_large",
            RejectReason::ExpectationFailed => "expectation_failed",
            RejectReason::VersionNotSupported => "version_not_supported",
            RejectReason::NotImplemented => "not_implemented",
            RejectReason::HeaderTimeout => "header_timeout",
            RejectReason::BodyTimeout => "body_timeout",
            RejectReason::IdleClose => "idle_close",
            RejectReason::WriteTimeout => "write_timeout",
            RejectReason::LimitReached => "limit_reached",
            RejectReason::InvalidResponse => "invalid_response",
            RejectReason::BodyFailed => "body_failed",
            RejectReason::HandlerPanic => "handler_panic",
            RejectReason::ProxyProtocol => "proxy_protocol",
        }
    }

    /// The reason behind an error status the engine answers with (for the emit points that
    /// only have the status at hand: the codec's errors carry a status, not a kind).
    pub const fn from_status(status: u16) -> RejectReason {
        match status {
            408 => RejectReason::HeaderTimeout,
            413 => RejectReason::BodyTooLarge,
            414 => RejectReason::UriTooLong,
            417 => RejectReason::ExpectationFailed,
            431 => RejectReason::HeaderTooLarge,
            501 => RejectReason::NotImplemented,
            505 => RejectReason::VersionNotSupported,
            _ => RejectReason::BadRequest,
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request (or connection) the engine answered or dropped by itself.
#[derive(Debug, Clone)]
pub struct Rejection<'a> {
    /// Why.
    pub reason: RejectReason,
    /// The status sent, or 0 when the connection was closed without a response (idle close,
    /// write timeout, a body that stalled after the response started).
    pub status: u16,
    /// The client as the engine sees it (the PROXY protocol source when the listener has one).
    pub peer: SocketAddr,
    /// Method and target of the request, when its line was parsed.
    pub method: Option<&'a str>,
    /// See `method`.
    pub target: Option<&'a str>,
    /// The engine's own words: the error text of a response it wrote, the limit behind
    /// `LimitReached`, what was wrong with a PROXY header.
    pub detail: &'a str,
    /// Bytes of the error response written (head and body).
    pub bytes_out: u64,
    /// The worker (0-based) that owns the connection.
    pub worker: usize,
    /// The service answered this request and the engine sent this error instead
    /// (`InvalidResponse`, `BodyFailed`): a log that records the service's answers already has
    /// a line for it. `false` for every request the service never saw.
    pub replaced: bool,
}

/// A connection was accepted.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionOpened {
    /// The client as the engine sees it.
    pub peer: SocketAddr,
    /// The worker (0-based) that owns it.
    pub worker: usize,
}

/// A connection was closed (by either side, or by shutdown).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionClosed {
    /// The client as the engine sees it.
    pub peer: SocketAddr,
    /// The worker (0-based) that owned it.
    pub worker: usize,
    /// How long it was open.
    pub duration: Duration,
}

/// A worker's connections and traffic, reported at each tick of its idle sweeper (a few times
/// per idle timeout, at most once per 10 ms and at least once a second), never per request.
#[derive(Debug, Clone, Copy)]
pub struct WorkerStats {
    /// The worker (0-based).
    pub worker: usize,
    /// Connections the worker holds open (busy, idle, or in a handshake).
    pub open: usize,
    /// Of those, HTTP/1 keep-alive connections waiting idle for their next request.
    pub idle: usize,
    /// Bytes read from its connections' transports since the worker started (for TLS, the
    /// decrypted bytes), request heads and bodies alike. HTTP/1 connections only: after an
    /// upgrade or a switch to HTTP/2 the connection's bytes are not counted.
    pub bytes_in: u64,
    /// Bytes written to its connections' transports since the worker started (heads, bodies,
    /// chunk framing, `sendfile`), same scope as `bytes_in`.
    pub bytes_out: u64,
}

/// Receives the engine's own events. Called on the worker thread, inline in the connection
/// driver: implementations must be quick and must not block (count, log, hand off).
///
/// Every method has an empty default, so a listener implements only what it needs.
pub trait EngineEvents: Send + Sync + 'static {
    /// A connection was accepted.
    fn connection_opened(&self, ev: &ConnectionOpened) {
        let _ = ev;
    }
    /// A connection was closed.
    fn connection_closed(&self, ev: &ConnectionClosed) {
        let _ = ev;
    }
    /// The engine refused, replaced or dropped a request without the service's answer.
    fn rejected(&self, ev: &Rejection<'_>) {
        let _ = ev;
    }
    /// A worker's periodic counts (see [`WorkerStats`]).
    fn worker_stats(&self, ev: &WorkerStats) {
        let _ = ev;
    }
}

/// The worker (0-based) running on this thread, from its name (`peregrine-w{i}`, see
/// `Server::serve`); 0 on any other thread. Read once per thread.
pub(crate) fn current_worker() -> usize {
    thread_local! {
        static WORKER: usize = std::thread::current()
            .name()
            .and_then(|n| n.strip_prefix("peregrine-w"))
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
    }
    WORKER.with(|w| *w)
}

/// The reason behind an error response the driver queued, from its status and text (the
/// driver's error paths carry those two; see `Conn::push_error`).
pub(crate) fn classify(status: u16, reason: &str) -> RejectReason {
    match status {
        408 if reason.contains("body") => RejectReason::BodyTimeout,
        500 if reason == peregrine_codec::response::INVALID_RESPONSE_REASON => {
            RejectReason::InvalidResponse
        }
        500 => RejectReason::HandlerPanic,
        _ if reason.contains("request body") && status != 413 => RejectReason::BodyFailed,
        _ => RejectReason::from_status(status),
    }
}

/// Tells `events` about an error response the driver queued. Cold path.
#[cold]
pub(crate) fn emit_rejection(
    events: &dyn EngineEvents,
    status: u16,
    reason: &str,
    peer: SocketAddr,
    bytes_out: u64,
    replaced: bool,
) {
    events.rejected(&Rejection {
        reason: classify(status, reason),
        status,
        peer,
        method: None,
        target: None,
        detail: reason,
        bytes_out,
        worker: current_worker(),
        replaced,
    });
}

/// Tells `events` about a connection the engine closed (or refused) without a response.
/// Cold path.
#[cold]
pub(crate) fn emit_close(
    events: &dyn EngineEvents,
    reason: RejectReason,
    detail: &str,
    peer: SocketAddr,
) {
    events.rejected(&Rejection {
        reason,
        status: 0,
        peer,
        method: None,
        target: None,
        detail,
        bytes_out: 0,
        worker: current_worker(),
        replaced: false,
    });
}

impl fmt::Debug for dyn EngineEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EngineEvents")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_have_distinct_stable_names() {
        let all = [
            RejectReason::BadRequest,
            RejectReason::UriTooLong,
            RejectReason::HeaderTooLarge,
            RejectReason::BodyTooLarge,
            RejectReason::ExpectationFailed,
            RejectReason::VersionNotSupported,
            RejectReason::NotImplemented,
            RejectReason::HeaderTimeout,
            RejectReason::BodyTimeout,
            RejectReason::IdleClose,
            RejectReason::WriteTimeout,
            RejectReason::LimitReached,
            RejectReason::InvalidResponse,
            RejectReason::BodyFailed,
            RejectReason::HandlerPanic,
            RejectReason::ProxyProtocol,
        ];
        let mut names: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert_eq!(RejectReason::from_status(431), RejectReason::HeaderTooLarge);
        assert_eq!(RejectReason::from_status(400), RejectReason::BadRequest);
        assert_eq!(RejectReason::BodyTooLarge.to_string(), "body_too_large");
        // The driver's error texts map to their reasons.
        for (status, text, reason) in [
            (408, "request header timeout", RejectReason::HeaderTimeout),
            (
                408,
                "timed out reading request body",
                RejectReason::BodyTimeout,
            ),
            (413, "request body too large", RejectReason::BodyTooLarge),
            (400, "request body incomplete", RejectReason::BodyFailed),
            (400, "invalid request line", RejectReason::BadRequest),
            (
                431,
                "header section too large",
                RejectReason::HeaderTooLarge,
            ),
            (
                500,
                "invalid response from handler",
                RejectReason::InvalidResponse,
            ),
            (500, "internal server error", RejectReason::HandlerPanic),
        ] {
            assert_eq!(classify(status, text), reason, "{text}");
        }
    }
}
