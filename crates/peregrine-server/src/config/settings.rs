//! The configuration's fields, grouped, with their defaults and the protocols each applies to.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything configurable about the engine. Build it with [`ServerConfig::builder`], or with
/// `ServerConfig::default()` and struct update syntax per group.
///
/// Every `Duration` may be as large as a caller likes (`Duration::MAX` included): deadlines are
/// computed saturating, so a huge value means "practically never", never a panic.
///
/// ```
/// use peregrine_server::config::{Limits, ServerConfig, Timeouts};
/// use std::time::Duration;
/// let config = ServerConfig::builder()
///     .workers(2)
///     .body_min_rate(4096)
///     .body_total_timeout(Duration::from_secs(60))
///     .build();
/// assert_eq!((config.workers, config.timeouts.body_min_rate), (2, 4096));
/// assert_eq!(config.timeouts.write_min_rate, 1024);
///
/// // The same with struct update syntax:
/// let config = ServerConfig {
///     limits: Limits { max_connections_per_addr: Some(256), ..Limits::default() },
///     timeouts: Timeouts { body_total: Duration::from_secs(60), ..Timeouts::default() },
///     ..ServerConfig::default()
/// };
/// assert_eq!(config.limits.max_body_size, 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:8080`. Ignored when [`ServerConfig::unix`] is
    /// set. Every protocol.
    pub addr: SocketAddr,
    /// Listen on this Unix domain socket instead of [`ServerConfig::addr`] (`ADDR=unix:/path`).
    /// Default `None`. Every protocol.
    pub unix: Option<PathBuf>,
    /// Worker threads (each with its own runtime and listener). Default: available cores.
    /// Every protocol.
    pub workers: usize,
    /// Connection steering: each new TCP connection goes to the worker of the CPU that received
    /// it (worker i belongs to the i-th CPU the process may run on), by a reuseport CPU program
    /// and `SO_INCOMING_CPU` (see `docs/architecture.md`), instead of the kernel's hash spread
    /// over the workers' `SO_REUSEPORT` sockets. Applies to the TCP listeners the engine binds
    /// (not to injected listeners or Unix sockets); what the kernel refuses falls back to the
    /// spread with a log line. Best with [`ServerConfig::pin`]. Default `false` (measured in
    /// `docs/performance.md`). Every protocol (it acts before the first byte).
    pub steer: bool,
    /// Pin worker i to the i-th CPU the process may run on (its affinity mask, so `taskset`
    /// and cpusets are honoured); workers past the number of allowed CPUs, or a CPU the kernel
    /// refuses, run unpinned with a log line. Default `false`. Every protocol.
    pub pin: bool,
    /// `listen(2)` backlog. Default 1024. Every protocol.
    pub backlog: u32,
    /// Value of the `Server` header; `None` sends none. Default `Some("peregrine")`. Must be a
    /// valid field value without control characters ([`ServerConfig::validate`]). HTTP/1.1
    /// and HTTP/2 responses (an upgrade's `101` included).
    pub server_name: Option<&'static str>,
    /// Keep working on a request whose HTTP/1.1 client closed its side of the connection
    /// after sending it (a half-close, `shutdown(SHUT_WR)`, which HTTP/1.1 allows), and send
    /// the answer to the half-closed connection. Default `false`: end of input while a handler
    /// works means the client left, as hyper's default, Go's `net/http` and nginx take it. The
    /// handler's future is dropped (what it holds is freed, a query it awaits is cancelled;
    /// the access log writes the request with status 0) and the connection closes, so a
    /// burst of clients that time out and leave does not leave their work running. A handler
    /// that answers at once is not affected, nor one still reading its request body (it sees
    /// the end of the body itself). Either way a streamed response body stops at the client's
    /// close. HTTP/1.1 only (over HTTP/2 a client's reset of the stream drops its handler).
    pub half_close: bool,
    /// Sizes and counts: request head and body, connections, pending output.
    pub limits: Limits,
    /// Timeouts and minimum rates of reads, writes, idle connections and shutdown.
    pub timeouts: Timeouts,
    /// HTTP/2 settings and limits (feature `http2`). HTTP/2 only.
    #[cfg(feature = "http2")]
    pub http2: crate::h2::config::Http2Config,
    /// HTTP/3 settings and limits (feature `http3`; served with
    /// [`Server::with_http3`](crate::Server::with_http3)).
    #[cfg(feature = "http3")]
    pub http3: crate::h3::Http3Config,
}

