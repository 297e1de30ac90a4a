//! Idle keep-alive connections: a per-worker registry with a coarse sweeper instead of a timer
//! per connection.
//!
//! An idle connection waits in [`IdleWait`], a future of a few words that registers its waker
//! here and its interest in readability with the reactor (`poll_read_ready`, no waiter node of
//! its own). A per-worker sweeper ticks a few times per idle timeout and wakes the entries that
//! expired; shutdown wakes them all. A `tokio::time::Sleep` (112 bytes), a `Readable` and a
//! `Notified` future per connection would cost more than the whole budget of an idle
//! connection (under 1 KiB).

use crate::transport::{Stream, Transport};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// One connection's place in the registry, kept from its first idle wait until it closes, so
/// that going idle and busy again (once per request without pipelining) costs no insertion, no
/// removal and no clone or drop of the waker (two atomic operations). 24 bytes: the registry is
/// a per-connection cost too.
enum Entry {
    Vacant,
    /// Idle since tick `registered`; `fresh`: a new connection that has sent nothing yet.
    Waiting {
        waker: Waker,
        registered: u32,
        fresh: bool,
    },
    /// Answering requests: never expires (the driver's own timeouts apply).
    Busy(Waker),
    /// Timed out while idle (or evicted), and woken to close.
    Expired(Ended),
}

/// Why an idle connection was woken to close (for engine events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Idle for the idle timeout.
    Idle,
    /// A new connection that sent nothing within the header timeout.
    Silent,
    /// Closed to make room at `max_connections`.
    Evicted,
}

/// The idle connections of one worker.
pub(crate) struct IdleSet {
    entries: RefCell<Vec<Entry>>,
    free: RefCell<Vec<usize>>,
    /// Sweeper ticks so far (wrapping: only differences matter).
    tick: Cell<u32>,
    /// An entry expires after this many whole ticks.
    ticks_to_expire: u32,
    /// A new connection's first wait is registered this many ticks in the past, so it expires
    /// after the header timeout instead of the idle timeout (a connection that sends
    /// nothing is not an idle keep-alive connection).
    first_wait_backdate: u32,
    tick_len: Duration,
    /// Set once when the worker's shutdown starts: idle connections close from then on.
    shutting_down: Cell<bool>,
}

impl IdleSet {
    /// Idle connections expire after `idle_timeout`; a new connection's first wait after
    /// `first_wait_timeout` (the header timeout) if that is shorter.
    pub(crate) fn new(idle_timeout: Duration, first_wait_timeout: Duration) -> Self {
        let first = first_wait_timeout.min(idle_timeout);
        // Eight ticks per (shorter) timeout bound the error to an eighth of it, at most a second.
        let tick_len = (first / 8).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let ticks = |t: Duration| {
            let n = t.as_nanos().div_ceil(tick_len.as_nanos()).max(1);
            u32::try_from(n).unwrap_or(u32::MAX - 1).min(u32::MAX - 1)
        };
        let ticks_to_expire = ticks(idle_timeout);
        IdleSet {
            entries: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            tick: Cell::new(0),
            ticks_to_expire,
            first_wait_backdate: ticks_to_expire - ticks(first).min(ticks_to_expire),
            tick_len,
            shutting_down: Cell::new(false),
        }
    }

    pub(crate) fn tick_len(&self) -> Duration {
        self.tick_len
    }

