//! What one HTTP/2 connection may hold, beyond what h2 limits itself: how long the socket may
//! refuse writes, how many response bytes the driver pulls from handlers before they are sent,
//! which streams wait for the client, and how many control frames (frames that carry no data)
//! the client may send.
//!
//! [`Watch`] is the connection's shared account; [`Metered`] wraps the connection's I/O under
//! h2 and feeds it: every write that would block, and the header of every frame read.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The window in which control frames are counted against [`Watch`]'s budget.
const CONTROL_WINDOW: Duration = Duration::from_secs(10);

/// Control frames one response KiB sent earns the client (a client acknowledging every 16 KiB
/// DATA frame with a stream and a connection WINDOW_UPDATE spends 2 of the 16 it earned).
const BYTES_PER_CONTROL_FRAME: u64 = 1024;

/// Control frames each request (HEADERS) earns: its PRIORITY, its RST_STREAM, a few updates.
const CONTROL_FRAMES_PER_REQUEST: u64 = 8;

/// The write-wait rules of the HTTP/1.1 driver (`Timeouts::write`,
/// `write_min_rate`, `write_rate_grace`), for one account of waits.
pub(super) type WriteRules = crate::pace::PaceRules;

/// One episode of waiting for the client: from the first wait until everything queued was
/// taken. Each wait may last `timeout`; all the episode's waits together may not pass
/// `grace + sent / min_rate`, so a client that takes a byte before every timeout cannot hold
/// the response forever.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pace {
    pub(super) waited: Duration,
    pub(super) sent: u64,
}

impl Pace {
    /// When a wait starting `now` must end.
    pub(super) fn deadline(&self, now: Instant, rules: &WriteRules) -> Instant {
        rules.deadline(now, self.waited, self.sent)
    }
}

/// The connection's account, shared by the driver, its streams and [`Metered`].
pub(super) struct Watch {
    pub(super) rules: WriteRules,
    /// Response body bytes pulled from handlers and not yet handed to h2, at most.
    max_pending: usize,
    pending: Cell<usize>,
    /// Streams waiting for room under `max_pending`.
    room_waiters: RefCell<Vec<Waker>>,
    /// Streams waiting for the client (send capacity, or room).
    waiting: Cell<usize>,
    /// Send capacity grants to any stream so far: a stream that timed out sees whether any
    /// stream moved during its wait.
    grants: Cell<u64>,
    /// A stream timed out while no stream of the connection moved: the connection is closed
    /// if every stream left waits for the client too.
    stalled: Cell<bool>,
    /// When the socket started refusing writes, if it does now.
    write_blocked: Cell<Option<Instant>>,
    /// The socket's write episode (opened by a refused write, closed by a complete flush).
    write_pace: Cell<Option<Pace>>,
    /// Control frames: allowed per window, counted, earned, and since when.
    max_control: u64,
    control: Cell<u64>,
    earned: Cell<u64>,
    control_since: Cell<Instant>,
    data_sent: Cell<u64>,
    flood: Cell<bool>,
}

impl Watch {
    pub(super) fn new(rules: WriteRules, max_pending: usize, max_control: u32) -> Self {
        Watch {
            rules,
            max_pending: max_pending.max(1),
            pending: Cell::new(0),
            room_waiters: RefCell::new(Vec::new()),
            waiting: Cell::new(0),
            grants: Cell::new(0),
            stalled: Cell::new(false),
            write_blocked: Cell::new(None),
            write_pace: Cell::new(None),
            max_control: u64::from(max_control),
            control: Cell::new(0),
            earned: Cell::new(0),
            control_since: Cell::new(Instant::now()),
            data_sent: Cell::new(0),
            flood: Cell::new(false),
        }
    }