/// Sizes and counts (see [`ServerConfig::limits`]).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Parser limits: HTTP/1.1 request line and header section (431 or 414 past them). HTTP/2
    /// has no request line and h2 decodes the header block:
    /// [`crate::h2::Http2Config::max_header_list_size`] bounds it instead (431 past it).
    pub parser: peregrine_codec::Limits,
    /// The size limit each request body starts with ([`crate::Body::limit`]; a service may
    /// change it per request with [`crate::Body::set_limit`] before reading): reading a body with
    /// a larger Content-Length fails (413) before anything is read, a chunked one once it passes
    /// it. Default [`crate::DEFAULT_BODY_LIMIT`] (1 MiB). HTTP/2 alike, per stream. Not upgraded
    /// connections: their bytes are no request body.
    pub max_body_size: u64,
    /// Most open connections across all workers (HTTP/2 connections included, one each whatever
    /// their streams; upgraded connections too); past it the server stops accepting (the
    /// backlog holds new clients), after first closing the idle keep-alive connection that
    /// waited longest (on the accepting worker, else on another worker at its next idle tick)
    /// to make room. Default 25 000.
    pub max_connections: usize,
    /// Most open connections from one IP address (IPv4-mapped IPv6 counted as IPv4); a connection
    /// past it is closed right after `accept`. `None` turns the cap off. Default `None`: behind a
    /// proxy or NAT, many clients share an address, so set it where clients connect directly
    /// (for example 256). Every protocol (it acts before the first byte).
    pub max_connections_per_addr: Option<usize>,
    /// Close after this many requests on one connection (last response says `Connection: close`).
    /// Default: unlimited. HTTP/2: after this many streams the connection gets a graceful
    /// `GOAWAY(NO_ERROR)`; streams the client opened before seeing it are still answered. An
    /// upgrade ends the count (the connection is no longer HTTP).
    pub max_requests_per_connection: Option<u64>,
    /// Stop reading from a pipelining HTTP/1.1 client once this many response bytes wait to be
    /// written. Default 256 KiB.
    ///
    /// HTTP/2: the most response bytes a connection pulls from handlers' streamed bodies and
    /// has not yet handed to h2; a stream waits before pulling more. h2 then queues at most
    /// [`crate::h2::Http2Config::max_send_buffer`] per stream, within the client's windows; a
    /// file body is read 64 KiB at a time as windows open, and a `Full` body is the handler's
    /// (held until the response is sent or its stream reset by `write_timeout`). Upgraded
    /// connections write what their handler writes (bounded by [`Timeouts::write`]).
    pub max_pending_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            parser: peregrine_codec::Limits::default(),
            max_body_size: 1024 * 1024,
            max_connections: 25_000,
            max_connections_per_addr: None,
            max_requests_per_connection: None,
            max_pending_output: 256 * 1024,
        }
    }
}

