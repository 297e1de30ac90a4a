//! What a worker's connections share, whatever their protocol: the configuration, the idle
//! registry, the shutdown signal, the live count and the server-wide connection count. A
//! driver's own per-worker state (the HTTP/1.1 driver's pools and head cache) is the `P` inside,
//! so this module names no driver and every driver can name it.

use super::limits::{Global, Slot};
use crate::events::EngineEvents;
use crate::idle::{IdleSet, NO_KEY};
use crate::ServerConfig;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::Notify;

/// Per-worker state every connection of the worker can reach (not generic over the service);
/// `proto` is the state the HTTP/1.1 driver keeps per worker.
pub(crate) struct WorkerShared<P> {
    pub(crate) config: ServerConfig,
    /// Who hears about connections and refusals ([`Server::with_events`](crate::Server::with_events)).
    pub(crate) events: Option<Arc<dyn EngineEvents>>,
    /// Notified when shutdown starts (connections that are not in the idle set: HTTP/2).
    shutdown_started: Notify,
    /// Idle connections, woken when they time out or shutdown starts.
    pub(crate) idle: IdleSet,
    pub(super) live: Cell<usize>,
    pub(super) all_closed: Notify,
    /// The server-wide connection count.
    pub(super) global: Arc<Global>,
    /// Bytes read from and written to the worker's HTTP/1 transports (for `WorkerStats`): a
    /// plain add per read or write call, never a branch or an atomic.
    pub(crate) bytes_in: Cell<u64>,
    pub(crate) bytes_out: Cell<u64>,
    /// The driver's own per-worker state.
    pub(crate) proto: P,
}

impl<P> WorkerShared<P> {
    pub(crate) fn new(
        config: ServerConfig,
        events: Option<Arc<dyn EngineEvents>>,
        global: Arc<Global>,
        proto: P,
    ) -> Self {
        WorkerShared {
            shutdown_started: Notify::new(),
            idle: IdleSet::new(config.timeouts.idle, config.timeouts.header),
            live: Cell::new(0),
            all_closed: Notify::new(),
            global,
            config,
            events,
            bytes_in: Cell::new(0),
            bytes_out: Cell::new(0),
            proto,
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

    #[inline(always)]
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.idle.is_shutting_down()
    }

    /// Starts the shutdown: idle connections close, HTTP/2 connections hear of it.
    pub(super) fn start_shutdown(&self) {
        self.idle.start_shutdown();
        self.shutdown_started.notify_waiters();
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

impl<P> crate::shutdown::ShutdownWatch for WorkerShared<P> {
    fn is_shutting_down(&self) -> bool {
        WorkerShared::is_shutting_down(self)
    }

    fn shutdown_started(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(WorkerShared::shutdown_started(self))
    }
}

/// A connection's hold on its worker: the worker's shared state, and the connection's place in
/// the server-wide count (`max_connections`), in the worker's live count and in its idle
/// registry, all given back on drop. Two words, because it is part of every idle connection's
/// state (see `h1::serve`).
pub(crate) struct ConnShared<P> {
    shared: Rc<WorkerShared<P>>,
    /// The connection's entry in [`WorkerShared::idle`], from its first idle wait on.
    pub(crate) idle_key: Cell<u32>,
}

impl<P> ConnShared<P> {
    pub(super) fn new(shared: &Rc<WorkerShared<P>>, slot: Slot<'_>) -> Self {
        slot.keep();
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }

    /// A hold taken without `accept` (tests of the connection driver).
    #[cfg(test)]
    pub(crate) fn for_test(shared: &Rc<WorkerShared<P>>) -> Self {
        assert!(shared.global.try_acquire(), "the test's server is full");
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }
}

impl<P> std::ops::Deref for ConnShared<P> {
    type Target = Rc<WorkerShared<P>>;
    fn deref(&self) -> &Rc<WorkerShared<P>> {
        &self.shared
    }
}

impl<P> Drop for ConnShared<P> {
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
