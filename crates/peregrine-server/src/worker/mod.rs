//! One worker: a thread with a tokio `LocalRuntime` (current-thread), its own listener (a
//! `SO_REUSEPORT` socket, or a handle on an injected one), and every connection it accepted (no
//! work stealing).
//!
//! `mod.rs` runs the worker and holds its shared state; `accept.rs` is the accept loop and the
//! acceptor step; `limits.rs` the connection limits shared by all workers; `pools.rs` the
//! recycled buffers and connection shells; `heads.rs` the response-head cache.

mod accept;
mod heads;
mod limits;
mod pools;
mod ticker;

#[cfg(feature = "http2")]
pub(crate) use heads::log_refused_field;
use heads::HEAD_CACHE_REFRESH;
pub(crate) use heads::{BodyOut, HeadCache, HeadWritten, TextFields};
pub(crate) use limits::Global;
use limits::Slot;

use crate::conn::Conn;
use crate::idle::{IdleSet, NO_KEY};
use crate::listener::Listener;
use crate::pooled::BlockPool;
use crate::transport::Acceptor;
use crate::{ServerConfig, Service};
use bytes::BytesMut;
use peregrine_codec::FieldSpan;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// Per-worker state every connection of the worker can reach (not generic over the service).
pub(crate) struct WorkerShared {
    pub(crate) config: ServerConfig,
    /// The parser's field table, shared by the worker's connections: parsing never yields, so
    /// one table per thread suffices and idle connections do not carry one.
    pub(crate) fields: RefCell<Box<[FieldSpan]>>,
    pub(super) read_pool: RefCell<Vec<BytesMut>>,
    /// Connection shells of connections that went idle, for the next one that goes busy.
    /// Emptied when the worker stops: each holds an `Rc` to this state (a cycle otherwise).
    pub(super) conn_pool: RefCell<Vec<Rc<Conn>>>,
    pub(super) out_pool: RefCell<Vec<Vec<u8>>>,
    shutting_down: Cell<bool>,
    /// Notified when shutdown starts (connections that are not in the idle set: HTTP/2).
    shutdown_started: Notify,
    /// Idle connections, woken when they time out or shutdown starts.
    pub(crate) idle: IdleSet,
    /// Memory for the per-batch futures of busy connections (see [`crate::pooled`]).
    pub(crate) busy_blocks: BlockPool,
    pub(crate) head_cache: RefCell<HeadCache>,
    live: Cell<usize>,
    all_closed: Notify,
    /// The server-wide connection count.
    pub(super) global: Arc<Global>,
    /// Bytes read from and written to the worker's HTTP/1 transports (for `WorkerStats`): a
    /// plain add per read or write call, never a branch or an atomic.
    pub(crate) bytes_in: Cell<u64>,
    pub(crate) bytes_out: Cell<u64>,
}

thread_local! {
    /// The state of the worker running on this thread: upgraded connections take its shutdown
    /// signal from here (see `Upgraded::new`), whichever protocol driver made them.
    static CURRENT: RefCell<Weak<WorkerShared>> = const { RefCell::new(Weak::new()) };
}

/// The state of the worker running on this thread, if one is.
pub(crate) fn current() -> Option<Rc<WorkerShared>> {
    CURRENT.with(|c| c.borrow().upgrade())
}

impl WorkerShared {
    pub(crate) fn new(config: ServerConfig, global: Arc<Global>) -> Self {
        let n = config.limits.max_fields.max(1);
        WorkerShared {
            fields: RefCell::new(vec![FieldSpan::default(); n].into_boxed_slice()),
            read_pool: RefCell::new(Vec::new()),
            conn_pool: RefCell::new(Vec::new()),
            out_pool: RefCell::new(Vec::new()),
            shutting_down: Cell::new(false),
            shutdown_started: Notify::new(),
            idle: IdleSet::new(config.idle_timeout, config.header_timeout),
            busy_blocks: BlockPool::new(),
            head_cache: RefCell::new(HeadCache::new(config.server_name)),
            live: Cell::new(0),
            all_closed: Notify::new(),
            global,
            config,
            bytes_in: Cell::new(0),
            bytes_out: Cell::new(0),
        }
    }

    /// Counts `n` bytes read from a transport.
    #[inline(always)]
    pub(crate) fn count_in(&self, n: usize) {
        self.bytes_in
            .set(self.bytes_in.get().wrapping_add(n as u64));
    }