/// Timeouts and minimum rates (see [`ServerConfig::timeouts`]).
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// The header section must arrive within this after the first byte of a request → 408.
    /// A new connection that sends nothing is closed silently after it too (the idle timeout
    /// applies only between requests). Default 10 s. HTTP/1.1.
    ///
    /// HTTP/2: the preface and the first SETTINGS must arrive within it. A stream's header block
    /// is read whole by h2 (HEADERS and CONTINUATION, bounded in size), and a connection with
    /// no request in progress is closed at [`Timeouts::idle`], which bounds a slow header block.
    pub header: Duration,
    /// Longest wait for the next body bytes → 408 (nginx `client_body_timeout`: restarts with
    /// every read, so on its own it does not bound a trickling client; see `body_min_rate`).
    /// Default 10 s. HTTP/1.1; this and the three body settings below apply to an HTTP/2
    /// request body alike, per stream: the handler sees [`crate::BodyError::Timeout`] (408),
    /// the connection and its other streams go on. Not upgraded connections (no body there).
    pub body: Duration,
    /// Minimum rate of a request body, in bytes per second, after `body_rate_grace` (Apache
    /// `mod_reqtimeout` `MinRate`): the time spent waiting for the body's bytes may not pass
    /// `body_rate_grace + received / body_min_rate`, or the request gets 408 (the handler sees
    /// [`crate::BodyError::Timeout`]) and the connection closes. Only waits for the client
    /// count (a handler that reads slowly is not the client's fault), and the engine's drain of
    /// an unread body counts under the same account. `0` turns the rate check off. Default
    /// 1024 bytes/s. HTTP/1.1 and HTTP/2 (per stream).
    pub body_min_rate: u32,
    /// Waiting time a body gets before `body_min_rate` applies (the base of the allowance every
    /// byte received extends). Default 10 s. HTTP/1.1 and HTTP/2 (per stream).
    pub body_rate_grace: Duration,
    /// Total time the engine may wait for one request body (including the drain of an unread
    /// body), whatever its rate → 408. Default 300 s. HTTP/1.1 and HTTP/2 (per stream).
    pub body_total: Duration,
    /// Idle keep-alive connections are closed silently after this. Default 60 s. HTTP/1.1.
    ///
    /// HTTP/2: a connection is idle while no stream runs its handler or sends, and streams that
    /// only wait for the client's window (or for the socket) do not count; it then gets
    /// `GOAWAY(NO_ERROR)` and is closed. An RFC 8441 tunnel (WebSocket over HTTP/2) counts as
    /// activity while it is open, as an upgraded HTTP/1.1 connection is no longer idle-timed.
    pub idle: Duration,
    /// A write that makes no progress for this long closes the connection (restarts with every
    /// wait; see `write_min_rate`). Default 10 s. HTTP/1.1.
    ///
    /// HTTP/2: every wait of a stream for send capacity (its window or the connection's closed,
    /// or the socket not taking what is queued) follows this and `write_min_rate`; past them
    /// the stream is reset (`RST_STREAM(CANCEL)`) and what was queued for it is dropped; if no
    /// stream moved meanwhile and every other stream waits for the client too, the connection
    /// gets `GOAWAY(ENHANCE_YOUR_CALM)` and closes. A socket that takes nothing for as long is
    /// closed at once (it could not take a GOAWAY either). RFC 8441 tunnels' writes follow the
    /// same rules (`TimedOut`). So do the writes of an upgraded HTTP/1.1 connection
    /// (WebSocket): past them the connection is closed with a reset and the write fails with
    /// `TimedOut`.
    pub write: Duration,
    /// Minimum rate, in bytes per second, at which a client must take what the server writes:
    /// from a blocked write until everything pending is written, the time spent waiting for
    /// the socket may not pass `write_rate_grace + written / write_min_rate`, or the connection
    /// is reset. Only waits for the client count, and the account closes whenever the output
    /// is fully written, so a long-lived stream that produces slowly is not penalised for its
    /// own pace. `0` turns the check off. Default 1024 bytes/s. HTTP/1.1 and upgraded
    /// connections; HTTP/2: per stream, the account closes when everything the handler gave so
    /// far was handed to h2 (see [`Timeouts::write`]).
    pub write_min_rate: u32,
    /// Waiting time a blocked write gets before `write_min_rate` applies. Default 10 s.
    /// HTTP/1.1, HTTP/2 (per stream) and upgraded connections.
    pub write_rate_grace: Duration,
    /// Graceful shutdown deadline after which connections are force-closed. Default 10 s.
    /// HTTP/1.1; HTTP/2 alike: `GOAWAY(NO_ERROR)`, open streams finish until then. Upgraded
    /// connections are force-closed at it too.
    pub shutdown: Duration,
    /// How long the server keeps accepting, with its drain signal raised
    /// ([`Server::drain_signal`](crate::Server::drain_signal)), between the start of a graceful
    /// shutdown and closing the listeners: the time a load balancer needs to see readiness fail
    /// and stop sending new connections. Default 0 (close at once). Every protocol.
    pub drain_delay: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header: Duration::from_secs(10),
            body: Duration::from_secs(10),
            body_min_rate: 1024,
            body_rate_grace: Duration::from_secs(10),
            body_total: Duration::from_secs(300),
            idle: Duration::from_secs(60),
            write: Duration::from_secs(10),
            write_min_rate: 1024,
            write_rate_grace: Duration::from_secs(10),
            shutdown: Duration::from_secs(10),
            drain_delay: Duration::ZERO,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            unix: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            steer: false,
            pin: false,
            backlog: 1024,
            server_name: Some("peregrine"),
            half_close: false,
            limits: Limits::default(),
            timeouts: Timeouts::default(),
            #[cfg(feature = "http2")]
            http2: crate::h2::config::Http2Config::default(),
            #[cfg(feature = "http3")]
            http3: crate::h3::Http3Config::default(),
        }
    }
}
