//! A TLS connection as a [`Transport`] for the HTTP/1.1 driver, and [`TlsAcceptor`] as the
//! seam's [`Acceptor`] (the handshake runs in the connection's own task).

use super::acceptor::{negotiated, Negotiated, TlsAcceptor, TlsStream};
use crate::transport::{Accept, Accepted, Acceptor, Stream, Transport};
use bytes::BytesMut;
use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use tokio::io::{AsyncBufRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Plaintext read per call: one TLS record's worth at most.
const READ_CHUNK: usize = 16 * 1024;

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A waker for the driver's non-blocking `try_*` calls: readiness is registered by its
/// `poll_*_ready` calls, which pass the task's real waker.
fn noop_waker() -> &'static Waker {
    static NOOP: OnceLock<Waker> = OnceLock::new();
    NOOP.get_or_init(|| Waker::from(Arc::new(Noop)))
}

/// A server-side TLS connection (tokio-rustls over TCP) in the driver's poll form.
///
/// Readiness is learnt with `poll_fill_buf`, which leaves the decrypted record in rustls's own
/// plaintext buffer: the driver's next read copies it once, straight into its buffer, and an idle
/// connection holds no plaintext buffer of its own. Encrypted bytes rustls could not write yet are
/// flushed by both readiness polls, so a response whose last records did not fit the socket buffer
/// still leaves once the socket drains.
pub struct TlsTransport {
    io: RefCell<TlsStream<TcpStream>>,
    eof: Cell<bool>,
}

impl TlsTransport {
    /// Wraps a connection whose handshake is complete.
    pub fn new(io: TlsStream<TcpStream>) -> Self {
        TlsTransport {
            io: RefCell::new(io),
            eof: Cell::new(false),
        }
    }

    /// The protocol chosen by ALPN.
    pub fn negotiated(&self) -> Negotiated {
        negotiated(&self.io.borrow())
    }

    /// The TLS stream back (for HTTP/2, which wants `AsyncRead`/`AsyncWrite`). Plaintext already
    /// decrypted but not yet read stays in the stream.
    pub fn into_inner(self) -> TlsStream<TcpStream> {
        self.io.into_inner()
    }

    /// Hands `put` up to `room` bytes (at least 1, at most [`READ_CHUNK`]) of the plaintext
    /// rustls holds, without waiting: their number, 0 at the end of the stream, `WouldBlock`
    /// when there is none yet.
    fn read_plain(&self, room: usize, put: impl FnOnce(&[u8])) -> io::Result<usize> {
        if self.eof.get() {
            return Ok(0);
        }
        let mut cx = Context::from_waker(noop_waker());
        let mut io = self.io.borrow_mut();
        let want = room.clamp(1, READ_CHUNK);
        let n = match Pin::new(&mut *io).poll_fill_buf(&mut cx) {
            Poll::Ready(Ok(plain)) => {
                let n = plain.len().min(want);
                put(&plain[..n]);
                n
            }
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Err(io::ErrorKind::WouldBlock.into()),
        };
        if n == 0 {
            self.eof.set(true);
        }
        Pin::new(&mut *io).consume(n);
        Ok(n)
    }

    /// Decrypts until plaintext (or the end) is there, with `cx`'s waker registered if not;
    /// `Ready(Ok(true))` means plaintext waits in rustls, `Ready(Ok(false))` the end of the stream.
    fn poll_plain(&self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let mut io = self.io.borrow_mut();
        match Pin::new(&mut *io).poll_fill_buf(cx) {
            Poll::Ready(Ok(plain)) => {
                let some = !plain.is_empty();
                self.eof.set(!some);
                Poll::Ready(Ok(some))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Transport for TlsTransport {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.eof.get() {
            return Poll::Ready(Ok(()));
        }
        // Bytes of an earlier response may still wait in rustls: send them while idle.
        if self.io.borrow().get_ref().1.wants_write() {
            let _ = Pin::new(&mut *self.io.borrow_mut()).poll_flush(cx);
        }
        self.poll_plain(cx).map_ok(|_| ())
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io.borrow_mut()).poll_flush(cx)
    }

    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let room = buf.capacity() - buf.len();
        // One copy, rustls's plaintext straight into the driver's buffer (no zeroed scratch).
        self.read_plain(room, |plain| buf.extend_from_slice(plain))
    }

    fn try_read_into(&self, out: &mut ReadBuf<'_>) -> io::Result<usize> {
        // Straight into h2's (or the upgrade's) buffer: no buffer of ours in between.
        let room = out.remaining();
        if room == 0 {
            return Ok(0);
        }
        self.read_plain(room, |plain| out.put_slice(plain))
    }

    fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(noop_waker());
        let mut io = self.io.borrow_mut();
        match Pin::new(&mut *io).poll_write(&mut cx, data) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn http2(&self) -> bool {
        self.negotiated() == Negotiated::Http2
    }

    fn reset_on_close(&self) -> io::Result<()> {
        Transport::reset_on_close(self.io.borrow().get_ref().0)
    }

    fn clear_read_ready(&self) {
        // tokio-rustls clears the socket's readiness itself when a read would block.
    }

    fn shutdown_write(&self) -> io::Result<()> {
        let mut cx = Context::from_waker(noop_waker());
        match Pin::new(&mut *self.io.borrow_mut()).poll_shutdown(&mut cx) {
            Poll::Ready(r) => r,
            // close_notify queued; the socket is shut down when the connection is dropped.
            Poll::Pending => Ok(()),
        }
    }
}

impl Acceptor for TlsAcceptor {
    /// The handshake (with its timeout) runs in the connection's task; a failure closes the
    /// connection. Only TCP connections are wrapped; other streams are refused.
    fn accept(&self, conn: Accepted) -> Accept {
        let acceptor = self.clone();
        Accept::Handshake(Box::pin(async move {
            let Stream::Tcp(tcp) = conn.stream else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "TLS is served on TCP listeners only",
                ));
            };
            let tls = acceptor.accept(tcp).await?;
            Ok(Stream::Other(Box::new(TlsTransport::new(tls))))
        }))
    }
}
