//! Server configuration: limits and timeouts, defaults in the spirit of nginx/h2o
//! (`http1-rules.md` section H).

use crate::events::EngineEvents;
use crate::server::DrainSignal;
use peregrine_codec::Limits;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Everything configurable about the engine. Build with `ServerConfig::default()` and adjust
/// fields, or use the `with_*`-style field assignments.
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
    /// Default 10 s.
    pub header_timeout: Duration,
    /// Longest wait for the next body bytes → 408. Default 10 s.
    pub body_timeout: Duration,
    /// Idle keep-alive connections are closed silently after this. Default 60 s.
    pub idle_timeout: Duration,
    /// A write that makes no progress for this long closes the connection. Default 10 s.
    pub write_timeout: Duration,
    /// Most open connections across all workers; past it the server stops accepting (the backlog
    /// holds new clients). Default 25 000.
    pub max_connections: usize,
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
    /// Raised when a graceful shutdown starts, before the listeners close (see
    /// [`ServerConfig::drain_delay`]); readiness endpoints read it. Clones share the flag.
    pub drain_signal: DrainSignal,
    /// How long the server keeps accepting, with [`ServerConfig::drain_signal`] raised, between
    /// the start of a graceful shutdown and closing the listeners: the time a load balancer needs
    /// to see readiness fail and stop sending new connections. Default 0 (close at once).
    pub drain_delay: Duration,
    /// Who hears about connections opening and closing and requests the engine refuses itself
    /// (see [`EngineEvents`]). Default `None`: the driver skips every event.
    pub events: Option<Arc<dyn EngineEvents>>,
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
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            max_connections: 25_000,
            max_requests_per_connection: None,
            max_pending_output: 256 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            server_name: Some("peregrine"),
            backlog: 1024,
            drain_signal: DrainSignal::default(),
            drain_delay: Duration::ZERO,
            events: None,
        }
    }
}
