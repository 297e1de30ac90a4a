//! The connection driver: one task per connection, reading into a per-connection buffer,
//! answering every complete request in it in order, writing the answers once per batch.
//!
//! Everything here runs on one worker thread, so the connection state is shared between the
//! driver and the request [`Body`](crate::Body) through an `Rc<Conn>` with a `RefCell`; no
//! borrow is ever held across an `.await`.

use crate::body::BodyError;
use crate::idle::IdleWait;
use crate::pooled::PooledFuture;
use crate::response::{Response, ResponseBody};
use crate::worker::{
    ConnLine, ConnShared, FieldsKey, Framing, HeadCache, HeadMemo, WorkerShared, HEAD_MEMO_FIELDS,
    HEAD_MEMO_MAX,
};
use crate::{Body, Request, Service};
use bytes::{Buf, Bytes, BytesMut};
use peregrine_codec::response::{status_forbids_body, write_content_length};
use peregrine_codec::{
    BodyFraming, ChunkedDecoder, ChunkedStep, Expectation, Method, Parsed, Version,
};
use std::borrow::Cow;
use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Size of a fresh read buffer. Requests of load generators and browsers fit in it; it grows
/// on demand (up to the codec's head limits, or by what a body read asks for).
pub(crate) const READ_BUF_INITIAL: usize = 4096;
/// Buffers larger than these (grown for a body or a big batch) are freed rather than kept in a
/// recycled connection shell.
const READ_BUF_KEEP: usize = 4 * READ_BUF_INITIAL;
const OUT_BUF_KEEP: usize = 64 * 1024;
/// Largest read buffer reserved for a request body read.
const BODY_READ_MAX: usize = 64 * 1024;
/// Read at least this much spare capacity before each `read(2)`.
pub(crate) const READ_SPARE: usize = 1024;
/// Bodies of at most this size are copied into the output buffer (one write per batch); larger
/// ones are written straight from their `Bytes` after the head, never copied.
const COPY_BODY_MAX: usize = 16 * 1024;
/// An unread request body of at most this many bytes is read and discarded after the response so
/// the connection can be kept; a larger rest closes the connection instead.
const DRAIN_MAX: u64 = 256 * 1024;
/// After the last response on a connection that may still have unread input, keep reading and
/// discarding for at most this long (or this many bytes) before closing, so the client is not
/// sent a reset that would destroy the response it has not read yet (nginx `lingering_close`).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;

/// How the framing of the current request's body is progressing.
enum BodyState {
    /// No body, or fully read.
    Done,
    /// This many bytes of a Content-Length body are still to come.
    Length(u64),
    /// A chunked body, this many data bytes delivered so far.
    Chunked(ChunkedDecoder, u64),
    /// Reading failed (the connection will close after the response).
    Failed(BodyError),
}

/// Mutable per-connection state.
pub(crate) struct Io {
    /// Bytes received and not consumed yet. Released to the worker pool while idle.
    rbuf: BytesMut,
    /// Response bytes not written yet (`out[out_pos..]`). Released to the pool while idle.
    out: Vec<u8>,
    out_pos: usize,
    /// The client closed its sending side.
    eof: bool,
    body: BodyState,
    /// Identifies the request whose body is current (see `Body`).
    gen: u64,
    /// The client sent `Expect: 100-continue` and the interim response was not sent yet.
    continue_pending: bool,
    /// Slow-client accounts (issue 17), kept only where a read or write would block, so the
    /// fast path never reads the clock. Only time spent waiting for the client counts (a slow
    /// handler or stream is not the client's fault): the time the current body was waited
    /// for, and the body bytes read by those waits (see `ServerConfig::body_min_rate`) ...
    body_waited: Duration,
    body_read: u64,
    /// ... and the time spent waiting for writability since the output was last fully written
    /// (`None`: no write has blocked since), with the bytes written meanwhile (see
    /// `ServerConfig::write_min_rate`).
    write_waited: Option<Duration>,
    write_sent: u64,
}

/// One connection, shared by the driver and the body of the request being answered.
///
/// Exists while the connection is busy; an idle connection keeps only its socket. The shells
/// are recycled by the worker (see [`WorkerShared::take_conn`]), so going busy costs no
/// allocation.
pub(crate) struct Conn {
    /// `None` only while the shell waits in the worker's pool.
    stream: Option<TcpStream>,
    shared: Rc<WorkerShared>,
    io: RefCell<Io>,
}

/// What happens to a connection after the driver stops.
enum Close {
    /// Flush what is pending (best effort) and close.
    Now,
    /// Flush, half-close, discard input for a while, close (see `LINGER_TIME`).
    Linger,
}

/// Outcome of waiting for input.
enum Fill {
    Data,
    Eof,
    TimedOut,
}

enum Step {
    Data(Bytes),
    End,
    NeedMore,
    Err(BodyError),
}

impl Conn {
    /// A connection with no buffers yet ([`Conn::try_fill`] takes them from the worker's pools).
    pub(crate) fn new(stream: TcpStream, shared: Rc<WorkerShared>) -> Self {
        Conn {
            stream: Some(stream),
            shared,
            io: RefCell::new(Io {
                rbuf: BytesMut::new(),
                out: Vec::new(),
                out_pos: 0,
                eof: false,
                body: BodyState::Done,
                gen: 0,
                continue_pending: false,
                body_waited: Duration::ZERO,
                body_read: 0,
                write_waited: None,
                write_sent: 0,
            }),
        }
    }

    /// Makes a recycled shell (see [`Conn::retire`]) a connection for `stream`, keeping the
    /// shell's (empty) buffers.
    pub(crate) fn reuse(&mut self, stream: TcpStream) {
        self.stream = Some(stream);
        let io = self.io.get_mut();
        io.out_pos = 0;
        io.eof = false;
        io.body = BodyState::Done;
        io.continue_pending = false;
        io.write_waited = None;
        // `gen` goes on counting: a body of an earlier request can never match a later one.
    }

