//! The drain signal: a flag raised when a graceful shutdown starts. A leaf, so the server and
//! the framework's readiness checks can both name it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Raised when a graceful shutdown starts, while the server still accepts: a readiness endpoint
/// that reads it answers "not ready" before the listeners close, so a load balancer stops
/// sending new connections first (see [`Timeouts::drain_delay`](crate::config::Timeouts::drain_delay)).
///
/// ```
/// use peregrine_server::{DrainSignal, Server, ServerConfig};
/// let draining = DrainSignal::default(); // give a clone to the readiness handler
/// let server = Server::new(ServerConfig::default()).with_drain_signal(draining.clone());
/// assert!(!draining.is_draining());
/// # drop(server);
/// ```
#[derive(Debug, Clone, Default)]
pub struct DrainSignal(Arc<AtomicBool>);

impl DrainSignal {
    /// Whether a graceful shutdown has started.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Raises the signal (done by [`ServerHandle::shutdown`](crate::ServerHandle::shutdown); public for tests and for
    /// processes that drain on their own trigger).
    pub fn start(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
