//! The HTTP/1.1 driver: one task per connection, reading into a per-connection buffer,
//! answering every complete request in it in order, writing the answers once per batch. It never
//! names the HTTP/2 driver: a connection that turns out to speak h2c goes back to protocol
//! selection through the `Http2Handoff` it was given.
//!
//! This file is the driver, top to bottom: [`serve`] (idle wait, then a batch), [`busy`] (answer
//! what is complete, send, wait for more). The rest has one job per file: `batch.rs` the
//! requests of a batch (parse, call the service, encode, in one synchronous loop), `io.rs` the
//! socket and buffers (and the per-worker `Pools`), `body.rs` the request body, `respond.rs` the
//! response, `head.rs` the response heads, `pools.rs` the recycling. Everything runs on one worker
//! thread, so the driver and the request [`Body`](crate::Body) share the connection through an
//! `Rc<Conn>` with a `RefCell`; no borrow is held across an `.await`. Why it is built this way:
//! `docs/performance.md`.

mod batch;
mod body;
mod head;
mod io;
mod pools;
mod respond;

use crate::pace::deadline_after;
pub(crate) use head::HEAD_CACHE_REFRESH;
pub(crate) use io::Conn;
use io::READ_BUF_INITIAL;
pub(crate) use io::{Held, Pools, Shared};
#[cfg(test)]
pub(crate) use pools::shared_for_test;

use crate::idle::IdleWait;
use crate::pooled::PooledFuture;
use crate::transport::Stream;
use crate::{ResponseBody, Service};
use batch::{Batch, Close, Stop};
use io::{BodyState, Fill};
use respond::Answered;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use tokio::time::Instant;

/// What the busy part of the driver asks for.
enum Next {
    /// Everything received was answered and written: wait for the next request.
    Idle,
    Close(Close),
}

/// Serves one connection until it closes; `shared` (and with it the connection's slot) is
/// released at the end.
///
/// While idle, the task holds only the socket, the peer address and a small wait (see
/// [`IdleWait`]): no buffers, no timer, no `Conn`. The work of answering requests runs in a
/// separate future, in a recycled block (see [`crate::pooled`]), that exists only while the
/// connection is busy. Tokio sizes a task's allocation by its largest state (rounded up to
/// 128 bytes), so this keeps an idle keep-alive connection well under 1 KiB.
pub(crate) fn serve<S: Service>(
    service: Rc<S>,
    shared: Held,
    stream: Stream,
    peer: SocketAddr,
    #[cfg(feature = "http2")] to_http2: impl Http2Handoff,
) -> impl Future<Output = ()> {
    // Built outside the `async` block and used in place inside it: moving a captured value into
    // a new local would give it a second slot in the future (rust-lang/rust#62958).
    let mut home = Home::Inline(stream);
    async move {
        let mut served: u32 = 0;
        let (conn, close) = loop {
            // (Shutdown is decided in the wait: input already sent is still answered.)
            // (A block, so that nothing of the wait stays in the task's state while busy.)
            if !IdleWait::new(home.stream(), &shared.idle, &shared.idle_key).await {
                if shared.events.is_some() {
                    report_idle_close(&shared, peer);
                }
                return;
            }
            let conn = home.into_conn(&shared);
            if shared.events.is_some() {
                conn.peer.set(peer);
            }
            match conn.try_fill() {
                Ok(Some(_)) => {
                    // Input arrived: later waits are idle waits, not a new connection's
                    // (see `IdleSet::insert`).
                    if shared.idle_key.get() == crate::idle::NO_KEY {
                        shared.idle_key.set(crate::idle::NO_KEY_SERVED);
                    }
                }
                // Readiness was stale (the read cleared it): idle again.
                Ok(None) => {
                    home = Home::from_conn(conn, &shared);
                    continue;
                }
                Err(_) => return,
            }
            let (service, conn_ref, served) = (&*service, &conn, &mut served);
            let batch = move || {
                let served = served;
                busy(service, conn_ref, served, peer)
            };
            match PooledFuture::new_with(&shared.proto.busy_blocks, batch).await {
                Next::Idle => home = Home::from_conn(conn, &shared),
                Next::Close(c) => break (conn, c),
            }
        };
        match close {
            Close::Now => {
                let _ = Box::pin(conn.flush()).await;
            }
            Close::Linger => Box::pin(conn.linger()).await,
            // Boxed, like the other rare paths: the idle connection's task stays small.
            Close::Upgrade => Box::pin(upgrade(conn, shared)).await,
            #[cfg(feature = "http2")]
            Close::Http2 => Box::pin(http2(conn, shared, service, peer, to_http2)).await,
        }
    }
}