    /// Streams waiting for the client now.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.get()
    }

    /// Marks one stream as waiting for the client until the guard is dropped.
    pub(super) fn wait_guard(&self) -> WaitGuard<'_> {
        self.waiting.set(self.waiting.get() + 1);
        WaitGuard(self)
    }

    pub(super) fn grants(&self) -> u64 {
        self.grants.get()
    }

    /// A stream was given `n` bytes of send capacity.
    pub(super) fn granted(&self, n: usize) {
        self.grants.set(self.grants.get().wrapping_add(1));
        self.data_sent
            .set(self.data_sent.get().saturating_add(n as u64));
    }

    pub(super) fn set_stalled(&self) {
        self.stalled.set(true);
    }

    /// Whether a stream timed out with no stream moving since the last call.
    pub(super) fn take_stalled(&self) -> bool {
        self.stalled.replace(false)
    }

    /// Waits until fewer than `max_pending` pulled bytes wait to be handed to h2.
    pub(super) async fn room(&self) {
        if self.pending.get() < self.max_pending {
            return;
        }
        let _waiting = self.wait_guard();
        std::future::poll_fn(|cx| {
            if self.pending.get() < self.max_pending {
                return Poll::Ready(());
            }
            self.room_waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// `n` bytes were pulled from a handler; they count until the returned hold lets them go.
    pub(super) fn hold(&self, n: usize) -> Held<'_> {
        self.pending.set(self.pending.get().saturating_add(n));
        Held { watch: self, n }
    }

    fn release(&self, n: usize) {
        self.pending.set(self.pending.get().saturating_sub(n));
        if self.pending.get() < self.max_pending {
            for w in self.room_waiters.borrow_mut().drain(..) {
                w.wake();
            }
        }
    }

    /// When the socket's refusal of writes must end, if it refuses now.
    pub(super) fn write_deadline(&self) -> Option<Instant> {
        let since = self.write_blocked.get()?;
        let pace = self.write_pace.get().unwrap_or_default();
        Some(pace.deadline(since, &self.rules))
    }

    fn write_refused(&self) {
        if self.write_blocked.get().is_none() {
            self.write_blocked.set(Some(Instant::now()));
            if self.write_pace.get().is_none() {
                self.write_pace.set(Some(Pace::default()));
            }
        }
    }

    fn wrote(&self, n: usize) {
        let Some(mut pace) = self.write_pace.get() else {
            return;
        };
        if let Some(since) = self.write_blocked.take() {
            pace.waited = pace.waited.saturating_add(since.elapsed());
        }
        pace.sent = pace.sent.saturating_add(n as u64);
        self.write_pace.set(Some(pace));
    }

    fn flushed(&self) {
        if self.write_blocked.get().is_none() {
            self.write_pace.set(None);
        }
    }

    /// Whether the client sent more control frames than its budget.
    pub(super) fn flood(&self) -> bool {
        self.flood.get()
    }

    /// One control frame read; `true` when it passes the budget.
    fn control_frame(&self) -> bool {
        let count = self.control.get() + 1;
        self.control.set(count);
        let allowed = self
            .max_control
            .saturating_add(self.earned.get())
            .saturating_add(self.data_sent.get() / BYTES_PER_CONTROL_FRAME);
        if count <= allowed {
            return false;
        }
        // The clock is read only here: a window that is over starts a new count.
        let now = Instant::now();
        if now.duration_since(self.control_since.get()) > CONTROL_WINDOW {
            self.control_since.set(now);
            self.control.set(1);
            self.earned.set(0);
            self.data_sent.set(0);
            return false;
        }
        self.flood.set(true);
        true
    }

    fn request_frame(&self) {
        self.earned
            .set(self.earned.get().saturating_add(CONTROL_FRAMES_PER_REQUEST));
    }
}

/// A stream waiting for the client (see [`Watch::wait_guard`]).
pub(super) struct WaitGuard<'a>(&'a Watch);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.set(self.0.waiting.get().saturating_sub(1));
    }
}

/// Bytes pulled from a handler, counted in [`Watch`] until handed to h2 or dropped.
pub(super) struct Held<'a> {
    watch: &'a Watch,
    n: usize,
}

impl Held<'_> {
    /// `n` of the bytes were handed to h2.
    pub(super) fn sent(&mut self, n: usize) {
        let n = n.min(self.n);
        self.n -= n;
        self.watch.release(n);
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.watch.release(self.n);
    }
}

/// Frame types (RFC 9113 §6) the budget looks at.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;

/// The connection's I/O as h2 sees it, reporting to [`Watch`]: writes the socket refuses
/// (and writes it takes), and the header of each frame read, to count control frames. Only
/// frame headers are looked at (payloads are skipped by length), so the cost is per frame,
/// not per byte.
pub(super) struct Metered<T> {
    io: T,
    watch: Rc<Watch>,
    /// Preface bytes still to pass before the first frame.
    preface_left: usize,
    head: [u8; 9],
    head_len: usize,
    payload_left: usize,
    /// The budget was passed: reads stay pending (one wake-up for the driver to see it).
    stopped: bool,
    /// The client's first SETTINGS (part of its preface) was read.
    settings_seen: bool,
}

impl<T> Metered<T> {
    pub(super) fn new(io: T, watch: Rc<Watch>) -> Self {
        Metered {
            io,
            watch,
            preface_left: crate::protocol::preface::PREFACE.len(),
            head: [0; 9],
            head_len: 0,
            payload_left: 0,
            stopped: false,
            settings_seen: false,
        }
    }

