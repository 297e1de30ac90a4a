//! A connection's socket and buffers: reading (with deadlines), writing once per batch (with the
//! write timeout and the minimum write rate), lingering close. The driver (`mod.rs`) and the
//! request body (`body.rs`) share one [`Conn`] through an `Rc`; no borrow of its state is held
//! across an `.await`.

use super::head::HeadCache;
use crate::body::BodyError;
use crate::pace::PaceRules;
use crate::pooled::BlockPool;
use crate::transport::{on_stream, Stream, Transport};
use crate::worker::{ConnShared, WorkerShared};
use bytes::BytesMut;
use peregrine_codec::{ChunkedDecoder, FieldSpan};
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{timeout_at, Instant};

/// A worker's state as the HTTP/1.1 driver sees it.
pub(crate) type Shared = WorkerShared<Pools>;
/// A connection's hold on its worker (see [`ConnShared`]).
pub(crate) type Held = ConnShared<Pools>;

/// The HTTP/1.1 driver's per-worker state ([`WorkerShared::proto`]).
pub(crate) struct Pools {
    /// The parser's field table, shared by the worker's connections: parsing never yields, so
    /// one table per thread suffices and idle connections do not carry one.
    pub(crate) fields: RefCell<Box<[FieldSpan]>>,
    pub(super) read_pool: RefCell<Vec<BytesMut>>,
    /// Connection shells of connections that went idle, for the next one that goes busy.
    /// Emptied when the worker stops: each holds an `Rc` to this state (a cycle otherwise).
    pub(super) conn_pool: RefCell<Vec<Rc<Conn>>>,
    pub(super) out_pool: RefCell<Vec<Vec<u8>>>,
    /// Memory for the per-batch futures of busy connections (see [`crate::pooled`]).
    pub(crate) busy_blocks: BlockPool,
    pub(crate) head_cache: RefCell<HeadCache>,
}

/// How the framing of the current request's body is progressing.
pub(super) enum BodyState {
    /// No body, or fully read.
    Done,
    /// This many bytes of a Content-Length body are still to come.
    Length(u64),
    /// A chunked body, this many data bytes delivered so far.
    Chunked(ChunkedDecoder, u64),
    /// Reading failed (the connection will close after the response).
    Failed(BodyError),
}

/// Size of a fresh read buffer. Requests of load generators and browsers fit in it; it grows
/// on demand (up to the codec's head limits, or by what a body read asks for).
pub(crate) const READ_BUF_INITIAL: usize = 4096;
/// Buffers larger than these (grown for a body or a big batch) are freed rather than kept in a
/// recycled connection shell.
const READ_BUF_KEEP: usize = 4 * READ_BUF_INITIAL;
const OUT_BUF_KEEP: usize = 64 * 1024;
/// Read at least this much spare capacity before each `read(2)`.
pub(crate) const READ_SPARE: usize = 1024;
/// After the last response, read and discard for at most this long (or this many bytes) before
/// closing, so the client reads the answer rather than a reset (nginx `lingering_close`).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;
/// Most input kept while a streamed response watches its client for a close
/// ([`Conn::poll_peer_gone`]).
const WATCH_BUFFER_MAX: usize = 64 * 1024;

/// Mutable per-connection state.
pub(crate) struct Io {
    /// Bytes received and not consumed yet. Released to the worker pool while idle.
    pub(super) rbuf: BytesMut,
    /// Response bytes not written yet (`out[out_pos..]`). Released to the pool while idle.
    pub(super) out: Vec<u8>,
    pub(super) out_pos: usize,
    /// The client closed its sending side.
    pub(super) eof: bool,
    pub(super) body: BodyState,
    /// Identifies the request whose body is current (see `Body`).
    pub(super) gen: u64,
    /// The client sent `Expect: 100-continue` and the interim response was not sent yet.
    pub(super) continue_pending: bool,
    /// Slow-client accounts, kept only where a read or write would block, so the
    /// fast path never reads the clock. Only time spent waiting for the client counts (a slow
    /// handler or stream is not the client's fault): the time the current body was waited
    /// for, and the body bytes read by those waits (see `Timeouts::body_min_rate`) ...
    pub(super) body_waited: Duration,
    pub(super) body_read: u64,
    /// ... and the time spent waiting for writability since the output was last fully written
    /// (`None`: no write has blocked since), with the bytes written meanwhile (see
    /// `Timeouts::write_min_rate`).
    write_waited: Option<Duration>,
    write_sent: u64,
    /// The handler's upgrade function, between its 101 and the hand-over.
    pub(super) upgrade: Option<crate::upgrade::OnUpgrade>,
    /// The streamed body being written is an event stream (`text/event-stream`): endless by
    /// design, it ends when shutdown starts (see `Conn::write_stream`).
    pub(super) event_stream: bool,
    /// The request being answered said `TE: trailers`: a chunked response may end with them.
    pub(super) te_trailers: bool,
    /// The trailers of the streamed response being written (chunked, `TE: trailers`).
    pub(super) trailers: Option<Box<crate::trailers::PendingTrailers>>,
}