/// Tells the engine's listener why an idle connection closes, when it timed out or was evicted
/// (shutdown and socket errors are no rejection). Cold: once per connection at most.
#[cold]
#[inline(never)]
fn report_idle_close(shared: &Held, peer: SocketAddr) {
    use crate::events::RejectReason;
    use crate::idle::Ended;
    let (Some(events), key) = (&shared.events, shared.idle_key.get()) else {
        return;
    };
    if !crate::idle::is_entry(key) {
        return;
    }
    let (reason, detail) = match shared.idle.ended(key as usize) {
        Some(Ended::Idle) => (RejectReason::IdleClose, "idle_timeout"),
        Some(Ended::Silent) => (
            RejectReason::HeaderTimeout,
            "no request before header_timeout",
        ),
        Some(Ended::Evicted) => (
            RejectReason::LimitReached,
            "idle connection closed at max_connections",
        ),
        None => return,
    };
    crate::events::emit_close(&**events, reason, detail, peer);
}

/// Sends the 101, then runs the handler's function on the raw connection, which keeps its place
/// in the worker's count meanwhile.
async fn upgrade(conn: Rc<Conn>, shared: Held) {
    let Some(on_upgrade) = conn.io.borrow_mut().upgrade.take() else {
        return;
    };
    if conn.flush().await.is_err() {
        return;
    }
    let peer = conn.peer.get();
    if let Some((stream, read)) = hand_over(conn, &shared) {
        // The write timeout and minimum rate go on applying to the upgraded connection.
        let io =
            crate::upgrade::WriteBounded::new(stream, &shared.config, shared.events.as_ref(), peer);
        on_upgrade(crate::upgrade::Upgraded::new(io, read)).await;
    }
    drop(shared);
}

/// The HTTP/2 driver, handed in by protocol selection (`crate::protocol`) so that this driver
/// never names it: where a cleartext connection that opened with the h2c preface goes on.
#[cfg(feature = "http2")]
pub(crate) trait Http2Handoff: Copy {
    /// Serves the rest of the connection as HTTP/2; `read` holds the bytes already read.
    fn serve<S: Service>(
        self,
        service: Rc<S>,
        held: Held,
        stream: Stream,
        read: bytes::Bytes,
        peer: SocketAddr,
    ) -> impl Future<Output = ()>;
}

/// Serves the rest of the connection as HTTP/2, starting with the bytes already read.
#[cfg(feature = "http2")]
async fn http2<S: Service>(
    conn: Rc<Conn>,
    shared: Held,
    service: Rc<S>,
    peer: SocketAddr,
    to_http2: impl Http2Handoff,
) {
    if let Some((stream, read)) = hand_over(conn, &shared) {
        to_http2.serve(service, shared, stream, read, peer).await;
    }
}

/// The socket and unconsumed input of a connection leaving this driver; `None` if a request
/// body (held by a handler) still shares the connection.
fn hand_over(mut conn: Rc<Conn>, shared: &Shared) -> Option<(Stream, bytes::Bytes)> {
    let parts = Rc::get_mut(&mut conn)?.hand_over();
    shared.put_conn(conn);
    Some(parts)
}

