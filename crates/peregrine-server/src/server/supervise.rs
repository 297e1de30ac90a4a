//! The worker supervisor: starts the worker threads, and when one dies outside a handler (a
//! panic in the engine's own code, or in a library it calls from there) closes the dead
//! worker's socket and starts a new worker in its place, with back-off; a worker that keeps
//! dying stops the whole server with an error (see `docs/operations.md`, "Failures").
//!
//! Why the socket is closed by the supervisor and not left to the dying thread: each worker
//! owns one socket of the `SO_REUSEPORT` group, and the kernel keeps handing that socket its
//! share of new connections for as long as it is open. A thread that is gone while its
//! descriptor is not (leaked, or held by code that never returns) would leave those clients
//! waiting forever. The supervisor keeps its own handle on every socket the engine bound and
//! shuts it down (`shutdown(2)` on a listening socket leaves the group and resets the
//! connections in its backlog) whatever happened to the worker's handle.

use crate::drain::DrainSignal;
use crate::events::EngineEvents;
use crate::listener::Listener;
use crate::transport::Acceptor;
use crate::worker::{self, panic_text, Global, WorkerStartHook};
use crate::{cpus, ServerConfig, Service};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The first restart waits this long; each further death within [`RESTART_WINDOW`] doubles it.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest wait before a restart.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How many deaths (across all workers) within [`RESTART_WINDOW`] are restarted; one more
/// stops the server: a panic loop is not fixed by restarting, and a supervisor outside the
/// process (systemd, Kubernetes) should see the failure.
pub(crate) const MAX_RESTARTS: usize = 5;
/// The window over which deaths are counted.
pub(crate) const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// Where a starting worker reports `(its index, whether it started)`.
pub(super) type Ready = mpsc::Sender<(usize, io::Result<()>)>;

/// What the supervisor hears about.
pub(super) enum Event {
    /// A worker thread ended: `died` holds the panic's message unless it stopped when asked
    /// (or never started, which its start report says).
    Exited {
        index: usize,
        /// Which start of the worker this was (a stale report names an earlier one).
        token: u64,
        died: Option<String>,
    },
    /// A shutdown started (wakes the supervisor out of a back-off).
    Stop,
}

/// Where a restarted worker's listener comes from.
pub(super) enum Source {
    /// The engine bound the sockets: a new `SO_REUSEPORT` socket on the same address.
    Rebind(SocketAddr),
    /// The workers share listeners (injected, or a Unix socket): another handle on the one
    /// worker i used (entry i). A dead worker's handle leaves nothing behind: the others
    /// accept from the same queue. Dropped when the server stops, so that the last worker
    /// handle to close closes the socket, as without a supervisor.
    Share(Vec<Listener>),
}

/// What a server is given to run with: its configuration, and the live handles beside it.
pub(super) struct Setup {
    pub(super) config: ServerConfig,
    /// Who hears about connections and refusals ([`Server::with_events`](crate::Server::with_events)).
    pub(super) events: Option<Arc<dyn EngineEvents>>,
    /// Raised when a graceful shutdown starts, or when the server gives up.
    pub(super) drain: DrainSignal,
    /// HTTP/3 beside the TCP listeners ([`Server::with_http3`](crate::Server::with_http3)),
    /// with the workers' UDP sockets.
    #[cfg(feature = "http3")]
    pub(super) http3: Option<(crate::h3::Http3, crate::h3::QuicSockets)>,
}