    /// Takes the socket out of a connection that went idle, leaving a shell to recycle. The
    /// shell keeps its buffers (empty: the connection answered everything it received) unless
    /// they grew large, so the next connection to go busy takes them with it, without a trip
    /// through the buffer pools.
    pub(crate) fn retire(&mut self) -> TcpStream {
        let io = self.io.get_mut();
        debug_assert!(io.rbuf.is_empty() && io.out_pos >= io.out.len());
        // Unconditionally (issue 17): bytes of one client must never be parsed as another's.
        io.rbuf.clear();
        if io.rbuf.capacity() > READ_BUF_KEEP {
            io.rbuf = BytesMut::new();
        }
        io.out.clear();
        io.out_pos = 0;
        if io.out.capacity() > OUT_BUF_KEEP {
            io.out = Vec::new();
        }
        self.stream
            .take()
            .expect("a connection in use has its socket")
    }

    #[inline]
    fn stream(&self) -> &TcpStream {
        match &self.stream {
            Some(s) => s,
            // Only pooled shells have no socket, and nothing runs on them.
            None => unreachable!("a connection in use has its socket"),
        }
    }

    /// Waits (until `deadline`) for the socket to be readable and reads what is there into the
    /// read buffer.
    async fn fill(&self, deadline: Instant) -> io::Result<Fill> {
        loop {
            // Boxed: waiting is the slow path, and a timer inline would double the size of
            // every future that can read (the per-batch future is copied into its block once
            // per request when clients do not pipeline).
            match Box::pin(timeout_at(deadline, self.stream().readable())).await {
                Err(_) => return Ok(Fill::TimedOut),
                Ok(r) => r?,
            }
            if let Some(f) = self.try_fill()? {
                return Ok(f);
            }
        }
    }

    /// One non-blocking read into the read buffer, taking buffers from the pool first if the
    /// connection had released its own. `None` if nothing was there.
    fn try_fill(&self) -> io::Result<Option<Fill>> {
        let mut io = self.io.borrow_mut();
        if io.rbuf.capacity() == 0 {
            io.rbuf = self.shared.take_read_buf();
        }
        if io.out.capacity() == 0 {
            io.out = self.shared.take_out_buf();
        }
        if io.rbuf.capacity() - io.rbuf.len() < READ_SPARE {
            io.rbuf.reserve(READ_BUF_INITIAL);
        }
        match read_into(self.stream(), &mut io.rbuf)? {
            None => Ok(None),
            Some(0) => {
                io.eof = true;
                Ok(Some(Fill::Eof))
            }
            Some(_) => Ok(Some(Fill::Data)),
        }
    }