/// Answers requests until everything received was answered (→ [`Next::Idle`]) or the connection
/// must close.
async fn busy<S: Service>(
    service: &S,
    conn: &Rc<Conn>,
    served: &mut u32,
    peer: SocketAddr,
) -> Next {
    let cfg = &conn.shared.config;
    // When the head being received must be complete (set on the first wait for it).
    let mut head_deadline: Option<Instant> = None;
    // Whether the bytes received since the last parse may complete (or break) a head.
    let mut parse_due = true;
    // The handler's future of the request being answered, pinned here (in the pooled
    // per-batch future) for when it is not ready at once.
    let mut slot = std::pin::pin!(None::<S::Future>);
    // The last read filled the read buffer: more input is probably waiting in the socket (a
    // large pipelined batch). It is read before the batch's responses are sent (see below).
    let (mut more_waiting, first_read) = conn.read_buf_state();
    // A large batch (a large first read, or one that filled the buffer): when it is answered,
    // the emptied buffer is re-based (see below).
    let mut large_batch = first_read > READ_BUF_INITIAL / 2;
    // Reads made without waiting since the last wait (see below).
    let mut eager_reads = 0;
    loop {
        // 1. Answer every complete request in the buffer, in order: those whose handler is
        // ready at once in one synchronous loop (see `answer_ready`), the others here.
        while parse_due {
            let mut batch = Batch::new(service, conn, served, peer);
            let stop = poll_fn(|cx| batch.answer_ready(cx, slot.as_mut())).await;
            if batch.took {
                head_deadline = None;
            }
            let cur = batch.cur;
            let (answered, panicked) = match stop {
                Stop::NeedMore => {
                    parse_due = false;
                    break;
                }
                Stop::Close(c) => return Next::Close(c),
                Stop::ClientGone => {
                    tracing::debug!(%peer, "client left while its handler was working; dropped");
                    // Its drop may panic, as after a panic in its poll.
                    let _ = catch_unwind(AssertUnwindSafe(|| slot.set(None)));
                    return Next::Close(Close::Now);
                }
                Stop::Answered(answered, panicked) => (answered, panicked),
            };
            if panicked {
                // A future that panicked in its poll is dropped here, and its drop may panic
                // too. (One that answered was dropped in the poll.)
                let _ = catch_unwind(AssertUnwindSafe(|| slot.set(None)));
            }
            match answered {
                Some(Answered::Encoded) => {}
                Some(Answered::Rest(ResponseBody::Upgrade(on_upgrade))) => {
                    conn.io.borrow_mut().upgrade = Some(on_upgrade);
                    return Next::Close(Close::Upgrade);
                }
                Some(Answered::Rest(rest)) => {
                    // Boxed: large and streamed bodies are the exception.
                    if Box::pin(conn.finish_response(rest, cur.version))
                        .await
                        .is_err()
                    {
                        return Next::Close(Close::Now);
                    }
                }
                Some(Answered::Refused) => return Next::Close(Close::Linger),
                None => {
                    tracing::error!(%peer, "handler panicked; answering 500");
                    conn.push_error(500, "internal server error", cur.head_request);
                    return Next::Close(Close::Linger);
                }
            }
            if panicked {
                // The response was complete: it is sent, then the connection closes cleanly.
                tracing::error!(%peer, "panic after the handler's response; closing");
                return Next::Close(Close::Linger);
            }
            if !cur.keep_alive.is_open() {
                return Next::Close(Close::Linger);
            }
            // Skip what the handler left of the body (a streamed response may have read it).
            let body_left = !matches!(conn.io.borrow().body, BodyState::Done);
            if body_left && !Box::pin(conn.drain_body()).await {
                return Next::Close(Close::Linger);
            }
            if conn.pending_output() > cfg.limits.max_pending_output && conn.flush().await.is_err()
            {
                return Next::Close(Close::Now);
            }
            // `parse_due` stays set: what follows the request in the buffer is new input for
            // the parser.
        }

        // 2. Nothing complete is left. If the last read filled the buffer, read the rest of
        // the batch first, into a larger buffer: a 256-deep pipelined write (~12 KiB from wrk)
        // then costs one read and one write instead of a read and a write per 4 KiB (the floor
        // reads 64 KiB at a time). No system call if the socket was drained after all.
        // At most `EAGER_READS` such reads in a row: the others go through `fill`, whose
        // readiness wait takes from tokio's cooperative budget, so a client that keeps the
        // socket full cannot keep the worker from its other connections.
        if more_waiting && eager_reads < EAGER_READS {
            more_waiting = false;
            large_batch = true;
            eager_reads += 1;
            let Ok(before) = conn.grow_read_buf() else {
                return Next::Close(Close::Now);
            };
            match conn.try_fill() {
                Err(_) => return Next::Close(Close::Now),
                Ok(Some(Fill::Data)) => {
                    more_waiting = conn.read_buf_state().0;
                    parse_due |= conn.may_complete_a_head(before);
                    continue;
                }
                Ok(Some(_)) => {
                    // End of input: answer what is complete.
                    parse_due = true;
                    continue;
                }
                Ok(None) => {}
            }
        }
        // Send the batch, then wait for more input.
        if conn.flush().await.is_err() {
            return Next::Close(Close::Now);
        }
        if conn.io.borrow().eof {
            // The client half-closed: everything it sent was answered.
            return Next::Close(Close::Now);
        }
        if conn.io.borrow().rbuf.is_empty() {
            if large_batch {
                // The buffer's start is where the batch ended: moved back to the start of its
                // allocation (no bytes to move), the next batch fits in one read again. (Only
                // after large batches: for small ones this would be a wasted call per batch.)
                let _ = conn.io.borrow_mut().rbuf.try_reclaim(READ_BUF_BATCH / 2);
            }
            return Next::Idle;
        }
        let before = conn.io.borrow().rbuf.len();
        let deadline = *head_deadline
            .get_or_insert_with(|| deadline_after(Instant::now(), cfg.timeouts.header));
        eager_reads = 0;
        match Box::pin(fill_or_shutdown(conn, deadline)).await {
            Err(_) => return Next::Close(Close::Now),
            // Answer what is complete; a partial request is dropped without a word.
            Ok(Some(Fill::Eof)) => parse_due = true,
            Ok(Some(Fill::TimedOut)) => {
                conn.push_error(408, "request header timeout", false);
                return Next::Close(Close::Linger);
            }
            // The server stops waiting for the rest of the head: 408, so the client knows
            // the request was not processed, instead of a close at the shutdown timeout.
            Ok(None) => {
                conn.push_error(408, "request head incomplete at shutdown", false);
                return Next::Close(Close::Linger);
            }
            Ok(Some(Fill::Data)) => {
                more_waiting = conn.read_buf_state().0;
                parse_due |= conn.may_complete_a_head(before);
            }
        }
    }
}