    /// Registers a connection's first wait; `fresh`: it has sent nothing yet (see
    /// `first_wait_backdate`).
    fn insert(&self, waker: Waker, fresh: bool) -> usize {
        let backdate = if fresh { self.first_wait_backdate } else { 0 };
        let entry = Entry::Waiting {
            waker,
            registered: self.tick.get().wrapping_sub(backdate),
            fresh,
        };
        let mut entries = self.entries.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(k) => {
                entries[k] = entry;
                k
            }
            None => {
                entries.push(entry);
                entries.len() - 1
            }
        }
    }

    /// Whether entry `k` is a new connection waiting for its first bytes.
    fn is_fresh(&self, k: usize) -> bool {
        matches!(self.entries.borrow()[k], Entry::Waiting { fresh: true, .. })
    }

    /// Entry `k` waits (again) with `waker`: a busy entry starts a new idle period now, a
    /// waiting one keeps its age. `false` if it expired meanwhile.
    fn wait(&self, k: usize, waker: &Waker) -> bool {
        let registered = self.tick.get();
        let e = &mut self.entries.borrow_mut()[k];
        if let Entry::Busy(_) = e {
            let Entry::Busy(w) = std::mem::replace(e, Entry::Vacant) else {
                unreachable!("matched above")
            };
            *e = Entry::Waiting {
                waker: w,
                registered,
                fresh: false,
            };
        }
        match e {
            Entry::Waiting { waker: w, .. } => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                true
            }
            _ => false,
        }
    }

    /// Entry `k` was woken while it waited as a served connection: it goes busy at once (see
    /// [`IdleWait`]). `false` (and no change) for a new connection's first wait and for an
    /// expired or evicted entry, whose state must stay to say why it ends.
    fn resume(&self, k: usize) -> bool {
        let e = &mut self.entries.borrow_mut()[k];
        if !matches!(e, Entry::Waiting { fresh: false, .. }) {
            return false;
        }
        let Entry::Waiting { waker, .. } = std::mem::replace(e, Entry::Vacant) else {
            unreachable!("matched above")
        };
        *e = Entry::Busy(waker);
        true
    }

    /// Entry `k`'s connection has input to answer: it stops ageing until it waits again. (An
    /// entry that expired just as input arrived is answered too: its wake-up was only a hint.)
    fn set_busy(&self, k: usize, waker: &Waker) {
        let e = &mut self.entries.borrow_mut()[k];
        match std::mem::replace(e, Entry::Vacant) {
            Entry::Waiting { waker: w, .. } | Entry::Busy(w) => *e = Entry::Busy(w),
            Entry::Expired(_) | Entry::Vacant => *e = Entry::Busy(waker.clone()),
        }
    }

    /// Frees entry `k` (its connection closed).
    pub(crate) fn remove(&self, k: usize) {
        self.entries.borrow_mut()[k] = Entry::Vacant;
        self.free.borrow_mut().push(k);
    }

    /// Advances the clock one tick and wakes the entries that have waited long enough.
    /// Returns how many connections are left waiting (the worker's idle count).
    pub(crate) fn sweep(&self) -> usize {
        let now = self.tick.get().wrapping_add(1);
        self.tick.set(now);
        let mut waiting = 0;
        for e in self.entries.borrow_mut().iter_mut() {
            if let Entry::Waiting {
                registered, fresh, ..
            } = e
            {
                // `> ticks`: registration may have happened just before a tick.
                if now.wrapping_sub(*registered) > self.ticks_to_expire {
                    let why = if *fresh { Ended::Silent } else { Ended::Idle };
                    if let Entry::Waiting { waker, .. } = std::mem::replace(e, Entry::Expired(why))
                    {
                        waker.wake();
                    }
                } else {
                    waiting += 1;
                }
            }
        }
        waiting
    }

    /// Why entry `k` was woken to close, if it expired or was evicted (and not, say, by
    /// shutdown or a socket error).
    pub(crate) fn ended(&self, k: usize) -> Option<Ended> {
        match self.entries.borrow().get(k) {
            Some(Entry::Expired(why)) => Some(*why),
            _ => None,
        }
    }

    /// Closes the connection that has waited longest (at `max_connections`, an idle
    /// connection makes room for a new one). `false` if none is waiting. A scan of the
    /// registry: this runs only when the server is full.
    pub(crate) fn evict_oldest(&self) -> bool {
        let now = self.tick.get();
        let mut entries = self.entries.borrow_mut();
        let oldest = entries
            .iter()
            .enumerate()
            .filter_map(|(k, e)| match e {
                Entry::Waiting { registered, .. } => Some((now.wrapping_sub(*registered), k)),
                _ => None,
            })
            .max();
        let Some((_, k)) = oldest else {
            return false;
        };
        let evicted = Entry::Expired(Ended::Evicted);
        if let Entry::Waiting { waker, .. } = std::mem::replace(&mut entries[k], evicted) {
            drop(entries);
            waker.wake();
        }
        true
    }

    /// Wakes every idle connection (shutdown: they see the flag and close).
    /// Whether the worker's shutdown has started (see [`IdleSet::start_shutdown`]).
    #[inline(always)]
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    /// Marks the worker as shutting down and wakes every waiting connection, so the idle ones
    /// close and the fresh ones keep their first wait (see [`IdleWait`]).
    pub(crate) fn start_shutdown(&self) {
        self.shutting_down.set(true);
        self.wake_all();
    }

    fn wake_all(&self) {
        for e in self.entries.borrow().iter() {
            if let Entry::Waiting { waker, .. } = e {
                waker.wake_by_ref();
            }
        }
    }
}

/// No registry entry yet, and no input yet (see [`IdleWait`]).
pub(crate) const NO_KEY: u32 = u32::MAX;
/// No registry entry yet, but input was received: the first wait is an idle wait, not a new
/// connection's.
pub(crate) const NO_KEY_SERVED: u32 = u32::MAX - 1;

/// Whether `key` names a registry entry (to remove when the connection closes).
pub(crate) fn is_entry(key: u32) -> bool {
    key < NO_KEY_SERVED
}

