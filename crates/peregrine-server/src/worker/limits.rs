//! Connection limits shared by all workers: `max_connections` (a slot per connection, with idle
//! eviction at the limit) and `max_connections_per_addr`.

use crate::idle::IdleSet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// State shared by all workers: the connection count behind `max_connections`, and the
/// per-address counts behind `max_connections_per_addr`.
pub(crate) struct Global {
    open: AtomicUsize,
    max: usize,
    /// Woken when a connection closes while the server was full.
    capacity: Notify,
    /// A worker at the limit found no idle connection of its own to close: the next worker to
    /// tick with one closes its oldest.
    pub(super) evict_wanted: AtomicBool,
    /// Open connections per client address, when capped. Touched once per accept
    /// and once per close, never per request.
    per_addr: Option<(usize, Mutex<HashMap<IpAddr, usize>>)>,
}

impl Global {
    pub(crate) fn new(max: usize, max_per_addr: Option<usize>) -> Self {
        Global {
            open: AtomicUsize::new(0),
            max: max.max(1),
            capacity: Notify::new(),
            evict_wanted: AtomicBool::new(false),
            per_addr: max_per_addr.map(|m| (m.max(1), Mutex::new(HashMap::new()))),
        }
    }

    /// Counts a new connection from `ip` against the per-address cap: `Err` past the cap,
    /// `Ok(None)` when there is no cap.
    pub(super) fn hold_addr(self: &Arc<Self>, ip: IpAddr) -> Result<Option<AddrHold>, ()> {
        let Some((max, counts)) = &self.per_addr else {
            return Ok(None);
        };
        let ip = ip.to_canonical();
        let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(ip).or_insert(0);
        if *n >= *max {
            return Err(());
        }
        *n += 1;
        Ok(Some(AddrHold {
            global: self.clone(),
            ip,
        }))
    }

    /// Whether every slot is taken (a new connection would wait).
    pub(super) fn is_full(&self) -> bool {
        self.open.load(Ordering::Acquire) >= self.max
    }

    pub(super) fn try_acquire(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn release(&self) {
        let before = self.open.fetch_sub(1, Ordering::AcqRel);
        if before >= self.max {
            self.capacity.notify_waiters();
        }
    }
}

/// A connection's place in its address's count, given back on drop.
pub(crate) struct AddrHold {
    global: Arc<Global>,
    ip: IpAddr,
}

impl Drop for AddrHold {
    fn drop(&mut self) {
        if let Some((_, counts)) = &self.global.per_addr {
            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = counts.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(&self.ip);
                }
            }
        }
    }
}

/// A reserved connection slot, given back on drop unless a connection takes it over.
pub(super) struct Slot<'a>(&'a Global);

impl<'a> Slot<'a> {
    /// A slot for a connection just accepted. At the limit, an idle keep-alive connection is
    /// closed to make room: the one of this worker that waited longest, else one of
    /// another worker (at its next idle tick); if none is idle, this waits for a close, as the
    /// backlog did before.
    pub(super) async fn acquire(global: &'a Global, idle: &IdleSet) -> Slot<'a> {
        if global.try_acquire() {
            return Slot(global);
        }
        loop {
            if !idle.evict_oldest() {
                global.evict_wanted.store(true, Ordering::Relaxed);
            }
            let notified = global.capacity.notified();
            tokio::pin!(notified);
            // Register before checking again so a release in between is not missed.
            notified.as_mut().enable();
            if global.try_acquire() {
                global.evict_wanted.store(false, Ordering::Relaxed);
                return Slot(global);
            }
            // A connection that goes idle meanwhile is a candidate at the next try.
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(idle.tick_len()) => {}
            }
            if global.try_acquire() {
                global.evict_wanted.store(false, Ordering::Relaxed);
                return Slot(global);
            }
        }
    }

    /// Hands the slot to a connection ([`ConnShared`] releases it).
    pub(super) fn keep(self) {
        // Holds only a reference: forgetting it leaks nothing.
        std::mem::forget(self);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}
