//! Starting workers, accepting, graceful shutdown.

use crate::config::ListenAddr;
use crate::events::EngineEvents;
use crate::listener::Listener;
use crate::steering;
use crate::transport::{Acceptor, PlainAcceptor};
use crate::worker::WorkerStartHook;
use crate::{ServerConfig, Service};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use supervise::{Event, Setup, Source, Workers};
use tokio::sync::watch;

#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub mod fault;
mod supervise;

pub use crate::drain::DrainSignal;
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub use fault::Fault;

/// Entry point: `Server::new(config).serve(service)`.
///
/// By default the server binds what the configuration names: [`ServerConfig::addr`] (every
/// worker its own `SO_REUSEPORT` socket) or [`ServerConfig::unix`]. Listeners bound elsewhere
/// (by the application, by systemd, by the process this one replaces) are served instead when
/// given with [`Server::with_listener`]. Connections go through an [`Acceptor`] before the
/// driver serves them ([`PlainAcceptor`] by default; see [`Server::with_acceptor`]).
///
/// ```no_run
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let config = ServerConfig::builder().workers(2).build();
/// let handle = Server::new(config)
///     .serve(service_fn(|_req: Request| async { Response::text("Hello, World!") }))
///     .unwrap();
/// println!("listening on {}", handle.local_addr());
/// handle.wait();
/// ```
pub struct Server<A = PlainAcceptor> {
    config: ServerConfig,
    /// Who hears about connections and refusals ([`Server::with_events`]).
    events: Option<Arc<dyn EngineEvents>>,
    /// Raised when a graceful shutdown starts ([`Server::with_drain_signal`]).
    drain: DrainSignal,
    listeners: Vec<Listener>,
    acceptor: A,
    on_worker_start: Vec<WorkerStartHook>,
    /// Whether the listeners are bound by the engine (none injected).
    listeners_are_own: bool,
    /// HTTP/3 on the listeners' port ([`Server::with_http3`]).
    #[cfg(feature = "http3")]
    http3: Option<crate::h3::Http3>,
    #[cfg(feature = "fault-injection")]
    faults: Vec<(usize, Fault)>,
}

/// A running server: its address, and the way to stop it.
///
/// Dropping the handle does not stop the server (its workers keep serving until the process
/// ends); call [`ServerHandle::shutdown`] to stop it.
pub struct ServerHandle {
    addr: SocketAddr,
    drain: DrainSignal,
    drain_delay: Duration,
    listen_addr: ListenAddr,
    /// The Unix socket file the server created, removed when it stops.
    bound_path: Option<PathBuf>,
    stop: Arc<watch::Sender<bool>>,
    /// Wakes the supervisor when a shutdown starts.
    wake: mpsc::Sender<Event>,
    /// Raised once every worker has exited.
    done: watch::Receiver<bool>,
    supervisor: JoinHandle<io::Result<()>>,
    workers: usize,
    #[cfg(feature = "fault-injection")]
    faults: Vec<Arc<fault::Slot>>,
}

impl Server {
    /// A server with this configuration.
    pub fn new(config: ServerConfig) -> Self {
        Server {
            config,
            events: None,
            drain: DrainSignal::default(),
            listeners: Vec::new(),
            acceptor: PlainAcceptor,
            on_worker_start: Vec::new(),
            listeners_are_own: true,
            #[cfg(feature = "http3")]
            http3: None,
            #[cfg(feature = "fault-injection")]
            faults: Vec::new(),
        }
    }
}

impl<A: Acceptor> Server<A> {
    /// Serves `listener` (already bound and listening) instead of binding
    /// [`ServerConfig::addr`]. May be called several times; the workers share the listeners
    /// (each worker accepts from a handle on one of them, round robin).
    ///
    /// ```no_run
    /// use peregrine_server::{service_fn, Listener, Request, Response, Server, ServerConfig};
    /// let mut server = Server::new(ServerConfig::default());
    /// // systemd socket activation, or a listener handed over by the previous process:
    /// if let Some(listeners) = Listener::from_systemd_env().unwrap() {
    ///     for l in listeners {
    ///         server = server.with_listener(l);
    ///     }
    /// }
    /// server.run_until_signal(service_fn(|_r: Request| async { Response::text("hi") })).unwrap();
    /// ```
    pub fn with_listener(mut self, listener: Listener) -> Self {
        self.listeners.push(listener);
        self.listeners_are_own = false;
        self
    }

