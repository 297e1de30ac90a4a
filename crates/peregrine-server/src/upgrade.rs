//! Protocol upgrades: after a `101 Switching Protocols` response, the connection's bytes belong to
//! another protocol (WebSocket, or anything a handler speaks), handed over as [`Upgraded`].

use bytes::{Buf, Bytes};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A byte stream an upgrade can run on (TCP, TLS, a test's in-memory pipe).
pub trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// The raw connection after a 101 response: first the bytes the client had already sent after
/// its request (read by the engine with the request), then the connection itself.
pub struct Upgraded(Rewind<Box<dyn Io>>);

/// What a handler gives the engine to run once the 101 is written: a function of the
/// connection. It runs on the worker that owns the connection, like a handler.
pub type OnUpgrade = Box<dyn FnOnce(Upgraded) -> Pin<Box<dyn Future<Output = ()>>>>;

impl Upgraded {
    /// The connection `io`, with `prefix` (bytes already read from it) to be read first.
    pub fn new(io: impl Io + 'static, prefix: Bytes) -> Self {
        Upgraded(Rewind::new(Box::new(io), prefix))
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
pub(crate) struct TransportIo<T> {
    t: T,
    buf: bytes::BytesMut,
}

impl<T: crate::transport::Transport> TransportIo<T> {
    pub(crate) fn new(t: T) -> Self {
        TransportIo {
            t,
            buf: bytes::BytesMut::new(),
        }
    }
}

impl<T: crate::transport::Transport + Unpin> AsyncRead for TransportIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.buf.is_empty() {
                let n = this.buf.len().min(out.remaining());
                out.put_slice(&this.buf[..n]);
                this.buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            std::task::ready!(this.t.poll_read_ready(cx))?;
            this.buf.reserve(out.remaining().clamp(1, 16 * 1024));
            match this.t.try_read_buf(&mut this.buf) {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => this.t.clear_read_ready(),
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