/// The workers of one server and what is needed to start them again.
pub(super) struct Workers<S, A> {
    pub(super) config: ServerConfig,
    /// Who hears about connections and refusals.
    observer: Option<Arc<dyn EngineEvents>>,
    /// Raised when the server gives up.
    drain: DrainSignal,
    /// HTTP/3, and the workers' UDP sockets: kept for the server's life, so that a restarted
    /// worker gets its predecessor's socket (and place in the reuseport group) back.
    #[cfg(feature = "http3")]
    http3: Option<(crate::h3::Http3, crate::h3::QuicSockets)>,
    pub(super) service: S,
    pub(super) acceptor: A,
    pub(super) global: Arc<Global>,
    /// The server's stop signal, owned by its `ServerHandle`: dropping the handle drops the
    /// sender, which stops the workers as it always has.
    stop: Weak<watch::Sender<bool>>,
    stop_rx: watch::Receiver<bool>,
    pub(super) hooks: Vec<WorkerStartHook>,
    pins: Vec<Option<usize>>,
    source: Option<Source>,
    /// Per worker: the supervisor's handle on the socket the engine bound for it.
    guards: Vec<Option<Listener>>,
    /// Per worker: its thread, and the token its exit report will carry.
    threads: Vec<Option<(u64, JoinHandle<()>)>>,
    next_token: u64,
    /// Per worker: whether it reported ready and has not exited since.
    alive: Vec<bool>,
    exits: mpsc::Sender<Event>,
    events: mpsc::Receiver<Event>,
    #[cfg(feature = "fault-injection")]
    pub(super) faults: Vec<Arc<super::fault::Slot>>,
}

impl<S: Service, A: Acceptor> Workers<S, A> {
    /// Workers for `n` listeners; restarted ones get theirs from `source`.
    pub(super) fn new(
        setup: Setup,
        service: S,
        acceptor: A,
        hooks: Vec<WorkerStartHook>,
        stop: &Arc<watch::Sender<bool>>,
        n: usize,
        source: Source,
    ) -> Self {
        let Setup {
            config,
            events: observer,
            drain,
            #[cfg(feature = "http3")]
            http3,
        } = setup;
        let global = Arc::new(Global::new(
            config.limits.max_connections,
            config.limits.max_connections_per_addr,
        ));
        let (exits, events) = mpsc::channel();
        Workers {
            pins: cpus::pin_plan(config.pin, n),
            config,
            observer,
            drain,
            #[cfg(feature = "http3")]
            http3,
            service,
            acceptor,
            global,
            stop: Arc::downgrade(stop),
            stop_rx: stop.subscribe(),
            hooks,
            source: Some(source),
            guards: (0..n).map(|_| None).collect(),
            threads: (0..n).map(|_| None).collect(),
            next_token: 0,
            alive: vec![false; n],
            exits,
            events,
            #[cfg(feature = "fault-injection")]
            faults: (0..n).map(|_| Arc::default()).collect(),
        }
    }

    /// The sender a `ServerHandle` wakes the supervisor with.
    pub(super) fn waker(&self) -> mpsc::Sender<Event> {
        self.exits.clone()
    }

    /// Starts worker `index` on `listener`; it sends its start report on `ready`.
    pub(super) fn spawn(
        &mut self,
        index: usize,
        listener: Listener,
        ready: Ready,
    ) -> io::Result<()> {
        let own_socket = matches!(self.source, Some(Source::Rebind(_)));
        self.guards[index] = if own_socket {
            Some(listener.try_clone()?)
        } else {
            None
        };
        let start = worker::Start {
            index,
            hooks: self.hooks.clone(),
            ready,
            own_socket,
            events: self.observer.clone(),
            #[cfg(feature = "http3")]
            http3: match &self.http3 {
                Some((h3, sockets)) => Some((h3.clone(), sockets.for_worker(index)?)),
                None => None,
            },
            #[cfg(feature = "fault-injection")]
            fault: self.faults[index].clone(),
        };
        let (config, service, acceptor, global) = (
            self.config.clone(),
            self.service.clone(),
            self.acceptor.clone(),
            self.global.clone(),
        );
        let (stop, exits, pin) = (self.stop_rx.clone(), self.exits.clone(), self.pins[index]);
        self.next_token += 1;
        let token = self.next_token;
        let spawned = std::thread::Builder::new()
            .name(format!("peregrine-w{index}"))
            .spawn(move || {
                if let Some(cpu) = pin {
                    cpus::pin_worker(index, cpu);
                }
                let ran = catch_unwind(AssertUnwindSafe(move || {
                    worker::run(listener, acceptor, config, service, global, stop, start)
                }));
                let died = ran.unwrap_or_else(|panic| Some(panic_text(&*panic)));
                let _ = exits.send(Event::Exited { index, token, died });
            });
        match spawned {
            Ok(thread) => {
                self.threads[index] = Some((token, thread));
                Ok(())
            }
            Err(e) => {
                self.close_socket(index);
                Err(e)
            }
        }
    }