    /// Reports connections opening and closing, worker statistics and the requests the engine
    /// refuses itself to `events` (see [`EngineEvents`]). Without it the driver skips every
    /// event. Every protocol: HTTP/1.1, HTTP/2 and upgraded connections.
    ///
    /// ```
    /// use peregrine_server::events::{ConnectionOpened, EngineEvents};
    /// use peregrine_server::{Server, ServerConfig};
    /// use std::sync::Arc;
    ///
    /// struct Log;
    /// impl EngineEvents for Log {
    ///     fn connection_opened(&self, c: &ConnectionOpened) {
    ///         println!("{} connected", c.peer);
    ///     }
    /// }
    /// let server = Server::new(ServerConfig::default()).with_events(Arc::new(Log));
    /// ```
    pub fn with_events(mut self, events: Arc<dyn EngineEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// Raises `signal` when a graceful shutdown starts, then keeps accepting for
    /// [`Timeouts::drain_delay`](crate::config::Timeouts::drain_delay) before the listeners
    /// close. Give a clone to a readiness endpoint before the server starts. Without it the
    /// server has a signal of its own ([`Server::drain_signal`]).
    ///
    /// ```
    /// use peregrine_server::{DrainSignal, Server, ServerConfig};
    /// let draining = DrainSignal::default();
    /// let server = Server::new(ServerConfig::default()).with_drain_signal(draining.clone());
    /// assert!(!server.drain_signal().is_draining());
    /// draining.start(); // what a shutdown does
    /// assert!(server.drain_signal().is_draining()); // one flag, shared
    /// ```
    pub fn with_drain_signal(mut self, signal: DrainSignal) -> Self {
        self.drain = signal;
        self
    }

    /// The signal this server raises when a graceful shutdown starts (clones share the flag).
    pub fn drain_signal(&self) -> &DrainSignal {
        &self.drain
    }

    /// Serves HTTP/3 too, over UDP on the TCP listeners' address and port (each worker its own
    /// `SO_REUSEPORT` socket), with `http3`'s certificates, and advertises it on the TCP
    /// responses (`Alt-Svc`, unless [`Http3Config::alt_svc`](crate::h3::Http3Config::alt_svc)
    /// is off). The listeners must be TCP (Unix sockets have no UDP port); limits are
    /// [`ServerConfig::http3`]'s and the engine's.
    #[cfg(feature = "http3")]
    pub fn with_http3(mut self, http3: crate::h3::Http3) -> Self {
        self.http3 = Some(http3);
        self
    }

    /// Puts `acceptor` between accepting a connection and serving it (a TLS handshake, say).
    pub fn with_acceptor<B: Acceptor>(self, acceptor: B) -> Server<B> {
        Server {
            config: self.config,
            events: self.events,
            drain: self.drain,
            listeners: self.listeners,
            acceptor,
            on_worker_start: self.on_worker_start,
            listeners_are_own: self.listeners_are_own,
            #[cfg(feature = "http3")]
            http3: self.http3,
            #[cfg(feature = "fault-injection")]
            faults: self.faults,
        }
    }

    /// Runs `hook(worker_index)` on each worker thread, on that worker's tokio
    /// [`LocalRuntime`] (so it may `await` and `spawn_local`), before the worker accepts its
    /// first connection: per-worker state (a database pool, a cache) is in place before any request.
    /// [`Server::serve`] returns only once every worker's hooks succeeded; if one fails (or
    /// panics), the server stops and `serve` returns that error, naming the worker (same kind,
    /// message `worker N: on_worker_start hook failed: <the hook's message>`). Hooks
    /// registered several times run in order. Nothing of this is on the per-request path.
    ///
    /// [`LocalRuntime`]: tokio::runtime::LocalRuntime
    ///
    /// ```
    /// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let counter = started.clone();
    /// let config = ServerConfig::builder().addr("127.0.0.1:0".parse().unwrap()).workers(2).build();
    /// let handle = Server::new(config)
    ///     .on_worker_start(move |_worker| {
    ///         let counter = counter.clone();
    ///         async move {
    ///             // e.g. `POOL.set(Pool::connect(url).await?)` in a thread-local
    ///             counter.fetch_add(1, Ordering::SeqCst);
    ///             Ok(())
    ///         }
    ///     })
    ///     .serve(service_fn(|_req: Request| async { Response::text("hi") }))
    ///     .unwrap();
    /// assert_eq!(started.load(Ordering::SeqCst), 2); // before any connection
    /// handle.shutdown();
    /// ```
    pub fn on_worker_start<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<()>> + 'static,
    {
        self.on_worker_start
            .push(Arc::new(move |worker| Box::pin(hook(worker))));
        self
    }

    /// The listeners the workers accept from, one per worker: the injected ones (shared by
    /// handles), a Unix socket, or `SO_REUSEPORT` TCP sockets (the first resolves port 0, the
    /// others bind the same port). Also whether the server created a Unix socket file.
    fn listeners(&mut self, n: usize) -> io::Result<(Vec<Listener>, Option<PathBuf>)> {
        let config = &self.config;
        let own_tcp = self.listeners.is_empty() && config.unix.is_none();
        if config.steer && !own_tcp {
            tracing::info!("connection steering applies to the engine's own TCP listeners; off for injected listeners and Unix sockets");
        }
        // Before binding: whether the group will hold these sockets alone (see `steering`).
        let group_fresh =
            config.steer && own_tcp && steering::group_is_fresh(config.addr, socket2::Type::STREAM);
        let (first, bound_path) = if !self.listeners.is_empty() {
            let injected = std::mem::take(&mut self.listeners);
            let mut out = Vec::with_capacity(n.max(injected.len()));
            for i in 0..n.max(injected.len()) {
                out.push(injected[i % injected.len()].try_clone()?);
            }
            return Ok((out, None));
        } else if let Some(path) = &config.unix {
            (
                Listener::bind_unix(path, config.backlog)?,
                Some(path.clone()),
            )
        } else {
            (Listener::bind_tcp(config.addr, config.backlog)?, None)
        };
        let mut out = Vec::with_capacity(n);
        match first.local_addr()? {
            ListenAddr::Tcp(addr) if bound_path.is_none() => {
                out.push(first);
                for _ in 1..n {
                    out.push(Listener::bind_tcp(addr, config.backlog)?);
                }
                if config.steer {
                    steering::steer_listeners(&out, group_fresh);
                }
            }
            _ => {
                for _ in 1..n {
                    out.push(first.try_clone()?);
                }
                out.push(first);
            }
        }
        Ok((out, bound_path))
    }

    /// Binds (or takes the injected listeners) and starts the workers; returns once they
    /// listen. A worker that later dies outside a handler is replaced (see
    /// [`ServerHandle::join`]).
    pub fn serve<S: Service>(mut self, service: S) -> io::Result<ServerHandle> {
        self.config.validate()?;
        let n = self.config.workers.max(1);
        let (listeners, bound_path) = self.listeners(n)?;
        let listen_addr = listeners[0].local_addr()?;
        let addr = match &listen_addr {
            ListenAddr::Tcp(a) => *a,
            ListenAddr::Unix(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        // Restarts rebind the engine's own TCP sockets; shared listeners are handed out again.
        let own_tcp = self.listeners_are_own && bound_path.is_none();
        let source = if own_tcp {
            Source::Rebind(addr)
        } else {
            Source::Share(
                listeners
                    .iter()
                    .map(Listener::try_clone)
                    .collect::<io::Result<_>>()?,
            )
        };
        let config = self.config;
        // The workers' UDP sockets on the TCP listeners' port, bound in worker order (the
        // order connection-ID steering indexes them by).
        #[cfg(feature = "http3")]
        let http3 = match self.http3.take() {
            Some(h3) => {
                let ListenAddr::Tcp(tcp) = &listen_addr else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "HTTP/3 needs a TCP listener (its port is the UDP port)",
                    ));
                };
                let sockets = crate::h3::QuicSockets::bind(
                    *tcp,
                    listeners.len(),
                    config.http3.steer_by_connection_id,
                )
                .map_err(|e| io::Error::new(e.kind(), format!("HTTP/3 UDP sockets: {e}")))?;
                Some((h3, sockets))
            }
            None => None,
        };
        // Advertised on the port the UDP sockets share with the TCP listeners.
        #[cfg(feature = "http3")]
        let service = {
            let advertise = http3.is_some() && config.http3.alt_svc;
            crate::h3::AltSvc::new(service, advertise.then_some(addr.port()))
        };
        let stop = Arc::new(watch::channel(false).0);
        let mut workers = Workers::new(
            Setup {
                config: config.clone(),
                events: self.events,
                drain: self.drain.clone(),
                #[cfg(feature = "http3")]
                http3,
            },
            service,
            self.acceptor,
            self.on_worker_start,
            &stop,
            listeners.len(),
            source,
        );
        #[cfg(feature = "fault-injection")]
        for (worker, f) in self.faults {
            if let Some(slot) = workers.faults.get(worker) {
                slot.arm(f);
            }
        }
        let (ready, reports) = std::sync::mpsc::channel();
        let started = listeners.len();
        let mut spawned = Ok(());
        for (i, listener) in listeners.into_iter().enumerate() {
            spawned = spawned.and_then(|()| workers.spawn(i, listener, ready.clone()));
        }
        drop(ready);
        if let Err(e) = spawned.and_then(|()| workers.await_ready(&reports, started)) {
            workers.abort();
            remove_socket_file(bound_path);
            return Err(e);
        }
        let (done_tx, done) = watch::channel(false);
        let wake = workers.waker();
        #[cfg(feature = "fault-injection")]
        let faults = workers.faults.clone();
        let supervisor = std::thread::Builder::new()
            .name("peregrine-supervisor".into())
            .spawn(move || workers.supervise(done_tx));
        let supervisor = match supervisor {
            Ok(s) => s,
            Err(e) => {
                // The workers hold their own stop receivers: they stop and exit by themselves.
                let _ = stop.send(true);
                return Err(e);
            }
        };
        let handle = ServerHandle {
            addr,
            drain: self.drain,
            drain_delay: config.timeouts.drain_delay,
            listen_addr,
            bound_path,
            stop,
            wake,
            done,
            supervisor,
            workers: started,
            #[cfg(feature = "fault-injection")]
            faults,
        };
        tracing::info!(addr = ?handle.listen_addr, workers = started, "listening");
        Ok(handle)
    }