    /// Writes all pending output; fails if the client makes no progress within the write
    /// timeout.
    async fn flush(&self) -> io::Result<()> {
        loop {
            {
                let mut io = self.io.borrow_mut();
                let io = &mut *io;
                while io.out_pos < io.out.len() {
                    match self.stream().try_write(&io.out[io.out_pos..]) {
                        Ok(n) => {
                            io.out_pos += n;
                            io.write_sent = io.write_sent.wrapping_add(n as u64);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                if io.out_pos >= io.out.len() {
                    io.out.clear();
                    io.out_pos = 0;
                    // Everything is written: a slow-write episode (if any) ends here.
                    io.write_waited = None;
                    return Ok(());
                }
            }
            Box::pin(self.wait_writable()).await?;
        }
    }

    /// Waits until the socket is writable again (boxed by callers: it holds a timer), at most
    /// until [`Conn::write_wait_deadline`].
    async fn wait_writable(&self) -> io::Result<()> {
        let (since, deadline) = self.write_wait_deadline();
        let waited = timeout_at(deadline, self.stream().writable()).await;
        if let Some(w) = &mut self.io.borrow_mut().write_waited {
            *w = w.saturating_add(since.elapsed());
        }
        match waited {
            Ok(r) => r,
            Err(_) => {
                // The connection closes on this error: with a reset, so the unsent output is
                // dropped at once instead of staying in the kernel for a client that does not
                // read (nginx `reset_timedout_connection`).
                let _ = socket2::SockRef::from(self.stream()).set_linger(Some(Duration::ZERO));
                Err(io::Error::new(io::ErrorKind::TimedOut, "write timeout"))
            }
        }
    }

    /// Slow path (a write would block): when this wait starts, and when it must end.
    /// `write_timeout` bounds one wait; over the waits of this episode (which ends when the
    /// output is fully written), the client must read `write_min_rate` bytes/s beyond
    /// `write_rate_grace`, so a client that reads a little before every timeout cannot hold the
    /// connection forever (issue 17).
    fn write_wait_deadline(&self) -> (Instant, Instant) {
        let cfg = &self.shared.config;
        let now = Instant::now();
        let mut io = self.io.borrow_mut();
        let waited = match io.write_waited {
            Some(w) => w,
            None => {
                io.write_waited = Some(Duration::ZERO);
                io.write_sent = 0;
                Duration::ZERO
            }
        };
        let mut budget = cfg.write_timeout;
        if cfg.write_min_rate > 0 {
            let allowance = cfg
                .write_rate_grace
                .saturating_add(time_at_rate(io.write_sent, cfg.write_min_rate));
            budget = budget.min(allowance.saturating_sub(waited));
        }
        (now, deadline_after(now, budget))
    }

    /// Slow path (a body read would block): when this wait starts, and when it must end.
    /// `body_timeout` bounds one wait; over all the waits for this body, `body_total_timeout`
    /// bounds their sum and `body_min_rate` the rate after `body_rate_grace` (mod_reqtimeout's
    /// `body=grace,MinRate=rate`: every `rate` bytes received buy one more second). Covers the
    /// drain of an unread body too (issue 17).
    fn body_wait_deadline(&self) -> (Instant, Instant) {
        let cfg = &self.shared.config;
        let now = Instant::now();
        let io = self.io.borrow();
        let mut budget = cfg
            .body_timeout
            .min(cfg.body_total_timeout.saturating_sub(io.body_waited));
        if cfg.body_min_rate > 0 {
            let allowance = cfg
                .body_rate_grace
                .saturating_add(time_at_rate(io.body_read, cfg.body_min_rate));
            budget = budget.min(allowance.saturating_sub(io.body_waited));
        }
        (now, deadline_after(now, budget))
    }

    /// Flushes pending output, then writes `data` straight from the caller's buffer.
    async fn write_direct(&self, data: &[u8]) -> io::Result<()> {
        self.flush().await?;
        let mut pos = 0;
        while pos < data.len() {
            match self.stream().try_write(&data[pos..]) {
                Ok(n) => {
                    pos += n;
                    let mut io = self.io.borrow_mut();
                    io.write_sent = io.write_sent.wrapping_add(n as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Box::pin(self.wait_writable()).await?
                }
                Err(e) => return Err(e),
            }
        }
        // Everything pending is written (see `flush`).
        self.io.borrow_mut().write_waited = None;
        Ok(())
    }

    /// Makes non-blocking progress on pending output while a handler is waiting on something
    /// else, so earlier pipelined responses are not held back by a slow handler.
    fn poll_write_progress(&self, cx: &mut Context<'_>) {
        let mut io = self.io.borrow_mut();
        let io = &mut *io;
        while io.out_pos < io.out.len() {
            match self.stream().poll_write_ready(cx) {
                Poll::Ready(Ok(())) => match self.stream().try_write(&io.out[io.out_pos..]) {
                    Ok(n) => {
                        io.out_pos += n;
                        io.write_sent = io.write_sent.wrapping_add(n as u64);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    // The driver's next flush reports the error.
                    Err(_) => return,
                },
                _ => return,
            }
        }
    }

    fn pending_output(&self) -> usize {
        let io = self.io.borrow();
        io.out.len() - io.out_pos
    }

    /// Marks the current body failed (for example when the handler's limit was passed), so the
    /// driver closes the connection after the response.
    pub(crate) fn fail_body(&self, gen: u64, err: BodyError) {
        let mut io = self.io.borrow_mut();
        if io.gen == gen && !matches!(io.body, BodyState::Done) {
            io.body = BodyState::Failed(err);
        }
    }

    /// Decodes the next piece of the current body from what is buffered.
    fn body_step(&self, io: &mut Io) -> Step {
        let max_body = self.shared.config.max_body_size;
        match &mut io.body {
            BodyState::Done => Step::End,
            BodyState::Failed(e) => Step::Err(e.clone()),
            BodyState::Length(rem) => {
                if io.rbuf.is_empty() {
                    return Step::NeedMore;
                }
                let n = (*rem).min(io.rbuf.len() as u64);
                *rem -= n;
                let data = io.rbuf.split_to(n as usize).freeze();
                if *rem == 0 {
                    io.body = BodyState::Done;
                }
                Step::Data(data)
            }
            BodyState::Chunked(dec, delivered) => loop {
                match dec.decode(&io.rbuf, &self.shared.config.limits) {
                    Ok(ChunkedStep::NeedMore { consumed }) => {
                        io.rbuf.advance(consumed);
                        // A chunk that declares more than the limit allows is refused now, not
                        // after its data trickled in (issue 17).
                        if chunked_over_limit(dec, *delivered, max_body) {
                            io.body = BodyState::Failed(BodyError::TooLarge);
                            return Step::Err(BodyError::TooLarge);
                        }
                        return Step::NeedMore;
                    }
                    Ok(ChunkedStep::Data {
                        consumed,
                        data_start,
                        data_len,
                    }) => {
                        io.rbuf.advance(data_start);
                        let data = io.rbuf.split_to(data_len).freeze();
                        io.rbuf.advance(consumed - data_start - data_len);
                        *delivered += data_len as u64;
                        if chunked_over_limit(dec, *delivered, max_body) {
                            io.body = BodyState::Failed(BodyError::TooLarge);
                            return Step::Err(BodyError::TooLarge);
                        }
                        if data_len > 0 {
                            return Step::Data(data);
                        }
                    }
                    Ok(ChunkedStep::Done { consumed }) => {
                        io.rbuf.advance(consumed);
                        io.body = BodyState::Done;
                        return Step::End;
                    }
                    Err(e) => {
                        let err = BodyError::Invalid(e.reason);
                        io.body = BodyState::Failed(err.clone());
                        return Step::Err(err);
                    }
                }
            },
        }
    }

    /// Next piece of the body of request `gen` (see [`Body::chunk`]).
    pub(crate) async fn body_chunk(&self, gen: u64) -> Result<Option<Bytes>, BodyError> {
        loop {
            {
                let mut io = self.io.borrow_mut();
                if io.gen != gen {
                    return Err(BodyError::Incomplete);
                }
                match self.body_step(&mut io) {
                    Step::Data(b) => return Ok(Some(b)),
                    Step::End => return Ok(None),
                    Step::Err(e) => return Err(e),
                    Step::NeedMore => {}
                }
                if io.eof {
                    io.body = BodyState::Failed(BodyError::Incomplete);
                    return Err(BodyError::Incomplete);
                }
                if io.continue_pending {
                    io.continue_pending = false;
                    io.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                // Read bodies in larger pieces than heads: up to what is still expected, at
                // most 64 KiB per read (the handler holds what it was given, not this buffer).
                let want = match io.body {
                    BodyState::Length(rem) => rem.min(BODY_READ_MAX as u64) as usize,
                    _ => BODY_READ_MAX / 4,
                };
                if io.rbuf.capacity() - io.rbuf.len() < want {
                    io.rbuf.reserve(want);
                }
            }
            let before = self.io.borrow().rbuf.len();
            // Before waiting for the client, send it what it may be waiting for: earlier
            // pipelined responses and the `100 Continue`.
            if self.flush().await.is_err() {
                self.fail_body(gen, BodyError::Incomplete);
                return Err(BodyError::Incomplete);
            }
            let (since, deadline) = self.body_wait_deadline();
            let filled = self.fill(deadline).await;
            {
                let mut io = self.io.borrow_mut();
                io.body_waited = io.body_waited.saturating_add(since.elapsed());
            }
            match filled {
                Ok(Fill::Data) => {
                    let mut io = self.io.borrow_mut();
                    let got = io.rbuf.len().saturating_sub(before) as u64;
                    io.body_read = io.body_read.saturating_add(got);
                }
                Ok(Fill::Eof) => {}
                Ok(Fill::TimedOut) => {
                    self.fail_body(gen, BodyError::Timeout);
                    return Err(BodyError::Timeout);
                }
                Err(_) => {
                    self.fail_body(gen, BodyError::Incomplete);
                    return Err(BodyError::Incomplete);
                }
            }
        }
    }

    /// Reads and discards what is left of the current body, up to `DRAIN_MAX` bytes. `true` if
    /// the body ended and the next request can be read.
    async fn drain_body(&self) -> bool {
        let gen = self.io.borrow().gen;
        let mut drained = 0u64;
        let ext_before = self.chunk_extension_bytes();
        loop {
            match self.body_chunk(gen).await {
                Ok(None) => return true,
                Ok(Some(b)) => {
                    drained += b.len() as u64;
                    // Chunk extensions are input to skip too (issue 17).
                    let ext = self.chunk_extension_bytes().saturating_sub(ext_before);
                    if drained.saturating_add(ext) > DRAIN_MAX {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Chunk-extension bytes of the current body so far (0 unless it is chunked).
    fn chunk_extension_bytes(&self) -> u64 {
        match &self.io.borrow().body {
            BodyState::Chunked(dec, _) => dec.extension_bytes(),
            _ => 0,
        }
    }

    /// Appends an error response (small text body with the reason, `Connection: close`).
    fn push_error(&self, status: u16, reason: &str, head_only: bool) {
        let mut io = self.io.borrow_mut();
        let out = &mut io.out;
        self.shared
            .head_cache
            .borrow()
            .write_prefix(out, status, true);
        out.extend_from_slice(b"Content-Type: text/plain; charset=utf-8\r\n");
        write_content_length(out, reason.len() as u64 + 1);
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        if !head_only {
            out.extend_from_slice(reason.as_bytes());
            out.push(b'\n');
        }
    }

    /// Everything done with a handler's response before the driver goes on: the interim
    /// `100 Continue` a streamed response may need, the check that the request body arrived
    /// intact, and the encoding ([`Conn::start_response`]). Synchronous, and given the response
    /// where the handler returned it (see the poll in [`busy`]).
    fn answer(
        &self,
        resp: &mut Response,
        keep_alive: &mut bool,
        version: Version,
        head_request: bool,
    ) -> Answered {
        // A streamed response may read the request body while it is sent: the client that
        // waits for `100 Continue` must get it before the final response head.
        if matches!(resp.body, ResponseBody::Stream(_)) && !head_request {
            let mut io = self.io.borrow_mut();
            if io.continue_pending && !matches!(io.body, BodyState::Done) {
                io.continue_pending = false;
                io.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
        }
        // Decide now whether the rest of the body can be skipped to keep the connection.
        let (body_failed, must_close) = {
            let io = self.io.borrow();
            match &io.body {
                BodyState::Done => (None, false),
                BodyState::Failed(e) => (Some(e.clone()), true),
                // The client waits for `100 Continue` before sending: it may never send the
                // body, so reading it to skip it could hang.
                _ if io.continue_pending => (None, true),
                BodyState::Length(rem) => (None, *rem > DRAIN_MAX),
                BodyState::Chunked(..) => (None, false),
            }
        };
        if must_close {
            *keep_alive = false;
        }
        if let Some(err) = body_failed {
            if resp.status < 400 {
                // The handler answered success on a body that did not arrive intact.
                self.push_error(err.status(), &err.to_string(), head_request);
                return Answered::Refused;
            }
        }
        match self.start_response(resp, keep_alive, version, head_request) {
            Some(rest) => Answered::Rest(rest),
            None => Answered::Encoded,
        }
    }

    /// Encodes `resp` into the output buffer: the head, and the body when it is small. Returns
    /// the body still to be written (large or streamed) by [`Conn::finish_response`]. Kept
    /// synchronous so the common case adds no state to the per-batch future.
    fn start_response(
        &self,
        resp: &mut Response,
        keep_alive: &mut bool,
        version: Version,
        head_request: bool,
    ) -> Option<ResponseBody> {
        let status = resp.status;
        let headers = &resp.headers;
        let body = &resp.body;
        let status = if (200..=999).contains(&status) {
            status
        } else {
            0
        };
        let forbids = status_forbids_body(status);
        // HTTP/1.0 has no chunked encoding: a streamed body is delimited by closing.
        if matches!(body, ResponseBody::Stream(_)) && version == Version::Http10 && !forbids {
            *keep_alive = false;
        }
        let framing = match body {
            _ if forbids => Framing::None,
            ResponseBody::Empty => Framing::Length(0),
            ResponseBody::Full(b) => Framing::Length(b.len() as u64),
            ResponseBody::Stream(_) if version == Version::Http11 => Framing::Chunked,
            ResponseBody::Stream(_) => Framing::None,
        };
        {
            let mut io = self.io.borrow_mut();
            let out = &mut io.out;
            let mut cache = self.shared.head_cache.borrow_mut();
            let hit = cache
                .memo
                .iter()
                .position(|m| m.status == status && same_fields(&m.key, headers));
            if let Some(i) = hit {
                let m = &cache.memo[i];
                if m.close {
                    *keep_alive = false;
                }
                let conn = conn_line(*keep_alive, version);
                if m.conn == conn && m.framing == framing {
                    out.extend_from_slice(&m.bytes);
                } else {
                    // Same start, other ending (another body length, say): keep the start,
                    // remember the new ending.
                    out.extend_from_slice(&m.bytes[..m.fields_len]);
                    let mark = out.len();
                    finish_head(out, conn, framing);
                    let m = &mut cache.memo[i];
                    m.conn = conn;
                    m.framing = framing;
                    m.bytes.truncate(m.fields_len);
                    m.bytes.extend_from_slice(&out[mark..]);
                }
            } else {
                let asks_close = fields_ask_close(headers);
                if asks_close {
                    *keep_alive = false;
                }
                let mark = out.len();
                let valid = status != 0 && encode_head(out, status, headers, &cache);
                if !valid {
                    out.truncate(mark);
                    drop(cache);
                    drop(io);
                    tracing::error!(status, "handler returned an invalid status or header field");
                    *keep_alive = false;
                    self.push_error(500, "invalid response from handler", head_request);
                    return None;
                }
                let fields_len = out.len() - mark;
                let conn = conn_line(*keep_alive, version);
                finish_head(out, conn, framing);
                if let Some(key) = fields_key(headers) {
                    if cache.memo.len() >= HEAD_MEMO_MAX {
                        // Oldest out: the memo is refilled from scratch every refresh anyway.
                        cache.memo.remove(0);
                    }
                    let bytes = out[mark..].to_vec();
                    cache.memo.push(HeadMemo {
                        status,
                        key,
                        conn,
                        framing,
                        close: asks_close,
                        fields_len,
                        bytes,
                    });
                }
            }
            drop(cache);
            crate::response::recycle_fields(std::mem::take(&mut resp.headers));
            let out = &mut io.out;
            if head_request || forbids {
                return None;
            }
            match &resp.body {
                ResponseBody::Empty => return None,
                ResponseBody::Full(b) if b.len() <= COPY_BODY_MAX => {
                    out.extend_from_slice(b);
                    return None;
                }
                _ => {}
            }
        }
        Some(std::mem::replace(&mut resp.body, ResponseBody::Empty))
    }

    /// Writes what [`Conn::start_response`] left: a large body from its own buffer, or a stream.
    async fn finish_response(&self, body: ResponseBody, version: Version) -> io::Result<()> {
        match body {
            ResponseBody::Empty => Ok(()),
            ResponseBody::Full(b) => self.write_direct(&b).await,
            ResponseBody::Stream(mut s) => {
                let written = Box::pin(self.write_stream(&mut s, version == Version::Http11)).await;
                // A panic dropping the stream is caught (issue 17): whatever was written stays,
                // and the connection closes.
                if catch_unwind(AssertUnwindSafe(move || drop(s))).is_err() {
                    tracing::error!("response body stream panicked when dropped");
                    return Err(io::Error::other("body stream panicked on drop"));
                }
                written
            }
        }
    }

    /// Streams a body, chunked (or raw for HTTP/1.0), flushing whenever the stream has nothing
    /// ready or the pending output passes the bound, so memory stays bounded whatever its size.
    async fn write_stream(
        &self,
        s: &mut crate::response::BodyStream,
        chunked: bool,
    ) -> io::Result<()> {
        let limit = self.shared.config.max_pending_output.max(COPY_BODY_MAX);
        loop {
            // Take what the stream has ready; when it has nothing, first send what is pending
            // (the client should not wait for bytes we hold), then wait for the stream.
            let step =
                poll_fn(
                    |cx| match catch_unwind(AssertUnwindSafe(|| s.as_mut().poll_next(cx))) {
                        Ok(Poll::Ready(item)) => Poll::Ready(Ok(Some(item))),
                        Ok(Poll::Pending) if self.pending_output() > 0 => Poll::Ready(Ok(None)),
                        Ok(Poll::Pending) => Poll::Pending,
                        Err(_) => Poll::Ready(Err(())),
                    },
                )
                .await;
            let item = match step {
                Ok(Some(item)) => item,
                Ok(None) => {
                    self.flush().await?;
                    continue;
                }
                Err(()) => {
                    tracing::error!("response body stream panicked");
                    return Err(io::Error::other("body stream panicked"));
                }
            };
            match item {
                None => {
                    if chunked {
                        self.io.borrow_mut().out.extend_from_slice(b"0\r\n\r\n");
                    }
                    return Ok(());
                }
                Some(Err(e)) => {
                    // The response cannot be completed: the client must see it truncated.
                    tracing::warn!(error = %e, "response body stream failed");
                    return Err(e);
                }
                Some(Ok(data)) if data.is_empty() => {}
                Some(Ok(data)) => {
                    let small = data.len() <= COPY_BODY_MAX;
                    {
                        let mut io = self.io.borrow_mut();
                        if chunked {
                            write_chunk_size(&mut io.out, data.len());
                        }
                        if small {
                            io.out.extend_from_slice(&data);
                            if chunked {
                                io.out.extend_from_slice(b"\r\n");
                            }
                        }
                    }
                    if !small {
                        self.write_direct(&data).await?;
                        if chunked {
                            self.io.borrow_mut().out.extend_from_slice(b"\r\n");
                        }
                    }
                    if self.pending_output() > limit {
                        self.flush().await?;
                    }
                }
            }
        }
    }

    /// Closes after the last response: flush, half-close, then read and discard until the
    /// client closes too (bounded), so it reads our answer instead of a reset.
    async fn linger(&self) {
        if self.flush().await.is_err() {
            return;
        }
        let _ = socket2::SockRef::from(self.stream()).shutdown(std::net::Shutdown::Write);
        let deadline = Instant::now() + LINGER_TIME;
        let mut discarded = 0usize;
        loop {
            {
                let mut io = self.io.borrow_mut();
                discarded += io.rbuf.len();
                io.rbuf.clear();
                if io.eof || discarded > LINGER_BYTES {
                    return;
                }
            }
            match self.fill(deadline).await {
                Ok(Fill::Data) => {}
                _ => return,
            }
        }
    }

    /// Gives the buffers back to the worker pool while the connection is idle, so an idle
    /// keep-alive connection holds no buffer memory.
    fn release_buffers(&self) {
        let mut io = self.io.borrow_mut();
        if io.rbuf.is_empty() && io.rbuf.capacity() > 0 {
            let b = std::mem::take(&mut io.rbuf);
            self.shared.put_read_buf(b);
        }
        if io.out_pos >= io.out.len() && io.out.capacity() > 0 {
            let b = std::mem::take(&mut io.out);
            io.out_pos = 0;
            self.shared.put_out_buf(b);
        }
    }
}

/// Longest time a deadline is put ahead: a configured `Duration` of any size (even
/// `Duration::MAX`) means "practically never", never an `Instant` overflow (issue 17).
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// `from + d`, saturated at [`FAR_FUTURE`] ahead.
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Instant {
    from + d.min(FAR_FUTURE)
}

/// Time `bytes` take at `rate` bytes per second (saturating; `rate` > 0).
fn time_at_rate(bytes: u64, rate: u32) -> Duration {
    let rate = u64::from(rate);
    // (bytes % rate) < 2^32, so the product stays below 2^62.
    Duration::from_secs(bytes / rate)
        .saturating_add(Duration::from_nanos((bytes % rate) * 1_000_000_000 / rate))
}

/// Whether a chunked body already breaks `max_body`: the data delivered, plus what the current
/// chunk still declares, plus every chunk-extension byte so far (issue 17: an oversized chunk
/// is answered 413 at once, and extensions cannot carry unbounded input).
#[inline]
fn chunked_over_limit(dec: &ChunkedDecoder, delivered: u64, max_body: u64) -> bool {
    delivered
        .saturating_add(dec.chunk_data_remaining())
        .saturating_add(dec.extension_bytes())
        > max_body
}

/// One non-blocking read into `buf` (which has spare capacity): `Some(n)` bytes read (0 at
/// EOF), `None` if there was nothing to read.
fn read_into(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<Option<usize>> {
    let spare = buf.capacity() - buf.len();
    match stream.try_read_buf(buf) {
        Ok(n) => {
            if n > 0 && n < spare {
                // A short read drained the socket: forget the readiness now (as tokio's own
                // `poll_read` does) instead of paying a `read(2)` that returns EAGAIN.
                // Edge-triggered epoll reports any later data as a new event.
                let _ = stream.try_io(Interest::READABLE, || {
                    Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                });
            }
            Ok(Some(n))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_chunk_size(out: &mut Vec<u8>, n: usize) {
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
    out.extend_from_slice(b"\r\n");
}

/// `tchar` (RFC 9110 §5.6.2) as a lookup table: one load per byte of a field name.
static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// Whether the handler's own fields ask for `Connection: close`.
fn fields_ask_close(headers: &[(Cow<'static, str>, Cow<'static, [u8]>)]) -> bool {
    headers.iter().any(|(n, v)| {
        n.len() == 10
            && n.eq_ignore_ascii_case("connection")
            && v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
    })
}

/// The `Connection` line a response gets.
#[inline]
fn conn_line(keep_alive: bool, version: Version) -> ConnLine {
    if !keep_alive {
        ConnLine::Close
    } else if version == Version::Http10 {
        ConnLine::KeepAlive
    } else {
        ConnLine::Default
    }
}

/// Appends the `Connection` and framing lines and the empty line that ends the head.
fn finish_head(out: &mut Vec<u8>, conn: ConnLine, framing: Framing) {
    match conn {
        ConnLine::Default => {}
        ConnLine::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnLine::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
    }
    match framing {
        Framing::None => {}
        Framing::Length(n) => write_content_length(out, n),
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// The memo key of `headers` if every name and value is borrowed `'static` data (see
/// [`FieldsKey`]) and there are few enough of them.
fn fields_key(headers: &[(Cow<'static, str>, Cow<'static, [u8]>)]) -> Option<FieldsKey> {
    if headers.len() > HEAD_MEMO_FIELDS {
        return None;
    }
    headers
        .iter()
        .map(|(n, v)| match (n, v) {
            (Cow::Borrowed(n), Cow::Borrowed(v)) => {
                Some((n.as_ptr() as usize, n.len(), v.as_ptr() as usize, v.len()))
            }
            _ => None,
        })
        .collect()
}

/// Whether `headers` has exactly the identity `key` (see [`FieldsKey`]).
#[inline]
fn same_fields(
    key: &[(usize, usize, usize, usize)],
    headers: &[(Cow<'static, str>, Cow<'static, [u8]>)],
) -> bool {
    key.len() == headers.len()
        && key.iter().zip(headers).all(|(k, (n, v))| match (n, v) {
            (Cow::Borrowed(n), Cow::Borrowed(v)) => {
                *k == (n.as_ptr() as usize, n.len(), v.as_ptr() as usize, v.len())
            }
            _ => false,
        })
}

/// Whether `value` contains CR, LF or NUL (which would split or truncate the response), eight
/// bytes at a time: the classic "has a zero byte" test on the word XORed with each of them.
fn has_line_break_or_nul(value: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    #[inline]
    fn has_zero_byte(w: u64) -> bool {
        w.wrapping_sub(ONES) & !w & HIGHS != 0
    }
    let mut words = value.chunks_exact(8);
    for chunk in &mut words {
        let w = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
        if has_zero_byte(w) || has_zero_byte(w ^ (ONES * 0x0d)) || has_zero_byte(w ^ (ONES * 0x0a))
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b == b'\r' || b == b'\n' || b == 0)
}

/// Encodes the status line, Date, Server and the handler's fields (without framing, which the
/// caller adds). `false` if a field would break the message (response splitting).
fn encode_head(
    out: &mut Vec<u8>,
    status: u16,
    headers: &[(Cow<'static, str>, Cow<'static, [u8]>)],
    cache: &HeadCache,
) -> bool {
    let own_server = headers
        .iter()
        .any(|(n, _)| n.len() == 6 && n.eq_ignore_ascii_case("server"));
    cache.write_prefix(out, status, !own_server);
    for (name, value) in headers {
        let n = name.as_bytes();
        // Framing, Date and Connection are the engine's: a handler's value could contradict
        // the body actually sent. (Length first: most fields are none of these.)
        let engine_owned = match n.len() {
            4 => n.eq_ignore_ascii_case(b"date"),
            10 => n.eq_ignore_ascii_case(b"connection"),
            14 => n.eq_ignore_ascii_case(b"content-length"),
            17 => n.eq_ignore_ascii_case(b"transfer-encoding"),
            _ => false,
        };
        if engine_owned {
            continue;
        }
        if n.is_empty() || !n.iter().all(|&b| is_tchar(b)) || has_line_break_or_nul(value) {
            return false;
        }
        out.extend_from_slice(n);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    true
}

/// What became of a handler's response (see [`Conn::answer`]).
enum Answered {
    /// Encoded whole into the output buffer.
    Encoded,
    /// Head encoded; this body is still to be written (large or streamed).
    Rest(ResponseBody),
    /// Not sent: an error response was encoded instead and the connection must close.
    Refused,
}

/// What the busy part of the driver asks for.
enum Next {
    /// Everything received was answered and written: wait for the next request.
    Idle,
    Close(Close),
}

/// Where an idle connection's socket lives: inline in the task while idle, inside an
/// `Rc<Conn>` while answering (the request body reaches it from the handler). If a handler kept
/// a body alive past its response, the `Rc` cannot be unwrapped and the connection stays shared.
enum Home {
    Inline(TcpStream),
    Shared(Rc<Conn>),
}

impl Home {
    fn stream(&self) -> &TcpStream {
        match self {
            Home::Inline(s) => s,
            Home::Shared(c) => c.stream(),
        }
    }

    fn into_conn(self, shared: &Rc<WorkerShared>) -> Rc<Conn> {
        match self {
            Home::Inline(stream) => shared.take_conn(stream),
            Home::Shared(conn) => conn,
        }
    }

    fn from_conn(mut conn: Rc<Conn>, shared: &WorkerShared) -> Home {
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
    shared: ConnShared,
    stream: TcpStream,
    peer: SocketAddr,
) -> impl Future<Output = ()> {
    // Built outside the `async` block and used in place inside it: moving a captured value into
    // a new local would give it a second slot in the future (rust-lang/rust#62958).
    let mut home = Home::Inline(stream);
    async move {
        let mut served: u32 = 0;
        let (conn, close) = loop {
            if shared.is_shutting_down() {
                return;
            }
            // (A block, so that nothing of the wait stays in the task's state while busy.)
            if !IdleWait::new(home.stream(), &shared, &shared.idle_key).await {
                return;
            }
            let conn = home.into_conn(&shared);
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
            match PooledFuture::new_with(&shared.busy_blocks, batch).await {
                Next::Idle => home = Home::from_conn(conn, &shared),
                Next::Close(c) => break (conn, c),
            }
        };
        match close {
            Close::Now => {
                let _ = Box::pin(conn.flush()).await;
            }
            Close::Linger => Box::pin(conn.linger()).await,
        }
    }
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
    loop {
        // 1. Answer every complete request in the buffer, in order.
        loop {
            if !parse_due {
                break;
            }
            // Parse, and for a complete head build the request, under one borrow of the
            // connection and of the worker's field table (this runs once per request).
            let (req, version, head_request, head_keep_alive) = {
                let mut io = conn.io.borrow_mut();
                if io.rbuf.is_empty() {
                    break;
                }
                let mut table = conn.shared.fields.borrow_mut();
                // The request's box is taken first and the codec writes the head into it; the
                // few values needed here are read from it in place (a copy of the whole head
                // right after the parse stalled on its wide loads).
                let mut pending = Request::pending();
                let found = match pending.parse(&io.rbuf, &cfg.limits, &mut table) {
                    Ok(Parsed::Complete(h)) => Ok((
                        h.method_kind,
                        h.framing,
                        h.expect,
                        h.version,
                        h.keep_alive(),
                        h.head_len,
                        h.field_count,
                    )),
                    Ok(Parsed::Incomplete) => Err(None),
                    Err(e) => Err(Some((e.status, e.reason))),
                };
                let (method_kind, framing, expect, version, keep_alive, head_len, field_count) =
                    match found {
                        Ok(values) => values,
                        Err(None) => {
                            pending.give_back();
                            parse_due = false;
                            break;
                        }
                        Err(Some((status, reason))) => {
                            pending.give_back();
                            drop((io, table));
                            conn.push_error(status, reason, false);
                            return Next::Close(Close::Linger);
                        }
                    };
                let head_request = method_kind == Method::Head;
                let refusal = match framing {
                    _ if expect == Expectation::Unknown => Some((417, "unsupported expectation")),
                    BodyFraming::Length(n) if n > cfg.max_body_size => {
                        Some((413, "request body too large"))
                    }
                    _ => None,
                };
                if let Some((status, reason)) = refusal {
                    pending.give_back();
                    drop((io, table));
                    *served = served.saturating_add(1);
                    conn.push_error(status, reason, head_request);
                    return Next::Close(Close::Linger);
                }
                io.gen += 1;
                let gen = io.gen;
                let body = match framing {
                    BodyFraming::None | BodyFraming::Length(0) => {
                        io.body = BodyState::Done;
                        Body::empty()
                    }
                    BodyFraming::Length(n) => {
                        io.body = BodyState::Length(n);
                        // The body's slow-client account starts empty (issue 17).
                        io.body_waited = Duration::ZERO;
                        io.body_read = 0;
                        Body::from_conn(conn.clone(), gen, Some(n))
                    }
                    BodyFraming::Chunked => {
                        io.body = BodyState::Chunked(ChunkedDecoder::new(), 0);
                        io.body_waited = Duration::ZERO;
                        io.body_read = 0;
                        Body::from_conn(conn.clone(), gen, None)
                    }
                };
                io.continue_pending = expect == Expectation::Continue
                    && version == Version::Http11
                    && !matches!(io.body, BodyState::Done);
                // The request gets a copy of the head's bytes and fields (straight from the
                // table: nothing was parsed since); the read buffer moves on to the body or
                // the next request.
                let req = pending.finish(&io.rbuf, &table[..field_count], peer, body);
                io.rbuf.advance(head_len);
                (req, version, head_request, keep_alive)
            };
            head_deadline = None;
            *served = served.saturating_add(1);
            let mut keep_alive = head_keep_alive
                && cfg
                    .max_requests_per_connection
                    .map_or(true, |max| u64::from(*served) < max);
            // The handler future lives in this (pooled, per-batch) future: no allocation per
            // request. Panics, in `call` or in `poll`, are caught and answered with 500.
            //
            // The first poll calls the service and writes its future straight into its pinned
            // slot, inside the same `catch_unwind` as the poll: a handler that answers at once
            // costs one `catch_unwind`, not two.
            let mut slot = std::pin::pin!(None::<S::Future>);
            let mut req = Some(req);
            // The response is encoded where the handler's poll returned it, inside the poll:
            // every copy of it (through the `catch_unwind`, `Poll` and `await` results, or into
            // a variable) was a copy of data written just before, which stalls the processor
            // (store-to-load forwarding) on every request.
            let mut answered: Option<Answered> = None;
            let panicked = poll_fn(|cx| {
                let polled = catch_unwind(AssertUnwindSafe(|| {
                    if let Some(req) = req.take() {
                        slot.set(Some(service.call(req)));
                    }
                    match slot.as_mut().as_pin_mut() {
                        Some(fut) => match fut.poll(cx) {
                            Poll::Ready(mut r) => {
                                keep_alive &= !conn.shared.is_shutting_down();
                                answered = Some(conn.answer(
                                    &mut r,
                                    &mut keep_alive,
                                    version,
                                    head_request,
                                ));
                                true
                            }
                            Poll::Pending => false,
                        },
                        // Only after a panic, which ends the polling below.
                        None => false,
                    }
                }));
                match polled {
                    Ok(true) => Poll::Ready(false),
                    Ok(false) => {
                        // Meanwhile, keep writing earlier responses of the batch.
                        conn.poll_write_progress(cx);
                        Poll::Pending
                    }
                    Err(_) => Poll::Ready(true),
                }
            })
            .await;
            // The handler's future (and the request it may hold) goes now, before the rest of
            // the response is written and the body drained. Its drop may panic too (issue 17):
            // caught like a panic in its poll, so the worker and the answer survive it.
            let drop_panicked = catch_unwind(AssertUnwindSafe(|| slot.set(None))).is_err();
            match answered {
                Some(Answered::Encoded) => {}
                Some(Answered::Rest(rest)) => {
                    // Boxed: large and streamed bodies are the exception.
                    if Box::pin(conn.finish_response(rest, version)).await.is_err() {
                        return Next::Close(Close::Now);
                    }
                }
                Some(Answered::Refused) => return Next::Close(Close::Linger),
                None => {
                    // Nothing of a response was encoded: the client gets a 500.
                    tracing::error!(%peer, "handler panicked; answering 500");
                    conn.push_error(500, "internal server error", head_request);
                    return Next::Close(Close::Linger);
                }
            }
            if panicked | drop_panicked {
                // The response was complete (a panic after it, dropping the handler's future
                // or the response): it is sent, then the connection closes cleanly.
                tracing::error!(%peer, "panic after the handler's response; closing");
                return Next::Close(Close::Linger);
            }
            if !keep_alive {
                return Next::Close(Close::Linger);
            }
            // (A streamed response may have read the body meanwhile.)
            let (body_done, pending) = {
                let io = conn.io.borrow();
                (
                    matches!(io.body, BodyState::Done),
                    io.out.len() - io.out_pos,
                )
            };
            if !body_done {
                if !Box::pin(conn.drain_body()).await {
                    return Next::Close(Close::Linger);
                }
                if conn.pending_output() > cfg.max_pending_output && conn.flush().await.is_err() {
                    return Next::Close(Close::Now);
                }
            } else if pending > cfg.max_pending_output && conn.flush().await.is_err() {
                return Next::Close(Close::Now);
            }
            // What follows the request in the buffer is new input for the parser.
            parse_due = true;
        }

        // 2. Nothing complete is left: send the batch, then wait for more input.
        if conn.flush().await.is_err() {
            return Next::Close(Close::Now);
        }
        if conn.io.borrow().eof {
            // The client half-closed: everything it sent was answered.
            return Next::Close(Close::Now);
        }
        if conn.io.borrow().rbuf.is_empty() {
            return Next::Idle;
        }
        let before = conn.io.borrow().rbuf.len();
        let deadline = *head_deadline
            .get_or_insert_with(|| deadline_after(Instant::now(), cfg.header_timeout));
        let outcome = conn.fill(deadline).await;
        match outcome {
            Err(_) => return Next::Close(Close::Now),
            Ok(Fill::Eof) => {
                // Answer what is complete; a partial request is dropped without a word.
                parse_due = true;
            }
            Ok(Fill::TimedOut) => {
                conn.push_error(408, "request header timeout", false);
                return Next::Close(Close::Linger);
            }
            Ok(Fill::Data) => {
                // Re-parse only when the new bytes can change the verdict: a line end or a head as long as the limits allow. This keeps a
                // byte-per-packet client from costing a full re-parse per byte.
                let io = conn.io.borrow();
                let len = io.rbuf.len();
                parse_due |= io.rbuf[before..].contains(&b'\n')
                    || len > cfg.limits.max_target_len + cfg.limits.max_header_bytes;
            }
        }
        if let Ok(Fill::Eof) = outcome {
            // Parse what is there once more, then the loop above ends with `eof` set.
            continue;
        }
    }
}

#[cfg(test)]
mod size_tests {
    /// What an idle connection costs is mostly the task tokio allocates for it, sized by the
    /// largest state of its future; this guards the budget against accidental growth (an
    /// inlined timer, buffer or request would add hundreds of bytes).
    #[test]
    fn idle_connection_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let shared = std::rc::Rc::new(crate::worker::WorkerShared::new(
                crate::ServerConfig::default(),
                std::sync::Arc::new(crate::worker::Global::new(usize::MAX, None)),
            ));
            let svc = std::rc::Rc::new(crate::service_fn(|_r: crate::Request| async {
                crate::Response::text("x")
            }));
            let conn = std::rc::Rc::new(super::Conn::new(
                tokio::net::TcpStream::connect(l.local_addr().unwrap())
                    .await
                    .unwrap(),
                shared.clone(),
            ));
            let mut served = 0;
            let busy = super::busy(&*svc, &conn, &mut served, "127.0.0.1:1".parse().unwrap());
            // Built in a recycled block per batch (per request without pipelining): the memory
            // a busy connection holds besides its buffers.
            let busy_size = std::mem::size_of_val(&busy);
            assert!(busy_size <= 512, "per-batch future is {busy_size} bytes");
            drop(busy);
            let held = crate::worker::ConnShared::for_test(&shared);
            let fut = super::serve(svc, held, c, "127.0.0.1:1".parse().unwrap());
            // Tokio's task cell is the future plus 96 bytes of header and trailer, rounded up to
            // 128 bytes: at most 160 bytes of future keeps an idle connection's task in 256.
            let size = std::mem::size_of_val(&fut);
            assert!(size <= 160, "connection future is {size} bytes");
        });
    }
}

#[cfg(test)]
mod encode_tests {
    use super::has_line_break_or_nul;

    #[test]
    fn line_breaks_and_nul_are_found_at_every_position() {
        for len in 0..40 {
            let clean = vec![b'a'; len];
            assert!(!has_line_break_or_nul(&clean), "clean value of {len} bytes");
            for pos in 0..len {
                for bad in [b'\r', b'\n', 0u8] {
                    let mut v = clean.clone();
                    v[pos] = bad;
                    assert!(has_line_break_or_nul(&v), "{bad:#x} at {pos} of {len}");
                }
            }
        }
        // Bytes next to the forbidden ones (and high bytes) are allowed.
        assert!(!has_line_break_or_nul(
            b"\x0b\x0c\x0e\x09\x01\x80\xff text/plain; q=1"
        ));
    }
}
