//! Starting workers, accepting, graceful shutdown.

use crate::worker::{self, Global};
use crate::{ServerConfig, Service};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::watch;

/// Entry point: `Server::new(config).serve(service)`.
///
/// ```no_run
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let config = ServerConfig { workers: 2, ..ServerConfig::default() };
/// let handle = Server::new(config)
///     .serve(service_fn(|_req: Request| async { Response::text("Hello, World!") }))
///     .unwrap();
/// println!("listening on {}", handle.local_addr());
/// handle.wait();
/// ```
pub struct Server {
    config: ServerConfig,
}

/// A running server: its address, and the way to stop it.
///
/// Dropping the handle does not stop the server (its workers keep serving until the process
/// ends); call [`ServerHandle::shutdown`] to stop it.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

impl Server {
    /// A server with this configuration.
    pub fn new(config: ServerConfig) -> Self {
        Server { config }
    }

    /// Binds (every worker its own `SO_REUSEPORT` socket) and starts the workers; returns once
    /// they listen.
    pub fn serve<S: Service>(self, service: S) -> io::Result<ServerHandle> {
        let config = self.config;
        let n = config.workers.max(1);
        // The first socket resolves port 0; the others bind the same port.
        let mut listeners = Vec::with_capacity(n);
        let first = bind(config.addr, config.backlog)?;
        let addr = first.local_addr()?;
        listeners.push(first);
        for _ in 1..n {
            listeners.push(bind(addr, config.backlog)?);
        }
        let global = Arc::new(Global::new(
            config.max_connections,
            config.max_connections_per_addr,
        ));
        let (stop, stop_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let mut workers = Vec::with_capacity(n);
        for (i, listener) in listeners.into_iter().enumerate() {
            let (config, service, global, stop_rx, ready_tx) = (
                config.clone(),
                service.clone(),
                global.clone(),
                stop_rx.clone(),
                ready_tx.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name(format!("peregrine-w{i}"))
                .spawn(move || worker::run(listener, config, service, global, stop_rx, ready_tx));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    let _ = stop.send(true);
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        let handle = ServerHandle {
            addr,
            stop,
            workers,
        };
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    handle.shutdown();
                    return Err(e);
                }
                Err(_) => {
                    handle.shutdown();
                    return Err(io::Error::other("a worker exited during startup"));
                }
            }
        }
        tracing::info!(%addr, workers = n, "listening");
        Ok(handle)
    }

    /// `serve`, then block until SIGTERM/SIGINT, then shut down gracefully.
    pub fn run_until_signal<S: Service>(self, service: S) -> io::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Install the handlers before serving, so a signal during startup is not fatal.
        let (mut term, mut int) = rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            Ok::<_, io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })?;
        let handle = self.serve(service)?;
        rt.block_on(async {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
        });
        handle.shutdown();
        Ok(())
    }
}

fn bind(addr: SocketAddr, backlog: u32) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog.min(i32::MAX as u32) as i32)?;
    Ok(socket.into())
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Graceful shutdown: stop accepting, finish in-flight requests (their responses say
    /// `Connection: close`), close idle connections, force-close after the deadline. Blocks
    /// until every worker has exited.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
        self.wait();
    }

    /// Block until the server stops (for example after a signal).
    pub fn wait(self) {
        for w in self.workers {
            if w.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
    }
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("workers", &self.workers.len())
            .finish()
    }
}
