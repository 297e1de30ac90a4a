//! Starting workers, accepting, graceful shutdown.

use crate::{Service, ServerConfig};
use std::io;
use std::net::SocketAddr;

/// Entry point: `Server::new(config).serve(service)`.
pub struct Server {
    config: ServerConfig,
}

/// A running server: its address, and the way to stop it.
pub struct ServerHandle {
    _private: (),
}

impl Server {
    /// A server with this configuration.
    pub fn new(config: ServerConfig) -> Self {
        Server { config }
    }
    /// Binds (every worker its own `SO_REUSEPORT` socket) and starts the workers; returns once
    /// they listen.
    pub fn serve<S: Service>(self, service: S) -> io::Result<ServerHandle> {
        let _ = (self.config, service);
        todo!()
    }
    /// `serve`, then block until SIGTERM/SIGINT, then shut down gracefully.
    pub fn run_until_signal<S: Service>(self, service: S) -> io::Result<()> {
        let _ = service;
        todo!()
    }
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        todo!()
    }
    /// Graceful shutdown: stop accepting, finish in-flight requests (their responses say
    /// `Connection: close`), close idle connections, force-close after the deadline. Blocks
    /// until every worker has exited.
    pub fn shutdown(self) {
        todo!()
    }
    /// Block until the server stops (for example after a signal).
    pub fn wait(self) {
        todo!()
    }
}