    /// `serve`, then block until SIGTERM/SIGINT, then shut down gracefully. Returns an error
    /// when the server stops by itself: workers kept dying (see [`ServerHandle::join`]); a
    /// `main` that returns it exits non-zero, so the process supervisor sees the failure.
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
        let failed = rt.block_on(async {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
                _ = handle.stopped() => return true,
            }
            false
        });
        if failed {
            return handle.join();
        }
        handle.stop_and_join()
    }

    /// Arms an injected fault on worker `worker` before it starts (engine tests only).
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn with_fault(mut self, worker: usize, fault: Fault) -> Self {
        self.faults.push((worker, fault));
        self
    }
}

fn remove_socket_file(path: Option<PathBuf>) {
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
}

impl ServerHandle {
    /// The bound address (useful with port 0); `0.0.0.0:0` when serving a Unix socket.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the server listens: a TCP address or a Unix socket path.
    pub fn listen_addr(&self) -> &ListenAddr {
        &self.listen_addr
    }

    /// Graceful shutdown: raise the server's [`DrainSignal`] and keep accepting for
    /// [`Timeouts::drain_delay`](crate::config::Timeouts::drain_delay) (readiness fails first), then stop accepting, finish
    /// in-flight requests (their responses say `Connection: close`), close idle connections,
    /// force-close after the deadline. Blocks until every worker has exited.
    pub fn shutdown(self) {
        if let Err(e) = self.stop_and_join() {
            tracing::error!(error = %e, "the server had stopped by itself");
        }
    }

