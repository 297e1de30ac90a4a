//! One worker: a thread with a tokio `LocalRuntime` (current-thread), its own listener (a
//! `SO_REUSEPORT` socket, or a handle on an injected one), and every connection it accepted (no
//! work stealing).
//!
//! `mod.rs` runs the worker; `shared.rs` the state its connections share, whatever their
//! protocol (the HTTP/1.1 driver's own per-worker state is `h1::Pools`, inside it);
//! `accept.rs` is the accept loop; `limits.rs` the connection limits shared by all workers;
//! `ticker.rs` the periodic timers.

mod accept;
mod limits;
mod shared;
mod ticker;

#[cfg(feature = "http3")]
pub(crate) use accept::Admitted;
pub(crate) use limits::Global;
pub(crate) use shared::{ConnShared, WorkerShared};

use crate::h1;
use crate::listener::Listener;
use crate::transport::Acceptor;
use crate::{ServerConfig, Service};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;

/// A hook run on each worker thread before it accepts (see [`Server::on_worker_start`](crate::Server::on_worker_start)).
pub(crate) type WorkerStartHook =
    Arc<dyn Fn(usize) -> Pin<Box<dyn Future<Output = io::Result<()>>>> + Send + Sync>;

/// How a worker starts: its number, the hooks to run before it accepts
/// ([`Server::on_worker_start`](crate::Server::on_worker_start)), and where to report that it
/// is ready (or why it is not).
pub(crate) struct Start {
    pub(crate) index: usize,
    pub(crate) hooks: Vec<WorkerStartHook>,
    /// Reports `(index, outcome)`: the workers of one start share the channel.
    pub(crate) ready: std::sync::mpsc::Sender<(usize, std::io::Result<()>)>,
    /// Whether the listener is this worker's own `SO_REUSEPORT` socket (not a shared one).
    pub(crate) own_socket: bool,
    /// Who hears about the worker's connections ([`Server::with_events`](crate::Server::with_events)).
    pub(crate) events: Option<Arc<dyn crate::events::EngineEvents>>,
    /// HTTP/3 beside the TCP listener ([`Server::with_http3`](crate::Server::with_http3)),
    /// with the worker's UDP socket.
    #[cfg(feature = "http3")]
    pub(crate) http3: Option<(crate::h3::Http3, crate::h3::WorkerSocket)>,
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
        events,
        #[cfg(feature = "http3")]
        http3,
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
        // The QUIC endpoint, before the worker reports ready so that a failure fails `serve`.
        #[cfg(feature = "http3")]
        let quic = match http3
            .map(|(h3, socket)| h3.endpoint(socket, &config).map(|e| (e, h3)))
            .transpose()
        {
            Ok(q) => q,
            Err(e) => {
                let msg = format!("worker {index}: HTTP/3 endpoint: {e}");
                let _ = ready.send((index, Err(std::io::Error::new(e.kind(), msg))));
                return None;
            }
        };
        let listener = match listener.into_async() {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((index, Err(e)));
                return None;
            }
        };
        let pools = h1::Pools::new(&config);
        let shared = Rc::new(WorkerShared::new(config, events, global, pools));
        // Upgraded connections made on this thread watch this worker's shutdown.
        let watch: Rc<dyn crate::shutdown::ShutdownWatch> = shared.clone();
        crate::shutdown::set_current(Rc::downgrade(&watch));
        // Periodic work ticks from `Ticker`s (a timerfd on Linux), not tokio intervals: timers
        // in tokio's wheel cost work at every park, once per request at c=1. Made before the
        // worker reports ready, so a failure fails `serve` instead of leaving a bound listener
        // that nobody accepts on.
        let ticks = ticker::Ticker::new(h1::HEAD_CACHE_REFRESH)
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
                    dates.proto.refresh_heads();
                }
            });
            let sweeper = shared.clone();
            tokio::task::spawn_local(async move {
                loop {
                    sweep_tick.tick().await;
                    let idle = sweeper.idle.sweep();
                    if let Some(events) = &sweeper.events {
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
            #[cfg(feature = "http3")]
            if let Some((endpoint, h3)) = quic {
                let serving = crate::h3::accept_loop(endpoint, h3, shared.clone(), service.clone());
                tokio::task::spawn_local(serving);
            }
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
            shared.start_shutdown();
            // No shell enters the pool from now on (see `put_conn`): emptying it breaks the
            // cycle between the pooled shells and this state.
            shared.proto.clear_conns();
            let deadline = tokio::time::sleep(shared.config.timeouts.shutdown);
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
            Err(e) if e.is_panic() => Some(panic_text(&*e.into_panic())),
            _ => None,
        }
    });
    // Dropping the runtime drops the tasks still open (connections force-closed after the
    // deadline, handlers' local tasks), on this thread and inside the runtime's context, as
    // dropping the `LocalSet` did.
    drop(rt);
    died
}

/// The message of a panic payload (`&str` or `String`, as `panic!` makes them).
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}