    /// Waits for the start reports of `count` workers, in whatever order they come (a worker
    /// whose hook never finishes must not hide another's failure); the first failure is the
    /// error. The caller has dropped its own sender.
    pub(super) fn await_ready(
        &mut self,
        reports: &mpsc::Receiver<(usize, io::Result<()>)>,
        count: usize,
    ) -> io::Result<()> {
        for _ in 0..count {
            match reports.recv() {
                Ok((index, Ok(()))) => self.alive[index] = true,
                Ok((_, Err(e))) => return Err(e),
                Err(_) => return Err(io::Error::other("a worker exited during startup")),
            }
        }
        Ok(())
    }

    /// Stops every worker and waits for their threads (a failed start).
    pub(super) fn abort(mut self) {
        self.send_stop();
        for index in 0..self.threads.len() {
            if let Some((_, thread)) = self.threads[index].take() {
                let _ = thread.join();
            }
            self.close_socket(index);
        }
    }

    /// Shuts down the supervisor's handle on worker `index`'s socket: the socket leaves the
    /// `SO_REUSEPORT` group and the connections in its backlog are reset, even if another
    /// descriptor of it is still open somewhere.
    fn close_socket(&mut self, index: usize) {
        if let Some(Listener::Tcp(socket)) = self.guards[index].take() {
            // ENOTCONN when the worker already shut it down on a clean stop.
            let _ = socket2::SockRef::from(&socket).shutdown(std::net::Shutdown::Both);
        }
    }

