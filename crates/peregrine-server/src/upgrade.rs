//! Protocol upgrades: after a `101 Switching Protocols` response, the connection's bytes belong to
//! another protocol (WebSocket, or anything a handler speaks), handed over as [`Upgraded`].

use crate::events::EngineEvents;
use crate::pace::PaceRules;
use crate::ServerConfig;
use bytes::{Buf, Bytes};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A byte stream an upgrade can run on (TCP, TLS, a test's in-memory pipe).
pub trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// The raw connection after a 101 response: first the bytes the client had already sent after
/// its request (read by the engine with the request), then the connection itself; with the
/// graceful shutdown of the worker serving it (see [`Upgraded::shutdown_signal`]).
pub struct Upgraded(Rewind<Box<dyn Io>>, ShutdownSignal);

/// What a handler gives the engine to run once the 101 is written: a function of the
/// connection. It runs on the worker that owns the connection, like a handler.
pub type OnUpgrade = Box<dyn FnOnce(Upgraded) -> Pin<Box<dyn Future<Output = ()>>>>;

impl Upgraded {
    /// The connection `io`, with `prefix` (bytes already read from it) to be read first.
    ///
    /// Made on a worker thread (as the engine does), it carries that worker's
    /// [`ShutdownSignal`]; elsewhere (a test's pipe) one that never starts.
    pub fn new(io: impl Io + 'static, prefix: Bytes) -> Self {
        let signal = ShutdownSignal(crate::shutdown::current());
        Upgraded(Rewind::new(Box::new(io), prefix), signal)
    }

    /// The graceful shutdown of the worker serving this connection: an upgraded connection
    /// never ends by itself, so its protocol ends it when shutdown starts (WebSocket sends
    /// Close 1001) instead of being cut at `shutdown_timeout`, as an event stream ends then.
    pub fn shutdown_signal(&self) -> ShutdownSignal {
        self.1.clone()
    }
}

/// The start of a worker's graceful shutdown (the listeners have closed, after
/// `drain_delay`), as seen by an upgraded connection it serves. Clones watch the same worker.
#[derive(Clone, Default)]
pub struct ShutdownSignal(Option<std::rc::Rc<dyn crate::shutdown::ShutdownWatch>>);

impl ShutdownSignal {
    /// Whether shutdown has started.
    pub fn is_started(&self) -> bool {
        self.0.as_ref().is_some_and(|w| w.is_shutting_down())
    }

    /// Resolves once shutdown has started (at once if it has); never for a connection no
    /// worker serves.
    pub async fn started(&self) {
        match &self.0 {
            Some(worker) => worker.shutdown_started().await,
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for ShutdownSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownSignal")
            .field("worker", &self.0.is_some())
            .field("started", &self.is_started())
            .finish()
    }
}

/// A stream with some of its bytes already read: those are read again first.
pub(crate) struct Rewind<T> {
    prefix: Bytes,
    io: T,
}

impl<T> Rewind<T> {
    pub(crate) fn new(io: T, prefix: Bytes) -> Self {
        Rewind { prefix, io }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            if self.prefix.is_empty() {
                // An empty `Bytes` still keeps its whole allocation (the engine's read buffer,
                // for h2c) alive: let it go.
                self.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// `AsyncRead`/`AsyncWrite` over any [`crate::transport::Transport`] (the driver's poll form):
/// how an upgraded HTTP/1.1 connection or an HTTP/2 connection runs on whatever stream the
/// listener's acceptor produced.
///
/// It holds no read buffer: reads go straight into the caller's buffer
/// ([`crate::transport::Transport::try_read_into`]). An HTTP/2 connection kept 8 to 16 KiB here
/// for its whole life before (docs/performance.md, "Memory of an idle TLS and HTTP/2
/// connection").
pub(crate) struct TransportIo<T> {
    t: T,
}

impl<T: crate::transport::Transport> TransportIo<T> {
    pub(crate) fn new(t: T) -> Self {
        TransportIo { t }
    }
}

impl<T: crate::transport::Transport + Unpin> AsyncRead for TransportIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            std::task::ready!(self.t.poll_read_ready(cx))?;
            match self.t.try_read_into(out) {
                // Bytes, or none at the end of the stream.
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.t.clear_read_ready(),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl<T: crate::transport::Transport + Unpin> AsyncWrite for TransportIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.t.try_write(data) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::task::ready!(self.t.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Ready to write again means nothing is left buffered below (TLS records included).
        self.t.poll_write_ready(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.t.poll_write_ready(cx))?;
        Poll::Ready(self.t.shutdown_write())
    }
}

/// The connection of an HTTP/1.1 upgrade, its writes bounded like a response's
/// (`Timeouts::write`, `write_min_rate` with `write_rate_grace`): a peer that stops
/// reading (a WebSocket client that never reads what it is sent) holds the connection and the
/// handler's pending write only that long. Past the deadline the connection is closed with a
/// reset, so the unsent bytes go at once, and the write fails with `TimedOut`; every later read
/// or write fails the same way.
///
/// An episode of waits runs from a write the socket refuses until a write is taken at once:
/// each wait of it may last `write_timeout`, all of them together `write_rate_grace +
/// written / write_min_rate` (the rules of `h1/io.rs` and of the HTTP/2 tunnel). Only a
/// write, flush or shutdown that returns `Pending` arms a timer (boxed), so a peer that keeps
/// up costs no clock read.
pub(crate) struct WriteBounded<T> {
    /// `None` once closed by a timeout.
    io: Option<TransportIo<T>>,
    /// `ServerConfig`'s write rules, copied at the hand-over.
    rules: PaceRules,
    /// The episode's waits so far, and the bytes written meanwhile.
    waited: Duration,
    sent: u64,
    /// The wait under way: since when, and its deadline (boxed: only a blocked write has one).
    wait: Option<(Instant, Pin<Box<Sleep>>)>,
    /// Who hears of a close by timeout (`Server::with_events`), and about which client.
    events: Option<(Arc<dyn EngineEvents>, SocketAddr)>,
}

impl<T: crate::transport::Transport + Unpin> WriteBounded<T> {
    /// The upgraded connection `t` of client `peer`, under `config`'s write rules; `events`
    /// hears of a close by timeout.
    pub(crate) fn new(
        t: T,
        config: &ServerConfig,
        events: Option<&Arc<dyn EngineEvents>>,
        peer: SocketAddr,
    ) -> Self {
        WriteBounded {
            io: Some(TransportIo::new(t)),
            rules: PaceRules::write(config),
            waited: Duration::ZERO,
            sent: 0,
            wait: None,
            events: events.map(|e| (e.clone(), peer)),
        }
    }

    /// When a wait starting `now` must end (see `h1/io.rs`, `write_wait_deadline`).
    fn deadline(&self, now: Instant) -> Instant {
        self.rules.deadline(now, self.waited, self.sent)
    }

    /// Runs one write-side operation within the rules: while it returns `Pending` it waits
    /// under the episode's deadline, past which the connection is closed. `Ready` without a
    /// wait starts the account over if `kept_up` (a write taken at once).
    fn bounded<R>(
        &mut self,
        cx: &mut Context<'_>,
        kept_up: bool,
        op: impl FnOnce(Pin<&mut TransportIo<T>>, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        let Some(io) = self.io.as_mut() else {
            return Poll::Ready(Err(timed_out()));
        };
        match op(Pin::new(io), cx) {
            Poll::Ready(r) => {
                match self.wait.take() {
                    None if kept_up => (self.waited, self.sent) = (Duration::ZERO, 0),
                    None => {}
                    Some((since, timer)) => {
                        let now = Instant::now();
                        // Past its deadline, the wait was given up by its caller (polled, it
                        // would have closed the connection): not the peer's time to pay for.
                        if now < timer.deadline() {
                            self.waited = self.waited.saturating_add(now - since);
                        }
                    }
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                // A wait given up and taken up again keeps its deadline: nothing was written
                // meanwhile, and the socket still takes nothing.
                if self.wait.is_none() {
                    let now = Instant::now();
                    let timer = Box::pin(tokio::time::sleep_until(self.deadline(now)));
                    self.wait = Some((now, timer));
                }
                if let Some((_, timer)) = &mut self.wait {
                    if timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                self.close_timed_out();
                Poll::Ready(Err(timed_out()))
            }
        }
    }

    fn close_timed_out(&mut self) {
        self.wait = None;
        if let Some(io) = self.io.take() {
            // Closed with a reset: what the peer did not read is dropped at once rather than
            // left in the kernel for it (as `h1/io.rs` does on a write timeout).
            let _ = io.t.reset_on_close();
        }
        tracing::debug!("upgraded connection stalled past the write timeout; closed");
        if let Some((events, peer)) = &self.events {
            let reason = crate::events::RejectReason::WriteTimeout;
            crate::events::emit_close(&**events, reason, "write_timeout", *peer);
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "write timeout")
}

impl<T: crate::transport::Transport + Unpin> AsyncRead for WriteBounded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.io.as_mut() {
            Some(io) => Pin::new(io).poll_read(cx, out),
            // Closed by a write timeout: the reader learns why.
            None => Poll::Ready(Err(timed_out())),
        }
    }
}

impl<T: crate::transport::Transport + Unpin> AsyncWrite for WriteBounded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = self.bounded(cx, true, |io, cx| io.poll_write(cx, data));
        if let Poll::Ready(Ok(n)) = r {
            self.sent = self.sent.saturating_add(n as u64);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.bounded(cx, false, |io, cx| io.poll_flush(cx))
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.io.is_none() {
            // Already closed (with a reset): nothing is left to shut down.
            return Poll::Ready(Ok(()));
        }
        self.bounded(cx, false, |io, cx| io.poll_shutdown(cx))
    }
}

impl std::fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgraded")
            .field("prefix", &self.0.prefix.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection read through `TransportIo` (HTTP/2, upgrades) holds nothing but its stream:
    /// reads go straight into the caller's buffer, whatever its size.
    #[test]
    fn transport_io_holds_no_read_buffer() {
        assert_eq!(
            std::mem::size_of::<TransportIo<crate::transport::Stream>>(),
            std::mem::size_of::<crate::transport::Stream>()
        );
        reads_whole_stream_through_a_small_buffer(crate::transport::Stream::Tcp, 5);
    }

    /// Sends 16 bytes over a real socket whose server side `wrap` makes a transport, and reads
    /// them back through `TransportIo` with a caller buffer of `room` bytes, less than what
    /// arrived: the rest stays in the socket, nothing is lost, then the end of stream reads 0.
    fn reads_whole_stream_through_a_small_buffer<T: crate::transport::Transport + Unpin>(
        wrap: impl FnOnce(tokio::net::TcpStream) -> T,
        room: usize,
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let mut client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                    .await
                    .unwrap();
                let (server, _) = l.accept().await.unwrap();
                let mut io = TransportIo::new(wrap(server));
                client.write_all(b"0123456789abcdef").await.unwrap();
                let mut small = vec![0u8; room];
                let mut got = Vec::new();
                while got.len() < 16 {
                    let n = io.read(&mut small).await.unwrap();
                    assert!(n > 0);
                    got.extend_from_slice(&small[..n]);
                }
                assert_eq!(got, b"0123456789abcdef");
                drop(client);
                assert_eq!(io.read(&mut small).await.unwrap(), 0, "end of stream");
            });
    }

    /// A transport that only has `try_read_buf` (the trait's default `try_read_into`).
    struct OnlyReadBuf(tokio::net::TcpStream);

    impl crate::transport::Transport for OnlyReadBuf {
        fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.0.poll_read_ready(cx)
        }
        fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.0.poll_write_ready(cx)
        }
        fn try_read_buf(&self, buf: &mut bytes::BytesMut) -> io::Result<usize> {
            self.0.try_read_buf(buf)
        }
        fn try_write(&self, data: &[u8]) -> io::Result<usize> {
            self.0.try_write(data)
        }
        fn clear_read_ready(&self) {}
        fn shutdown_write(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_transport_without_a_direct_read_reads_into_small_buffers_too() {
        reads_whole_stream_through_a_small_buffer(OnlyReadBuf, 3);
    }

    /// One poll of a write.
    async fn write_once(
        w: &mut WriteBounded<crate::transport::Stream>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *w).poll_write(cx, data))).await
    }

    /// A write that was refused, then given up by its caller (a `select!` that took another
    /// branch) until past its deadline, is not charged to the peer when a later write goes
    /// through: the peer may have read long before. Charged, the 300 ms would exceed the
    /// grace and the next refused write would close the connection at once.
    #[test]
    fn a_wait_its_caller_gave_up_is_not_charged_to_the_peer() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                    .await
                    .unwrap();
                let (server, peer) = l.accept().await.unwrap();
                let config = ServerConfig::builder()
                    .write_timeout(std::time::Duration::from_millis(50))
                    .write_min_rate(1 << 20)
                    .write_rate_grace(std::time::Duration::from_millis(200))
                    .build();
                let mut w =
                    WriteBounded::new(crate::transport::Stream::Tcp(server), &config, None, peer);
                let piece = vec![0u8; 64 * 1024];
                while let Poll::Ready(r) = write_once(&mut w, &piece).await {
                    r.unwrap();
                }
                assert!(w.wait.is_some(), "the refused write waits");
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                // The peer reads everything, long after the deadline.
                let mut sink = vec![0u8; 1 << 20];
                let quiet = std::time::Duration::from_millis(100);
                while let Ok(Ok(())) = tokio::time::timeout(quiet, client.readable()).await {
                    let _ = client.try_read(&mut sink);
                }
                let Poll::Ready(r) = write_once(&mut w, &piece).await else {
                    panic!("the socket takes more once the peer has read");
                };
                assert!(r.unwrap() > 0);
                assert_eq!(w.waited, std::time::Duration::ZERO);
                assert!(w.io.is_some(), "still open");
            });
    }

    #[test]
    fn off_a_worker_thread_the_shutdown_signal_never_starts() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let (a, _b) = tokio::io::duplex(8);
                let signal = Upgraded::new(a, Bytes::new()).shutdown_signal();
                assert!(!signal.is_started());
                let waited = tokio::time::timeout(Duration::from_millis(20), signal.started());
                assert!(waited.await.is_err(), "no worker, no shutdown");
            });
    }

    #[test]
    fn the_prefix_is_read_before_the_connection_and_writes_go_through() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let (a, mut b) = tokio::io::duplex(64);
                let mut up = Upgraded::new(a, Bytes::from_static(b"early "));
                b.write_all(b"later").await.unwrap();
                let mut got = vec![0u8; 11];
                up.read_exact(&mut got).await.unwrap();
                assert_eq!(got, b"early later");
                up.write_all(b"back").await.unwrap();
                let mut back = [0u8; 4];
                b.read_exact(&mut back).await.unwrap();
                assert_eq!(&back, b"back");
            });
    }
}