    fn stop_and_join(self) -> io::Result<()> {
        self.drain.start();
        if !self.drain_delay.is_zero() {
            tracing::info!(delay = ?self.drain_delay, "draining: readiness off, still accepting");
            std::thread::sleep(self.drain_delay);
        }
        let _ = self.stop.send(true);
        let _ = self.wake.send(Event::Stop);
        self.join()
    }

    /// The server's [`DrainSignal`] (see [`Server::with_drain_signal`]).
    pub fn drain_signal(&self) -> &DrainSignal {
        &self.drain
    }

    /// Block until the server stops (for example after a signal). An error, if any, is logged;
    /// [`ServerHandle::join`] returns it.
    pub fn wait(self) {
        if let Err(e) = self.join() {
            tracing::error!(error = %e, "the server stopped by itself");
        }
    }

    /// Block until the server stops; `Err` when it stopped by itself because workers kept
    /// dying.
    ///
    /// A worker thread that dies outside a handler (a panic in the engine, or in code it runs
    /// outside a request) has its socket closed at once (connections waiting in its backlog
    /// are reset, new ones go to the other workers) and is started again after a back-off
    /// (100 ms, doubling up to 5 s), on a new socket, its `on_worker_start` hooks run again.
    /// More than five deaths within a minute stop the whole server gracefully, and `join`
    /// returns the error. A panic inside a handler is not a death: it is answered with 500.
    ///
    /// ```no_run
    /// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
    /// let handle = Server::new(ServerConfig::default())
    ///     .serve(service_fn(|_req: Request| async { Response::text("hi") }))
    ///     .unwrap();
    /// if let Err(e) = handle.join() {
    ///     eprintln!("server failed: {e}");
    ///     std::process::exit(1); // let systemd / Kubernetes restart the process
    /// }
    /// ```
    pub fn join(self) -> io::Result<()> {
        let stopped = self
            .supervisor
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the worker supervisor panicked")));
        // The socket file this server created goes with it.
        remove_socket_file(self.bound_path);
        stopped
    }

    /// Resolves once every worker has exited: after a shutdown, or when the server stopped by
    /// itself (workers kept dying; [`ServerHandle::join`] then returns the error). A program
    /// that waits for signals in its own runtime waits for this too, so that it exits instead
    /// of serving nothing.
    ///
    /// ```no_run
    /// # async fn run(handle: peregrine_server::ServerHandle) -> std::io::Result<()> {
    /// use tokio::signal::unix::{signal, SignalKind};
    /// let mut term = signal(SignalKind::terminate())?;
    /// tokio::select! {
    ///     _ = term.recv() => {}
    ///     _ = handle.stopped() => return handle.join(), // the error, for a non-zero exit
    /// }
    /// handle.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn stopped(&self) {
        let mut done = self.done.clone();
        // An error means the supervisor is gone, which is stopped too.
        let _ = done.wait_for(|d| *d).await;
    }

    /// Injects `fault` into worker `worker`: it dies outside any handler, or its accepts fail
    /// (engine tests only).
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn inject_fault(&self, worker: usize, fault: Fault) {
        if let Some(slot) = self.faults.get(worker) {
            slot.arm(fault);
        }
    }
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("workers", &self.workers)
            .finish()
    }
}