/// [`Conn::fill`] for the rest of a request head, or `None` once the worker's shutdown has
/// started (at once if it had). Boxed by its caller: a partial head is the slow path.
async fn fill_or_shutdown(conn: &Conn, deadline: Instant) -> std::io::Result<Option<Fill>> {
    tokio::select! {
        filled = conn.fill(deadline) => filled.map(Some),
        () = conn.shared.shutdown_started() => Ok(None),
    }
}

/// Reads in a row without a wait for readiness (see `busy`): 64 KiB of input at most, as the
/// floor reads at once.
const EAGER_READS: u8 = 4;

/// The read buffer grows to this capacity when reads fill it (the size a recycled connection
/// shell keeps, `io.rs` `READ_BUF_KEEP`).
const READ_BUF_BATCH: usize = 4 * READ_BUF_INITIAL;

impl Conn {
    /// Whether the read buffer is full (the last read took all the room it had, so the socket
    /// may hold more), and its length.
    fn read_buf_state(&self) -> (bool, usize) {
        let io = self.io.borrow();
        (io.rbuf.len() == io.rbuf.capacity(), io.rbuf.len())
    }

    /// Makes room for the rest of a large batch: at least `READ_BUF_BATCH / 2` free in the read
    /// buffer, whose allocation is then `READ_BUF_BATCH` (unless the input so far is larger),
    /// so that the next batch on this shell fits in one read. Returns the length of the input
    /// so far, or `OutOfMemory` if the allocator refused the room (see `grow.rs`).
    ///
    /// The output buffer, which will hold the batch's responses, is given a power-of-two
    /// capacity: doubling from there, it stays within what a recycled shell keeps (64 KiB)
    /// for the responses of a 256-deep batch, where growing from an odd size overshot it and the
    /// buffer was freed and regrown (about ten reallocations) for every batch.
    fn grow_read_buf(&self) -> std::io::Result<usize> {
        let mut io = self.io.borrow_mut();
        let len = io.rbuf.len();
        let room = READ_BUF_BATCH / 2;
        if io.rbuf.capacity() - len < room && !io.rbuf.try_reclaim(room) {
            // A fresh buffer of exactly the batch size, rather than `reserve`, which grows the
            // allocation past what a recycled shell keeps (16 KiB) and would regrow it for every
            // batch. The old buffer goes back to the worker's pool.
            let mut fresh = crate::grow::try_with_capacity(READ_BUF_BATCH.max(len + room))?;
            fresh.extend_from_slice(&io.rbuf);
            let old = std::mem::replace(&mut io.rbuf, fresh);
            self.shared.put_read_buf(old);
        }
        let cap = io.out.capacity();
        if !cap.is_power_of_two() || cap < READ_BUF_INITIAL {
            let want = cap.next_power_of_two().max(READ_BUF_INITIAL);
            let used = io.out.len();
            io.out.reserve_exact(want - used);
        }
        Ok(len)
    }

