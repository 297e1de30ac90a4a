//! Idle keep-alive connections: a per-worker registry with a coarse sweeper instead of a timer
//! per connection.
//!
//! An idle connection waits in [`IdleWait`], a future of a few words that registers its waker
//! here and its interest in readability with the reactor (`poll_read_ready`, no waiter node of
//! its own). A per-worker sweeper ticks a few times per idle timeout and wakes the entries that
//! expired; shutdown wakes them all. A `tokio::time::Sleep` (112 bytes), a `Readable` and a
//! `Notified` future per connection would cost more than the whole budget of an idle
//! connection (under 1 KiB).

use crate::conn::read_into;
use crate::worker::WorkerShared;
use bytes::BytesMut;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::net::TcpStream;

/// 24 bytes: the registry is a per-connection cost too.
enum Entry {
    Vacant,
    Waiting { waker: Waker, registered: u32 },
    Expired,
}

/// The idle connections of one worker.
pub(crate) struct IdleSet {
    entries: RefCell<Vec<Entry>>,
    free: RefCell<Vec<usize>>,
    /// Sweeper ticks so far (wrapping: only differences matter).
    tick: Cell<u32>,
    /// An entry expires after this many whole ticks.
    ticks_to_expire: u32,
    tick_len: Duration,
}

impl IdleSet {
    pub(crate) fn new(idle_timeout: Duration) -> Self {
        // Eight ticks per timeout bound the error to an eighth of it, at most a second.
        let tick_len = (idle_timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let ticks = idle_timeout.as_nanos().div_ceil(tick_len.as_nanos()).max(1);
        IdleSet {
            entries: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            tick: Cell::new(0),
            ticks_to_expire: u32::try_from(ticks).unwrap_or(u32::MAX - 1),
            tick_len,
        }
    }

    pub(crate) fn tick_len(&self) -> Duration {
        self.tick_len
    }

    fn insert(&self, waker: Waker) -> usize {
        let entry = Entry::Waiting {
            waker,
            registered: self.tick.get(),
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

    /// Refreshes the waker of entry `k`; `false` if it expired.
    fn update(&self, k: usize, waker: &Waker) -> bool {
        match &mut self.entries.borrow_mut()[k] {
            Entry::Waiting { waker: w, .. } => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                true
            }
            _ => false,
        }
    }

    fn remove(&self, k: usize) {
        self.entries.borrow_mut()[k] = Entry::Vacant;
        self.free.borrow_mut().push(k);
    }

    /// Advances the clock one tick and wakes the entries that have waited long enough.
    pub(crate) fn sweep(&self) {
        let now = self.tick.get().wrapping_add(1);
        self.tick.set(now);
        for e in self.entries.borrow_mut().iter_mut() {
            if let Entry::Waiting { registered, .. } = e {
                // `> ticks`: registration may have happened just before a tick.
                if now.wrapping_sub(*registered) > self.ticks_to_expire {
                    if let Entry::Waiting { waker, .. } = std::mem::replace(e, Entry::Expired) {
                        waker.wake();
                    }
                }
            }
        }
    }

    /// Wakes every idle connection (shutdown: they see the flag and close).
    pub(crate) fn wake_all(&self) {
        for e in self.entries.borrow().iter() {
            if let Entry::Waiting { waker, .. } = e {
                waker.wake_by_ref();
            }
        }
    }
}

/// Waits until an idle connection has input, and reads it into a buffer from the worker's pool:
/// `Some((buffer, eof))`. `None` means close silently: idle timeout, shutdown, or a socket error.
///
/// Waiting and reading are one future (three words) so that an idle connection's task stores
/// nothing else while it waits (see `conn::serve`).
pub(crate) struct IdleWait<'a> {
    stream: &'a TcpStream,
    shared: &'a WorkerShared,
    /// Entry in the worker's [`IdleSet`], `NO_KEY` until the first wait.
    key: u32,
}

const NO_KEY: u32 = u32::MAX;

impl<'a> IdleWait<'a> {
    pub(crate) fn new(stream: &'a TcpStream, shared: &'a WorkerShared) -> Self {
        IdleWait {
            stream,
            shared,
            key: NO_KEY,
        }
    }
}

impl Future for IdleWait<'_> {
    type Output = Option<(BytesMut, bool)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let shared = this.shared;
        loop {
            if shared.is_shutting_down() {
                return Poll::Ready(None);
            }
            match this.stream.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {
                    let mut rbuf = shared.take_read_buf();
                    match read_into(this.stream, &mut rbuf) {
                        Ok(Some(n)) => return Poll::Ready(Some((rbuf, n == 0))),
                        // Readiness was stale (the read cleared it): wait again, keeping the
                        // registration and its age.
                        Ok(None) => shared.put_read_buf(rbuf),
                        Err(_) => return Poll::Ready(None),
                    }
                }
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        if this.key == NO_KEY {
            let k = shared.idle.insert(cx.waker().clone());
            // More than four billion idle connections on one worker cannot happen (each needs
            // a file descriptor); saturate rather than wrap.
            this.key = u32::try_from(k).unwrap_or(NO_KEY - 1);
        } else if !shared.idle.update(this.key as usize, cx.waker()) {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

impl Drop for IdleWait<'_> {
    fn drop(&mut self) {
        if self.key != NO_KEY {
            self.shared.idle.remove(self.key as usize);
        }
    }
}
