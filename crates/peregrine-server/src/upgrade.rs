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