    /// Watches the workers until they have all stopped: restarts the ones that die, gives up
    /// (stopping the rest) after too many deaths. `done` is raised once all have exited.
    pub(super) fn supervise(mut self, done: watch::Sender<bool>) -> io::Result<()> {
        let mut deaths: VecDeque<Instant> = VecDeque::new();
        let mut due: Vec<(Instant, usize)> = Vec::new();
        let mut failure: Option<io::Error> = None;
        loop {
            let stopping = self.stopping();
            if stopping {
                due.clear();
                self.source = None;
            }
            if due.is_empty() && !self.alive.iter().any(|a| *a) && self.threads_done() {
                break;
            }
            let next = due.iter().map(|d| d.0).min();
            let event = match next {
                Some(at) => {
                    match self
                        .events
                        .recv_timeout(at.saturating_duration_since(Instant::now()))
                    {
                        Ok(event) => Some(event),
                        Err(mpsc::RecvTimeoutError::Timeout) => None,
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match self.events.recv() {
                    Ok(event) => Some(event),
                    Err(_) => break,
                },
            };
            match event {
                Some(Event::Stop) => {}
                Some(Event::Exited { index, token, died }) => {
                    if !self.reap(index, token) {
                        continue;
                    }
                    let was_alive = std::mem::replace(&mut self.alive[index], false);
                    let Some(why) = died else { continue };
                    // Read again: a shutdown may have started while this thread waited.
                    if self.stopping() || failure.is_some() || !was_alive {
                        continue;
                    }
                    tracing::error!(worker = index, cause = %why, "worker died outside a handler; its socket is closed");
                    match self.schedule(index, &why, &mut deaths) {
                        Ok(wait) => due.push((Instant::now() + wait, index)),
                        Err(e) => failure = Some(self.give_up(e)),
                    }
                }
                None => {
                    let now = Instant::now();
                    let (ready, later) = due.into_iter().partition(|d| d.0 <= now);
                    due = later;
                    for (_, index) in ready {
                        if failure.is_some() || self.stopping() {
                            break;
                        }
                        match self.restart(index) {
                            Ok(()) => {
                                tracing::warn!(worker = index, "worker restarted");
                            }
                            // A start cut short by a shutdown is no failure.
                            Err(_) if self.stopping() => {}
                            Err(e) => {
                                let why = format!("restart failed: {e}");
                                tracing::error!(worker = index, "{why}");
                                match self.schedule(index, &why, &mut deaths) {
                                    Ok(wait) => due.push((Instant::now() + wait, index)),
                                    Err(e) => failure = Some(self.give_up(e)),
                                }
                            }
                        }
                    }
                }
            }
        }
        let _ = done.send(true);
        failure.map_or(Ok(()), Err)
    }

    /// Joins worker `index`'s thread and closes its socket, if the report is about the
    /// thread running now (a failed restart's report may arrive after the next one started).
    fn reap(&mut self, index: usize, token: u64) -> bool {
        match self.threads[index].take() {
            Some((current, thread)) if current == token => {
                self.close_socket(index);
                let _ = thread.join();
                true
            }
            other => {
                self.threads[index] = other;
                false
            }
        }
    }

    fn threads_done(&self) -> bool {
        self.threads.iter().all(Option::is_none)
    }

    /// Counts a death; the wait before the restart, or the error to stop the server with.
    fn schedule(
        &self,
        index: usize,
        why: &str,
        deaths: &mut VecDeque<Instant>,
    ) -> io::Result<Duration> {
        let now = Instant::now();
        deaths.push_back(now);
        while deaths
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            deaths.pop_front();
        }
        if deaths.len() > MAX_RESTARTS {
            return Err(io::Error::other(format!(
                "worker {index} died ({why}); {} worker deaths within {RESTART_WINDOW:?}, giving up",
                deaths.len()
            )));
        }
        let doublings = (deaths.len() - 1).min(16) as u32;
        Ok((BACKOFF_FIRST * 2u32.pow(doublings)).min(BACKOFF_MAX))
    }

    /// Stops the server: the error `join` and `run_until_signal` return.
    fn give_up(&self, e: io::Error) -> io::Error {
        tracing::error!(error = %e, "stopping the server");
        self.drain.start();
        self.send_stop();
        e
    }

    /// Whether the server is stopping: asked to, or its handle (and so the signal) is gone.
    fn stopping(&self) -> bool {
        *self.stop_rx.borrow() || self.stop.strong_count() == 0
    }

    fn send_stop(&self) {
        if let Some(stop) = self.stop.upgrade() {
            let _ = stop.send(true);
        }
    }

    /// Starts a new worker `index` on a fresh listener and waits until it accepts.
    fn restart(&mut self, index: usize) -> io::Result<()> {
        let listener = match &self.source {
            Some(Source::Rebind(addr)) => {
                if self.config.steer {
                    // The new socket joins the group last; the CPU program's indexes no
                    // longer match the workers (connections still arrive, spread).
                    tracing::warn!(
                        worker = index,
                        "restarted worker: connection steering is approximate from now on"
                    );
                }
                Listener::bind_tcp(*addr, self.config.backlog)?
            }
            Some(Source::Share(handles)) => match handles.get(index) {
                Some(l) => l.try_clone()?,
                None => return Err(io::Error::other("no listener to restart the worker on")),
            },
            None => return Err(io::Error::other("no listener to restart the worker on")),
        };
        let (ready, reports) = mpsc::channel();
        self.spawn(index, listener, ready)?;
        let started = self.await_ready(&reports, 1);
        if started.is_err() {
            // Its thread ends right after its report: reaped now, its exit report is stale.
            if let Some((token, _)) = self.threads[index] {
                self.reap(index, token);
            }
        }
        started
    }
}