/// One connection, shared by the driver and the body of the request being answered.
///
/// Exists while the connection is busy; an idle connection keeps only its socket. The shells
/// are recycled by the worker (see `take_conn` in `pools.rs`), so going busy costs no
/// allocation.
pub(crate) struct Conn {
    /// `None` only while the shell waits in the worker's pool.
    stream: Option<Stream>,
    pub(super) shared: Rc<Shared>,
    pub(super) io: RefCell<Io>,
    /// The client, for engine events (`Server::with_events`); set only when someone listens.
    pub(super) peer: std::cell::Cell<SocketAddr>,
}

/// Outcome of waiting for input.
pub(super) enum Fill {
    Data,
    Eof,
    TimedOut,
}

impl Conn {
    /// A connection with no buffers yet ([`Conn::try_fill`] takes them from the worker's pools).
    pub(crate) fn new(stream: Stream, shared: Rc<Shared>) -> Self {
        Conn {
            stream: Some(stream),
            shared,
            peer: std::cell::Cell::new(SocketAddr::from(([0, 0, 0, 0], 0))),
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
                upgrade: None,
                event_stream: false,
                te_trailers: false,
                trailers: None,
            }),
        }
    }

    /// Makes a recycled shell (see [`Conn::retire`]) a connection for `stream`, keeping the
    /// shell's (empty) buffers.
    pub(crate) fn reuse(&mut self, stream: Stream) {
        self.stream = Some(stream);
        let io = self.io.get_mut();
        io.out_pos = 0;
        io.eof = false;
        io.body = BodyState::Done;
        io.continue_pending = false;
        io.write_waited = None;
        io.event_stream = false;
        // `gen` goes on counting: a body of an earlier request can never match a later one.
    }

    /// Takes the socket out of a connection that went idle, leaving a shell to recycle. The
    /// shell keeps its buffers (empty: the connection answered everything it received) unless
    /// they grew large, so the next connection to go busy takes them with it, without a trip
    /// through the buffer pools.
    pub(crate) fn retire(&mut self) -> Stream {
        let io = self.io.get_mut();
        debug_assert!(io.rbuf.is_empty() && io.out_pos >= io.out.len());
        // Unconditionally: bytes of one client must never be parsed as another's.
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

    /// Takes the socket and the bytes received but not consumed out of a connection that
    /// leaves the HTTP/1.1 driver (an upgrade, or HTTP/2 with prior knowledge). The shell's
    /// buffers go back to the worker's pools.
    pub(super) fn hand_over(&mut self) -> (Stream, bytes::Bytes) {
        let io = self.io.get_mut();
        let read = bytes::Bytes::copy_from_slice(&io.rbuf);
        io.rbuf.clear();
        io.out.clear();
        io.out_pos = 0;
        (
            self.stream
                .take()
                .expect("a connection in use has its socket"),
            read,
        )
    }

    #[inline]
    pub(super) fn stream(&self) -> &Stream {
        match &self.stream {
            Some(s) => s,
            // Only pooled shells have no socket, and nothing runs on them.
            None => unreachable!("a connection in use has its socket"),
        }
    }

    /// Waits (until `deadline`) for the socket to be readable and reads what is there into the
    /// read buffer.
    pub(super) async fn fill(&self, deadline: Instant) -> io::Result<Fill> {
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
    pub(super) fn try_fill(&self) -> io::Result<Option<Fill>> {
        let mut io = self.io.borrow_mut();
        if io.rbuf.capacity() == 0 {
            io.rbuf = self.shared.take_read_buf();
        }
        if io.out.capacity() == 0 {
            io.out = self.shared.take_out_buf();
        }
        if io.rbuf.capacity() - io.rbuf.len() < READ_SPARE {
            crate::grow::try_reserve(&mut io.rbuf, READ_BUF_INITIAL)?;
        }
        let read = on_stream!(self.stream(), s => read_into(s, &mut io.rbuf));
        match read? {
            None => Ok(None),
            Some(0) => {
                io.eof = true;
                Ok(Some(Fill::Eof))
            }
            Some(n) => {
                self.shared.count_in(n);
                Ok(Some(Fill::Data))
            }
        }
    }

    /// Writes all pending output; fails if the client makes no progress within the write
    /// timeout.
    pub(super) async fn flush(&self) -> io::Result<()> {
        loop {
            {
                let mut io = self.io.borrow_mut();
                let io = &mut *io;
                if let Err(e) = on_stream!(self.stream(), s => write_out(s, io)) {
                    self.shared.count_out(io.out_pos);
                    return Err(e);
                }
                if io.out_pos >= io.out.len() {
                    // Counted once the buffer is written (`poll_write_progress` included).
                    self.shared.count_out(io.out.len());
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
                let _ = self.stream().reset_on_close();
                if let Some(events) = &self.shared.events {
                    let (reason, peer) =
                        (crate::events::RejectReason::WriteTimeout, self.peer.get());
                    crate::events::emit_close(&**events, reason, "write_timeout", peer);
                }
                Err(io::Error::new(io::ErrorKind::TimedOut, "write timeout"))
            }
        }
    }

    /// Slow path (a write would block): when this wait starts, and when it must end.
    /// `write_timeout` bounds one wait; over the waits of this episode (which ends when the
    /// output is fully written), the client must read `write_min_rate` bytes/s beyond
    /// `write_rate_grace`, so a client that reads a little before every timeout cannot hold the
    /// connection forever.
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
        (
            now,
            PaceRules::write(cfg).deadline(now, waited, io.write_sent),
        )
    }

    /// Flushes pending output, then writes `data` straight from the caller's buffer.
    pub(super) async fn write_direct(&self, data: &[u8]) -> io::Result<()> {
        self.flush().await?;
        let mut pos = 0;
        while pos < data.len() {
            match self.stream().try_write(&data[pos..]) {
                Ok(n) => {
                    pos += n;
                    self.shared.count_out(n);
                    let mut io = self.io.borrow_mut();
                    io.write_sent = io.write_sent.saturating_add(n as u64);
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

    /// Flushes pending output (the head, and earlier pipelined responses), then writes `len`
    /// bytes of `file` from `offset`: with `sendfile(2)` on plain TCP (Linux), the kernel
    /// copying from the page cache to the socket; read and written in pieces on any other
    /// transport. The write timeout and minimum write rate apply as to any other output. A
    /// file shorter than announced is an error (the connection closes).
    pub(super) async fn write_file(
        &self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.flush().await?;
        #[cfg(target_os = "linux")]
        if let Stream::Tcp(tcp) = self.stream() {
            return self.sendfile(tcp, file, offset, len).await;
        }
        self.copy_file(file, offset, len).await
    }

    /// [`Conn::write_file`] through `sendfile(2)`: no copy of the bytes through user space.
    #[cfg(target_os = "linux")]
    async fn sendfile(
        &self,
        tcp: &tokio::net::TcpStream,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let end = offset.checked_add(len).ok_or_else(file_too_short)?;
        let mut off = offset;
        while off < end {
            // One call sends what fits in the socket buffer; Linux caps one call at 2 GiB.
            let want = (end - off).min(SENDFILE_MAX) as usize;
            let mut pos = libc::off_t::try_from(off).map_err(|_| file_too_short())?;
            // `try_io` clears tokio's write readiness on EAGAIN, so `wait_writable` really waits.
            let sent = tcp.try_io(tokio::io::Interest::WRITABLE, || {
                // SAFETY: both descriptors are open for the duration of the call (borrowed),
                // and `pos` is a valid `off_t` the kernel updates.
                let n =
                    unsafe { libc::sendfile(tcp.as_raw_fd(), file.as_raw_fd(), &mut pos, want) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match sent {
                Ok(0) => return Err(file_too_short()),
                Ok(n) => {
                    off += n as u64;
                    self.shared.count_out(n);
                    let mut io = self.io.borrow_mut();
                    io.write_sent = io.write_sent.saturating_add(n as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Box::pin(self.wait_writable()).await?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Everything pending is written (see `flush`).
        self.io.borrow_mut().write_waited = None;
        Ok(())
    }

    /// [`Conn::write_file`] by reading pieces into a buffer and writing them (TLS, Unix
    /// sockets, other systems).
    async fn copy_file(&self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; COPY_FILE_PIECE.min(len as usize)];
        let mut off = offset;
        let end = offset.checked_add(len).ok_or_else(file_too_short)?;
        while off < end {
            let want = (end - off).min(buf.len() as u64) as usize;
            let n = match file.read_at(&mut buf[..want], off) {
                Ok(0) => return Err(file_too_short()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.write_direct(&buf[..n]).await?;
            off += n as u64;
        }
        Ok(())
    }

    /// While a streamed response waits for its next piece: whether the client is gone (its
    /// end of input, or a reset), registering `cx` for the socket's readability otherwise.
    /// Input that arrives meanwhile (a pipelined request) is not a close: it stays in the read
    /// buffer for after the response, up to [`WATCH_BUFFER_MAX`] bytes; past that the socket
    /// is no longer watched (the next write tells). Not while the request body is unread: its
    /// bytes are the body reader's.
    pub(super) fn poll_peer_gone(&self, cx: &mut Context<'_>) -> bool {
        loop {
            {
                let io = self.io.borrow();
                if io.eof {
                    return true;
                }
                if !matches!(io.body, BodyState::Done) || io.rbuf.len() >= WATCH_BUFFER_MAX {
                    return false;
                }
            }
            match self.stream().poll_read_ready(cx) {
                Poll::Pending => return false,
                Poll::Ready(Err(_)) => return true,
                Poll::Ready(Ok(())) => {}
            }
            match self.try_fill() {
                Err(_) | Ok(Some(Fill::Eof)) => return true,
                // Readiness was spurious (and is cleared): poll again to register `cx`.
                Ok(None) => {}
                Ok(Some(_)) => {}
            }
        }
    }

    /// Makes non-blocking progress on pending output while a handler is waiting on something
    /// else, so earlier pipelined responses are not held back by a slow handler.
    pub(super) fn poll_write_progress(&self, cx: &mut Context<'_>) {
        let mut io = self.io.borrow_mut();
        // (Its bytes are counted by the `flush` that empties the buffer.)
        on_stream!(self.stream(), s => write_progress(s, &mut io, cx))
    }

    pub(super) fn pending_output(&self) -> usize {
        let io = self.io.borrow();
        io.out.len() - io.out_pos
    }

    /// Closes after the last response: flush, half-close, then read and discard until the
    /// client closes too (bounded), so it reads our answer instead of a reset.
    pub(super) async fn linger(&self) {
        if self.flush().await.is_err() {
            return;
        }
        let _ = self.stream().shutdown_write();
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
    pub(super) fn release_buffers(&self) {
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

/// Most bytes asked of one `sendfile(2)` call (the kernel sends at most 0x7fff_f000).
#[cfg(target_os = "linux")]
const SENDFILE_MAX: u64 = 0x7fff_f000;
/// Piece size of a file body read and written through the transport.
const COPY_FILE_PIECE: usize = 256 * 1024;

/// A file body ended before its announced length (the file shrank, or a bad region).
fn file_too_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file shorter than the announced body",
    )
}

/// One non-blocking read into `buf` (which has spare capacity): `Some(n)` bytes read (0 at
/// EOF), `None` if there was nothing to read.
#[inline(always)]
fn read_into<T: Transport + ?Sized>(stream: &T, buf: &mut BytesMut) -> io::Result<Option<usize>> {
    let spare = buf.capacity() - buf.len();
    match stream.try_read_buf(buf) {
        Ok(n) => {
            if n > 0 && n < spare {
                // A short read drained the socket: forget the readiness now (as tokio's own
                // `poll_read` does) instead of paying a `read(2)` that returns EAGAIN.
                // Edge-triggered epoll reports any later data as a new event.
                stream.clear_read_ready();
            }
            Ok(Some(n))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes pending output until it is all written or the stream would block.
#[inline(always)]
fn write_out<T: Transport + ?Sized>(stream: &T, io: &mut Io) -> io::Result<()> {
    let start = io.out_pos;
    while io.out_pos < io.out.len() {
        match stream.try_write(&io.out[io.out_pos..]) {
            Ok(n) => io.out_pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Slow path: count what this round wrote toward the write rate.
                let sent = (io.out_pos - start) as u64;
                io.write_sent = io.write_sent.saturating_add(sent);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`write_out`] from inside a poll: waits for writability by registering `cx`.
#[inline(always)]
fn write_progress<T: Transport + ?Sized>(stream: &T, io: &mut Io, cx: &mut Context<'_>) {
    while io.out_pos < io.out.len() {
        match stream.poll_write_ready(cx) {
            Poll::Ready(Ok(())) => match stream.try_write(&io.out[io.out_pos..]) {
                Ok(n) => {
                    io.out_pos += n;
                    io.write_sent = io.write_sent.saturating_add(n as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                // The driver's next flush reports the error.
                Err(_) => return,
            },
            _ => return,
        }
    }
}