    /// Counts `n` bytes written to a transport.
    #[inline(always)]
    pub(crate) fn count_out(&self, n: usize) {
        self.bytes_out
            .set(self.bytes_out.get().wrapping_add(n as u64));
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    /// Resolves once shutdown has started.
    pub(crate) async fn shutdown_started(&self) {
        loop {
            let notified = self.shutdown_started.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a start in between is not missed.
            notified.as_mut().enable();
            if self.is_shutting_down() {
                return;
            }
            notified.await;
        }
    }
}

/// A connection's hold on its worker: the worker's shared state, and the connection's place in
/// the server-wide count (`max_connections`), in the worker's live count and in its idle
/// registry, all given back on drop. Two words, because it is part of every idle connection's
/// state (see `conn::serve`).
pub(crate) struct ConnShared {
    shared: Rc<WorkerShared>,
    /// The connection's entry in [`WorkerShared::idle`], from its first idle wait on.
    pub(crate) idle_key: Cell<u32>,
}

impl ConnShared {
    fn new(shared: &Rc<WorkerShared>, slot: Slot<'_>) -> Self {
        slot.keep();
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }

    /// A hold taken without `accept` (tests of the connection driver).
    #[cfg(test)]
    pub(crate) fn for_test(shared: &Rc<WorkerShared>) -> Self {
        assert!(shared.global.try_acquire(), "the test's server is full");
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }
}

impl std::ops::Deref for ConnShared {
    type Target = Rc<WorkerShared>;
    fn deref(&self) -> &Rc<WorkerShared> {
        &self.shared
    }
}

impl Drop for ConnShared {
    fn drop(&mut self) {
        let shared = &self.shared;
        let key = self.idle_key.get();
        if crate::idle::is_entry(key) {
            shared.idle.remove(key as usize);
        }
        shared.global.release();
        let n = shared.live.get() - 1;
        shared.live.set(n);
        if n == 0 {
            shared.all_closed.notify_one();
        }
    }
}

/// How a worker starts: its number, the hooks to run before it accepts
/// ([`Server::on_worker_start`](crate::Server::on_worker_start)), and where to report that it
/// is ready (or why it is not).
pub(crate) struct Start {
    pub(crate) index: usize,
    pub(crate) hooks: Vec<crate::server::WorkerStartHook>,
    /// Reports `(index, outcome)`: the workers of one start share the channel.
    pub(crate) ready: std::sync::mpsc::Sender<(usize, std::io::Result<()>)>,
    /// Whether the listener is this worker's own `SO_REUSEPORT` socket (not a shared one).
    pub(crate) own_socket: bool,
    #[cfg(feature = "fault-injection")]
    pub(crate) fault: Arc<crate::server::fault::Slot>,
}

/// The body of a worker thread: run the start hooks, accept until shutdown, then drain, then
/// return (dropping what is left, which force-closes it). Returns the panic's message when the
/// worker's own task panicked (it died), `None` when it stopped or never started (which its
/// start report says).
pub(crate) fn run<S: Service, A: Acceptor>(
    listener: Listener,
    acceptor: A,
    config: ServerConfig,
    service: S,
    global: Arc<Global>,
    mut stop: watch::Receiver<bool>,
    start: Start,
) -> Option<String> {
    let Start {
        index,
        hooks,
        ready,
        own_socket,
        #[cfg(feature = "fault-injection")]
        fault,
    } = start;
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if config.pin {
        // Blocking-pool threads would inherit the worker's one CPU (see `cpus`).
        builder.on_thread_start(crate::cpus::unpin_helper_thread);
    }
    // A `LocalRuntime` (stable since tokio 1.51): `spawn_local` tasks are the runtime's own,
    // polled from its loop. A `LocalSet` would add its queue, waker and `run_until` poll to
    // every wake-up of a connection (about 250 instructions per request at depth 1).
    let rt = match builder
        .enable_all()
        .build_local(tokio::runtime::LocalOptions::default())
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send((index, Err(e)));
            return None;
        }
    };
    let died = rt.block_on(async move {
        // Before accepting: a failed hook fails `serve`; a stop during a slow hook ends it.
        for hook in &hooks {
            let started = tokio::select! {
                r = hook(index) => r,
                _ = stop.wait_for(|s| *s) => Err(std::io::Error::other("stopped while starting")),
            };
            if let Err(e) = started {
                let msg = format!("worker {index}: on_worker_start hook failed: {e}");
                let _ = ready.send((index, Err(std::io::Error::new(e.kind(), msg))));
                return None;
            }
        }
        drop(hooks);
        let listener = match listener.into_async() {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((index, Err(e)));
                return None;
            }
        };
        let shared = Rc::new(WorkerShared::new(config, global));
        CURRENT.with(|c| *c.borrow_mut() = Rc::downgrade(&shared));
        // Periodic work ticks from `Ticker`s (a timerfd on Linux), not tokio intervals: timers
        // in tokio's wheel cost work at every park, once per request at c=1. Made before the
        // worker reports ready, so a failure fails `serve` instead of leaving a bound listener
        // that nobody accepts on.
        let ticks = ticker::Ticker::new(HEAD_CACHE_REFRESH)
            .and_then(|refresh| Ok((refresh, ticker::Ticker::new(shared.idle.tick_len())?)));
        let (mut refresh_tick, mut sweep_tick) = match ticks {
            Ok(t) => t,
            Err(e) => {
                let msg = format!("worker {index}: periodic timers: {e}");
                let _ = ready.send((index, Err(std::io::Error::new(e.kind(), msg))));
                return None;
            }
        };
        let _ = ready.send((index, Ok(())));
        drop(ready);
        // The worker's own work runs in a task of its own, like its connections: a panic in it
        // ends this worker's `block_on` (through the join handle) instead of unwinding the
        // thread, as when it ran in a `LocalSet`.
        let main = tokio::task::spawn_local(async move {
            let service = Rc::new(service);
            let dates = shared.clone();
            tokio::task::spawn_local(async move {
                loop {
                    refresh_tick.tick().await;
                    dates.head_cache.borrow_mut().refresh();
                }
            });
            let sweeper = shared.clone();
            tokio::task::spawn_local(async move {
                loop {
                    sweep_tick.tick().await;
                    let idle = sweeper.idle.sweep();
                    if let Some(events) = &sweeper.config.events {
                        events.worker_stats(&crate::events::WorkerStats {
                            worker: crate::events::current_worker(),
                            open: sweeper.live.get(),
                            idle,
                            bytes_in: sweeper.bytes_in.get(),
                            bytes_out: sweeper.bytes_out.get(),
                        });
                    }
                    // Another worker is full and had no idle connection to close.
                    let global = &sweeper.global;
                    if global.evict_wanted.load(Ordering::Relaxed) && sweeper.idle.evict_oldest() {
                        global.evict_wanted.store(false, Ordering::Relaxed);
                    }
                }
            });
            let accepting = accept::accept_loop(&listener, &acceptor, &shared, &service);
            #[cfg(feature = "fault-injection")]
            let accepting = crate::server::fault::or_killed(accepting, &fault, &listener);
            tokio::select! {
                _ = accepting => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            // Stop accepting: connections still in this listener's backlog are refused. The
            // supervisor holds a second handle on an own socket, so dropping ours would not
            // close it: shut it down.
            if let (true, crate::listener::AsyncListener::Tcp(l)) = (own_socket, &listener) {
                let _ = socket2::SockRef::from(l).shutdown(std::net::Shutdown::Both);
            }
            drop(listener);
            shared.shutting_down.set(true);
            shared.shutdown_started.notify_waiters();
            // No shell enters the pool from now on (see `put_conn`): emptying it breaks the
            // cycle between the pooled shells and this state.
            shared.conn_pool.borrow_mut().clear();
            shared.idle.wake_all();
            let deadline = tokio::time::sleep(shared.config.shutdown_timeout);
            tokio::pin!(deadline);
            while shared.live.get() > 0 {
                tokio::select! {
                    _ = shared.all_closed.notified() => {}
                    _ = &mut deadline => {
                        tracing::warn!(
                            open = shared.live.get(),
                            "shutdown deadline passed; closing remaining connections"
                        );
                        break;
                    }
                }
            }
        });
        match main.await {
            Err(e) if e.is_panic() => Some(crate::server::panic_text(&*e.into_panic())),
            _ => None,
        }
    });
    // Dropping the runtime drops the tasks still open (connections force-closed after the
    // deadline, handlers' local tasks), on this thread and inside the runtime's context, as
    // dropping the `LocalSet` did.
    drop(rt);
    died
}