/// Waits until an idle connection has input (`true`), or must close silently (`false`): idle
/// timeout, shutdown, or a socket error.
///
/// Three words, so that an idle connection's task stores little else while it waits (see
/// `h1::serve`). The connection's registry entry is made at its first wait and kept in `key`
/// until the connection closes (whose owner then calls [`IdleSet::remove`]).
pub(crate) struct IdleWait<'a> {
    stream: &'a Stream,
    idle: &'a IdleSet,
    key: &'a Cell<u32>,
}

impl<'a> IdleWait<'a> {
    pub(crate) fn new(stream: &'a Stream, idle: &'a IdleSet, key: &'a Cell<u32>) -> Self {
        IdleWait { stream, idle, key }
    }
}

impl Future for IdleWait<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        let idle = this.idle;
        // Polled while waiting as a served connection: the reactor saw input (or shutdown woke
        // every waiting connection). The driver's read finds out which: tokio checks its
        // readiness before the `read(2)` (no system call on a stale wake) and the driver waits
        // here again when nothing came, where the checks below decide. This skips a readiness
        // poll per request (about 90 user-space instructions at c=1).
        let key = this.key.get();
        if is_entry(key) && idle.resume(key as usize) {
            return Poll::Ready(true);
        }
        // Input first, even during shutdown: a request already sent is answered (with
        // `Connection: close`) rather than dropped, which a restart that hands the listener to
        // a new process relies on.
        match this.stream.poll_read_ready(cx) {
            Poll::Ready(Ok(())) => {
                let key = this.key.get();
                if is_entry(key) {
                    idle.set_busy(key as usize, cx.waker());
                }
                return Poll::Ready(true);
            }
            Poll::Ready(Err(_)) => return Poll::Ready(false),
            Poll::Pending => {}
        }
        // Shutdown closes idle connections; a new one that has sent nothing yet keeps its
        // (header-timeout) wait: its client connected before the listener closed.
        if idle.is_shutting_down() {
            let key = this.key.get();
            let fresh = key == NO_KEY || (is_entry(key) && idle.is_fresh(key as usize));
            if !fresh {
                return Poll::Ready(false);
            }
        }
        let key = this.key.get();
        if !is_entry(key) {
            let k = idle.insert(cx.waker().clone(), key == NO_KEY);
            match u32::try_from(k) {
                Ok(k) if is_entry(k) => this.key.set(k),
                // More than four billion idle connections on one worker cannot happen (each
                // needs a file descriptor); should it, this one is not kept waiting untracked.
                _ => {
                    idle.remove(k);
                    return Poll::Ready(false);
                }
            }
        } else if !idle.wait(key as usize, cx.waker()) {
            return Poll::Ready(false);
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(set: &IdleSet, k: usize) -> &'static str {
        match set.entries.borrow()[k] {
            Entry::Vacant => "vacant",
            Entry::Waiting { .. } => "waiting",
            Entry::Busy(_) => "busy",
            Entry::Expired(_) => "expired",
        }
    }

    /// 80 ms timeout, 10 ms ticks: an entry expires on the 9th tick after it started waiting.
    fn set() -> IdleSet {
        let set = IdleSet::new(Duration::from_millis(80), Duration::from_millis(80));
        assert_eq!(
            (set.tick_len(), set.ticks_to_expire),
            (Duration::from_millis(10), 8)
        );
        set
    }

    #[test]
    fn sweeps_count_the_waiting_and_remember_why_an_entry_ended() {
        let set = IdleSet::new(Duration::from_millis(80), Duration::from_millis(40));
        let served = set.insert(Waker::noop().clone(), false);
        let silent = set.insert(Waker::noop().clone(), true);
        let evicted = set.insert(Waker::noop().clone(), false);
        let busy = set.insert(Waker::noop().clone(), false);
        set.set_busy(busy, Waker::noop());
        assert_eq!(set.sweep(), 3, "busy entries are not idle");
        assert!(set.evict_oldest());
        // (The oldest is the fresh one, backdated to expire after the shorter timeout.)
        assert_eq!(set.ended(silent), Some(Ended::Evicted));
        let remaining = [served, evicted];
        let mut left = 2;
        for _ in 0..20 {
            left = set.sweep();
        }
        assert_eq!(left, 0);
        for k in remaining {
            assert_eq!(set.ended(k), Some(Ended::Idle));
        }
        assert_eq!(set.ended(busy), None);
        let fresh = IdleSet::new(Duration::from_millis(80), Duration::from_millis(40));
        let k = fresh.insert(Waker::noop().clone(), true);
        for _ in 0..5 {
            fresh.sweep();
        }
        assert_eq!(fresh.ended(k), Some(Ended::Silent));
    }

    #[test]
    fn a_waiting_entry_expires_after_the_timeout() {
        let set = set();
        let k = set.insert(Waker::noop().clone(), false);
        for _ in 0..8 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "waiting");
        assert!(
            set.wait(k, Waker::noop()),
            "a repoll in the same idle period"
        );
        set.sweep();
        assert_eq!(state(&set, k), "expired");
        assert!(!set.wait(k, Waker::noop()));
    }

    #[test]
    fn a_busy_entry_never_expires_and_its_next_wait_starts_a_new_period() {
        let set = set();
        let k = set.insert(Waker::noop().clone(), false);
        set.sweep();
        set.set_busy(k, Waker::noop());
        for _ in 0..100 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "busy");
        // Idle again: the age counts from now, not from the first wait.
        assert!(set.wait(k, Waker::noop()));
        for _ in 0..8 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "waiting");
        set.sweep();
        assert_eq!(state(&set, k), "expired");
    }

    #[test]
    fn input_arriving_as_an_entry_expires_is_answered_and_the_entry_kept() {
        let set = set();
        let k = set.insert(Waker::noop().clone(), false);
        for _ in 0..9 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "expired");
        set.set_busy(k, Waker::noop());
        assert_eq!(state(&set, k), "busy");
        assert!(set.wait(k, Waker::noop()));
        assert_eq!(state(&set, k), "waiting");
    }

    #[test]
    fn a_woken_served_entry_resumes_but_new_and_expired_ones_keep_their_state() {
        let set = set();
        let served = set.insert(Waker::noop().clone(), false);
        let fresh = set.insert(Waker::noop().clone(), true);
        assert!(set.resume(served));
        assert_eq!(state(&set, served), "busy");
        // Busy already (a second poll without a wait in between): the readiness path decides.
        assert!(!set.resume(served));
        // A new connection's wait keeps its shorter timeout: no shortcut.
        assert!(!set.resume(fresh));
        assert_eq!(state(&set, fresh), "waiting");
        for _ in 0..9 {
            set.sweep();
        }
        // An expired entry keeps why it ended.
        assert_eq!(state(&set, fresh), "expired");
        assert!(!set.resume(fresh));
        assert_eq!(set.ended(fresh), Some(Ended::Silent));
    }

    #[test]
    fn a_first_wait_expires_after_the_shorter_first_wait_timeout() {
        // Idle 160 ms, first wait 80 ms: 10 ms ticks, idle after 16, a first wait after 8.
        let set = IdleSet::new(Duration::from_millis(160), Duration::from_millis(80));
        assert_eq!(set.tick_len(), Duration::from_millis(10));
        // A connection that had input first waits the whole idle timeout.
        let served = set.insert(Waker::noop().clone(), false);
        let k = set.insert(Waker::noop().clone(), true);
        for _ in 0..8 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "waiting");
        set.sweep();
        assert_eq!(
            (state(&set, k), state(&set, served)),
            ("expired", "waiting")
        );
        // After a request, the connection's idle waits get the whole idle timeout.
        set.set_busy(k, Waker::noop());
        assert!(set.wait(k, Waker::noop()));
        for _ in 0..16 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "waiting");
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let set = IdleSet::new(Duration::MAX, Duration::MAX);
        let k = set.insert(Waker::noop().clone(), false);
        set.sweep();
        assert_eq!(state(&set, k), "waiting");
        let set = IdleSet::new(Duration::MAX, Duration::from_millis(80));
        let k = set.insert(Waker::noop().clone(), true);
        for _ in 0..9 {
            set.sweep();
        }
        assert_eq!(state(&set, k), "expired");
    }

    #[test]
    fn eviction_takes_the_longest_waiting_entry() {
        let set = set();
        assert!(!set.evict_oldest(), "nothing to evict");
        let a = set.insert(Waker::noop().clone(), false);
        set.sweep();
        let b = set.insert(Waker::noop().clone(), false);
        set.sweep();
        let c = set.insert(Waker::noop().clone(), false);
        // a waited longest, but went busy and waits again from now: b is the oldest.
        set.set_busy(a, Waker::noop());
        assert!(set.wait(a, Waker::noop()));
        assert!(set.evict_oldest());
        assert_eq!(
            (state(&set, a), state(&set, b), state(&set, c)),
            ("waiting", "expired", "waiting")
        );
        set.sweep();
        set.set_busy(c, Waker::noop());
        assert!(set.evict_oldest());
        assert_eq!(state(&set, a), "expired");
        assert!(!set.evict_oldest(), "a busy entry is never evicted");
    }

    #[test]
    fn removed_entries_are_reused() {
        let set = set();
        let a = set.insert(Waker::noop().clone(), false);
        let b = set.insert(Waker::noop().clone(), false);
        set.remove(a);
        assert_eq!(state(&set, a), "vacant");
        assert_eq!(set.insert(Waker::noop().clone(), false), a);
        assert_eq!(state(&set, b), "waiting");
    }
}