    /// Walks the frame headers in `data` (the next bytes read); `true` once the budget is
    /// passed.
    fn scan(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(data.len());
                self.preface_left -= n;
                data = &data[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
            } else {
                let n = (9 - self.head_len).min(data.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&data[..n]);
                self.head_len += n;
                data = &data[n..];
                if self.head_len == 9 {
                    self.head_len = 0;
                    let h = self.head;
                    let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
                    self.payload_left = len;
                    if self.frame(h[3], h[4], len) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// One frame header: whether it passes the budget.
    fn frame(&mut self, kind: u8, flags: u8, len: usize) -> bool {
        match kind {
            HEADERS => {
                self.watch.request_frame();
                false
            }
            // The preface's SETTINGS is due; an ACK answers ours (h2 refuses unexpected ones).
            SETTINGS if !self.settings_seen || flags & ACK != 0 => {
                self.settings_seen = true;
                false
            }
            // An empty DATA frame that does not end the stream carries nothing.
            DATA if len == 0 && flags & END_STREAM == 0 => self.watch.control_frame(),
            // DATA costs the client window; CONTINUATION is bounded by h2; GOAWAY ends it.
            DATA | CONTINUATION | GOAWAY => false,
            // PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, WINDOW_UPDATE, extensions.
            _ => self.watch.control_frame(),
        }
    }

    fn on_write(&self, r: &Poll<io::Result<usize>>) {
        match r {
            Poll::Pending => self.watch.write_refused(),
            Poll::Ready(Ok(n)) => self.watch.wrote(*n),
            Poll::Ready(Err(_)) => {}
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.stopped {
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let this = &mut *self;
            if this.scan(&buf.filled()[before..]) {
                // What was read is still handed to h2; the reads after it are not, and the
                // driver, woken, answers with GOAWAY.
                this.stopped = true;
                cx.waker().wake_by_ref();
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.on_write(&r);
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.on_write(&r);
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        match r {
            Poll::Pending => self.watch.write_refused(),
            Poll::Ready(Ok(())) => self.watch.flushed(),
            Poll::Ready(Err(_)) => {}
        }
        r
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_shutdown(cx);
        if r.is_pending() {
            self.watch.write_refused();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(max_control: u32) -> Watch {
        let rules = WriteRules {
            timeout: Duration::from_secs(10),
            total: Duration::MAX,
            min_rate: 1024,
            grace: Duration::from_secs(10),
        };
        Watch::new(rules, 1024, max_control)
    }

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&[0, 0, 0, 1]);
        f.extend_from_slice(payload);
        f
    }

    /// Frame headers split across reads at every byte are still found, payloads skipped, and
    /// only frames without data are charged.
    #[test]
    fn frames_are_counted_across_any_read_split() {
        let w = Rc::new(watch(3));
        let mut m = Metered::new((), w.clone());
        let mut input = crate::protocol::preface::PREFACE.to_vec();
        input.extend(frame(DATA, 0, &[0x04; 40])); // data: free
        input.extend(frame(HEADERS, 0x4, &[0x82; 5])); // a request: earns 8
        input.extend(frame(DATA, END_STREAM, &[])); // ends a stream: free
        for _ in 0..11 {
            input.extend(frame(0x8, 0, &[0, 0, 0, 1])); // WINDOW_UPDATE(1): 11 of 3 + 8
        }
        for b in input.chunks(1) {
            assert!(!m.scan(b));
        }
        assert!(
            m.scan(&frame(0x6, 0, &[0; 8])),
            "the 12th control frame passes 3 + 8"
        );
        assert!(w.flood());
    }

    /// With no free budget, the preface's SETTINGS and SETTINGS ACKs still pass; a second
    /// SETTINGS does not.
    #[test]
    fn the_preface_settings_and_acks_are_free() {
        let w = Rc::new(watch(0));
        let mut m = Metered::new((), w.clone());
        let mut input = crate::protocol::preface::PREFACE.to_vec();
        input.extend(frame(SETTINGS, 0, &[0, 4, 0, 0, 0, 0]));
        input.extend(frame(SETTINGS, ACK, &[]));
        assert!(!m.scan(&input));
        assert!(m.scan(&frame(SETTINGS, 0, &[])));
    }

    #[test]
    fn response_bytes_earn_control_frames() {
        let w = watch(0);
        w.granted(2048);
        assert!(!w.control_frame());
        assert!(!w.control_frame());
        assert!(w.control_frame());
    }

    #[test]
    fn the_rate_rule_shortens_a_wait_by_what_earlier_waits_used() {
        let rules = WriteRules {
            timeout: Duration::from_secs(10),
            total: Duration::MAX,
            min_rate: 1000,
            grace: Duration::from_secs(2),
        };
        let now = Instant::now();
        let fresh = Pace::default();
        assert_eq!(fresh.deadline(now, &rules), now + Duration::from_secs(2));
        let used = Pace {
            waited: Duration::from_secs(3),
            sent: 2000,
        };
        assert_eq!(used.deadline(now, &rules), now + Duration::from_secs(1));
        let off = WriteRules {
            min_rate: 0,
            ..rules
        };
        assert_eq!(used.deadline(now, &off), now + Duration::from_secs(10));
        let huge = WriteRules {
            timeout: Duration::MAX,
            total: Duration::MAX,
            min_rate: 0,
            grace: Duration::MAX,
        };
        assert!(fresh.deadline(now, &huge) > now);
    }
}
