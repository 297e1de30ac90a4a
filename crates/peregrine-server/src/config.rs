//! Server configuration: limits and timeouts, defaults in the spirit of nginx/h2o
//! (`http1-rules.md` section H).

use peregrine_codec::Limits;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything configurable about the engine. Build with `ServerConfig::default()` and adjust
/// fields with struct update syntax.
///
/// Every `Duration` may be as large as a caller likes (`Duration::MAX` included): deadlines are
/// computed saturating, so a huge value means "practically never", never a panic.
///
/// ```
/// use peregrine_server::ServerConfig;
/// use std::time::Duration;
/// let config = ServerConfig {
///     body_min_rate: 4096,
///     body_total_timeout: Duration::from_secs(60),
///     max_connections_per_addr: Some(256),
///     ..ServerConfig::default()
/// };
/// assert_eq!(config.write_min_rate, 1024);
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:8080`.
    pub addr: SocketAddr,
    /// Worker threads (each with its own runtime and listener). Default: available cores.
    pub workers: usize,
    /// Parser limits.
    pub limits: Limits,
    /// Largest request body accepted; a larger Content-Length is answered 413 before reading, a
    /// chunked body is answered 413 once it passes this. Default 1 MiB.
    pub max_body_size: u64,
    /// The header section must arrive within this after the first byte of a request → 408.
    /// A new connection that sends nothing is closed silently after it too (the idle timeout
    /// applies only between requests). Default 10 s.
    pub header_timeout: Duration,
    /// Longest wait for the next body bytes → 408 (nginx `client_body_timeout`: restarts with
    /// every read, so on its own it does not bound a trickling client; see `body_min_rate`).
    /// Default 10 s.
    pub body_timeout: Duration,
    /// Minimum rate of a request body, in bytes per second, after `body_rate_grace` (Apache
    /// `mod_reqtimeout` `MinRate`): the time spent waiting for the body's bytes may not pass
    /// `body_rate_grace + received / body_min_rate`, or the request gets 408 (the handler sees
    /// [`crate::BodyError::Timeout`]) and the connection closes. Only waits for the client
    /// count (a handler that reads slowly is not the client's fault), and the engine's drain of
    /// an unread body counts under the same account. `0` turns the rate check off. Default
    /// 1024 bytes/s.
    pub body_min_rate: u32,
    /// Waiting time a body gets before `body_min_rate` applies (the base of the allowance every
    /// byte received extends). Default 10 s.
    pub body_rate_grace: Duration,
    /// Total time the engine may wait for one request body (including the drain of an unread
    /// body), whatever its rate → 408. Default 300 s.
    pub body_total_timeout: Duration,
    /// Idle keep-alive connections are closed silently after this. Default 60 s.
    pub idle_timeout: Duration,
    /// A write that makes no progress for this long closes the connection (restarts with every
    /// wait; see `write_min_rate`). Default 10 s.
    pub write_timeout: Duration,
    /// Minimum rate, in bytes per second, at which a client must take what the server writes:
    /// from a blocked write until everything pending is written, the time spent waiting for
    /// the socket may not pass `write_rate_grace + written / write_min_rate`, or the connection
    /// is reset. Only waits for the client count, and the account closes whenever the output
    /// is fully written, so a long-lived stream that produces slowly is not penalised for its
    /// own pace. `0` turns the check off. Default 1024 bytes/s.
    pub write_min_rate: u32,
    /// Waiting time a blocked write gets before `write_min_rate` applies. Default 10 s.
    pub write_rate_grace: Duration,
    /// Most open connections across all workers; past it the server stops accepting (the backlog
    /// holds new clients), after first closing the idle keep-alive connection that waited
    /// longest (on the accepting worker, else on another worker at its next idle tick) to make
    /// room. Default 25 000.
    pub max_connections: usize,
    /// Most open connections from one IP address (IPv4-mapped IPv6 counted as IPv4); a connection
    /// past it is closed right after `accept`. `None` turns the cap off. Default `None`: behind a
    /// proxy or NAT, many clients share an address, so set it where clients connect directly
    /// (for example 256).
    pub max_connections_per_addr: Option<usize>,
    /// Close after this many requests on one connection (last response says `Connection: close`).
    /// Default: unlimited.
    pub max_requests_per_connection: Option<u64>,
    /// Stop reading from a pipelining client once this many response bytes wait to be written.
    /// Default 256 KiB.
    pub max_pending_output: usize,
    /// Graceful shutdown deadline after which connections are force-closed. Default 10 s.
    pub shutdown_timeout: Duration,
    /// Value of the `Server` header; `None` sends none. Default `Some("peregrine")`.
    pub server_name: Option<&'static str>,
    /// `listen(2)` backlog. Default 1024.
    pub backlog: u32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            limits: Limits::default(),
            max_body_size: 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            body_min_rate: 1024,
            body_rate_grace: Duration::from_secs(10),
            body_total_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            write_min_rate: 1024,
            write_rate_grace: Duration::from_secs(10),
            max_connections: 25_000,
            max_connections_per_addr: None,
            max_requests_per_connection: None,
            max_pending_output: 256 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            server_name: Some("peregrine"),
            backlog: 1024,
        }
    }
}