    /// Whether the bytes read since `before` can change the parser's verdict: a line end, or a
    /// head as long as the limits allow. A byte-per-packet client then costs no full re-parse
    /// per byte.
    fn may_complete_a_head(&self, before: usize) -> bool {
        let limits = &self.shared.config.limits.parser;
        let io = self.io.borrow();
        io.rbuf[before..].contains(&b'\n')
            || io.rbuf.len() > limits.max_target_len + limits.max_header_bytes
    }
}

/// Where an idle connection's socket lives: inline in the task while idle, inside an
/// `Rc<Conn>` while answering (the request body reaches it from the handler). If a handler kept
/// a body alive past its response, the `Rc` cannot be unwrapped and the connection stays shared.
enum Home {
    Inline(Stream),
    Shared(Rc<Conn>),
}

impl Home {
    fn stream(&self) -> &Stream {
        match self {
            Home::Inline(s) => s,
            Home::Shared(c) => c.stream(),
        }
    }

    fn into_conn(self, shared: &Rc<Shared>) -> Rc<Conn> {
        match self {
            Home::Inline(stream) => shared.take_conn(stream),
            Home::Shared(conn) => conn,
        }
    }

    fn from_conn(mut conn: Rc<Conn>, shared: &Shared) -> Home {
        match Rc::get_mut(&mut conn) {
            Some(c) => {
                let stream = c.retire();
                shared.put_conn(conn);
                Home::Inline(stream)
            }
            None => {
                // A handler kept the request body alive past its response: the connection stays
                // shared, without holding buffers while idle.
                conn.release_buffers();
                Home::Shared(conn)
            }
        }
    }
}

#[cfg(test)]
mod size_tests {
    /// A busy connection's per-batch future is built in a recycled block per batch (per request
    /// without pipelining): the memory a busy connection holds besides its buffers.
    #[test]
    fn busy_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let shared = super::pools::shared_for_test();
            let svc = crate::service_fn(|_r: crate::Request| async { crate::Response::text("x") });
            let c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let conn = std::rc::Rc::new(super::Conn::new(crate::transport::Stream::Tcp(c), shared));
            let mut served = 0;
            let busy = super::busy(&svc, &conn, &mut served, "127.0.0.1:1".parse().unwrap());
            let busy_size = std::mem::size_of_val(&busy);
            assert!(busy_size <= 512, "per-batch future is {busy_size} bytes");
        });
    }
}
