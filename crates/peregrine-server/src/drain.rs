//! The drain signal: a flag raised when a graceful shutdown starts. A leaf, so the configuration,
//! the server and the framework's readiness checks can all name it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Raised when a graceful shutdown starts, while the server still accepts: a readiness endpoint
/// that reads it answers "not ready" before the listeners close, so a load balancer stops
/// sending new connections first (see [`ServerConfig::drain_delay`](crate::ServerConfig::drain_delay)).
///
/// ```
/// use peregrine_server::ServerConfig;
/// let config = ServerConfig::default();
/// let draining = config.drain_signal.clone(); // give this to the readiness handler
/// assert!(!draining.is_draining());
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
