//! The transport seam: the byte streams the connection driver serves, and the step that turns
//! an accepted connection into one.
//!
//! The driver needs five things from a stream: readiness to read and to write (edge-triggered,
//! with a way to forget a stale read readiness), a non-blocking read into a buffer, a
//! non-blocking write, and a half-close. [`Transport`] is exactly that, in poll form so it is
//! object-safe and allocation-free.
//!
//! TCP and Unix sockets are served directly ([`Stream::Tcp`], [`Stream::Unix`]): the driver
//! matches on the variant (one predictable branch) and calls tokio's socket methods, so the TCP
//! path keeps its system calls exactly as before. Any other stream (TLS next) is served through
//! [`Stream::Other`], a boxed [`Transport`]. An [`Acceptor`] sits between the accept loop and the
//! driver: the identity for plain sockets ([`PlainAcceptor`]); a TLS handshake (which runs in the
//! connection's own task, never in the accept loop) for a TLS acceptor.

use bytes::BytesMut;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// A byte stream the connection driver can serve (see the module documentation).
///
/// All methods take `&self`: the driver shares the stream between the connection's task and the
/// request body it hands to the handler, on one thread. An implementation with state of its own
/// (TLS) keeps it in a `RefCell`.
pub trait Transport: 'static {
    /// Ready to read (or closed, or failed). Like tokio's `poll_read_ready`: the readiness is
    /// remembered until a read returns `WouldBlock` or [`Transport::clear_read_ready`] is called.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Ready to write (or failed).
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Reads what is available into the spare capacity of `buf` without waiting: the number of
    /// bytes read (0 at end of stream), or a `WouldBlock` error when nothing is there.
    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize>;

    /// Reads what is available straight into the unfilled part of `out` without waiting, like
    /// [`Transport::try_read_buf`]: how HTTP/2 and upgraded connections read (into the buffer of
    /// h2 or of the upgrade's protocol), so those hold no read buffer of their own.
    ///
    /// An `out` without room reads nothing (`Ok(0)`). The default reads through `try_read_buf`
    /// into a buffer allocated for the call (exactly `out`'s room); the engine's own streams
    /// override it with a direct read.
    fn try_read_into(&self, out: &mut ReadBuf<'_>) -> io::Result<usize> {
        if out.remaining() == 0 {
            return Ok(0);
        }
        let mut buf = BytesMut::with_capacity(out.remaining());
        let n = self.try_read_buf(&mut buf)?.min(out.remaining());
        out.put_slice(&buf[..n]);
        Ok(n)
    }

    /// Writes from `data` without waiting: the number of bytes written, or a `WouldBlock` error.
    fn try_write(&self, data: &[u8]) -> io::Result<usize>;

    /// Forgets the read readiness: called after a short read drained the stream, so the next
    /// wait does not start with a read that would return `WouldBlock`.
    fn clear_read_ready(&self);

    /// Closes the sending side (the peer reads end of stream after what was written).
    fn shutdown_write(&self) -> io::Result<()>;

    /// Makes closing the stream abort it (a TCP reset), dropping unsent output at once instead
    /// of leaving it to a peer that does not read. By default nothing.
    fn reset_on_close(&self) -> io::Result<()> {
        Ok(())
    }

    /// Whether the client chose HTTP/2 for this stream (TLS with ALPN `h2`); the worker then
    /// serves it with the HTTP/2 driver instead of the HTTP/1.1 one.
    fn http2(&self) -> bool {
        false
    }
}

/// TCP and Unix streams have the same readiness API in tokio: one implementation serves both.
macro_rules! socket_transport {
    ($stream:ty) => {
        impl Transport for $stream {
            #[inline]
            fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_read_ready(self, cx)
            }
            #[inline]
            fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_write_ready(self, cx)
            }
            #[inline]
            fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize> {
                <$stream>::try_read_buf(self, buf)
            }
            #[inline]
            fn try_read_into(&self, out: &mut ReadBuf<'_>) -> io::Result<usize> {
                // tokio's `ReadBuf` is a `BufMut`: the socket reads into its unfilled part.
                <$stream>::try_read_buf(self, out)
            }
            #[inline]
            fn try_write(&self, data: &[u8]) -> io::Result<usize> {
                <$stream>::try_write(self, data)
            }
            #[inline]
            fn clear_read_ready(&self) {
                let _ = self.try_io(Interest::READABLE, || {
                    Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                });
            }
            fn shutdown_write(&self) -> io::Result<()> {
                socket2::SockRef::from(self).shutdown(std::net::Shutdown::Write)
            }
            fn reset_on_close(&self) -> io::Result<()> {
                socket2::SockRef::from(self).set_linger(Some(std::time::Duration::ZERO))
            }
        }
    };
}

socket_transport!(TcpStream);
socket_transport!(UnixStream);

/// The stream of one connection: a TCP or Unix socket served directly, or any other
/// [`Transport`].
pub enum Stream {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A Unix domain socket connection.
    Unix(UnixStream),
    /// Any other transport (TLS, a test double over a socket pair...).
    Other(Box<dyn Transport>),
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stream::Tcp(s) => f.debug_tuple("Tcp").field(s).finish(),
            Stream::Unix(s) => f.debug_tuple("Unix").field(s).finish(),
            Stream::Other(_) => f.write_str("Other(..)"),
        }
    }
}

/// Runs `$call` with `$s` bound to the stream's own transport: TCP and Unix sockets statically
/// (so generic code called here is compiled for each, with tokio's socket calls inlined), any
/// other transport as `&dyn Transport`. The driver dispatches once per operation this way, not
/// once per system call.
macro_rules! on_stream {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Stream::Tcp($s) => $call,
            Stream::Unix($s) => $call,
            Stream::Other($s) => {
                let $s = &**$s;
                $call
            }
        }
    };
}

pub(crate) use on_stream;

impl Transport for Stream {
    #[inline]
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_stream!(self, s => Transport::poll_read_ready(s, cx))
    }
    #[inline]
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_stream!(self, s => Transport::poll_write_ready(s, cx))
    }
    #[inline]
    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize> {
        on_stream!(self, s => Transport::try_read_buf(s, buf))
    }
    #[inline]
    fn try_read_into(&self, out: &mut ReadBuf<'_>) -> io::Result<usize> {
        on_stream!(self, s => Transport::try_read_into(s, out))
    }
    #[inline]
    fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        on_stream!(self, s => Transport::try_write(s, data))
    }
    #[inline]
    fn clear_read_ready(&self) {
        on_stream!(self, s => Transport::clear_read_ready(s))
    }
    fn shutdown_write(&self) -> io::Result<()> {
        on_stream!(self, s => Transport::shutdown_write(s))
    }
    fn reset_on_close(&self) -> io::Result<()> {
        on_stream!(self, s => Transport::reset_on_close(s))
    }
    fn http2(&self) -> bool {
        matches!(self, Stream::Other(t) if t.http2())
    }
}

impl Stream {
    /// Waits until the stream is readable (tokio's own wait for its sockets).
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
            Stream::Other(t) => std::future::poll_fn(|cx| t.poll_read_ready(cx)).await,
        }
    }

    /// Waits until the stream is writable (tokio's own wait for its sockets).
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
            Stream::Other(t) => std::future::poll_fn(|cx| t.poll_write_ready(cx)).await,
        }
    }
}

/// A connection as the accept loop got it, before the [`Acceptor`] step.
#[derive(Debug)]
pub struct Accepted {
    /// The socket.
    pub stream: Stream,
    /// The peer's address; `0.0.0.0:0` for a Unix socket (whose peers have no IP address).
    pub peer: SocketAddr,
}

/// What an [`Acceptor`] made of a connection.
pub enum Accept {
    /// Ready to serve now (plain sockets, a stream marked HTTP/2): protocol selection starts the
    /// driver at once, in the connection's task.
    Ready(Stream),
    /// Ready after this future (a TLS handshake), which runs in the connection's own task so the
    /// accept loop never waits for a client. An error closes the connection silently.
    Handshake(Pin<Box<dyn Future<Output = io::Result<Stream>>>>),
    /// Like `Handshake`, and the future also names the connection's real client when it
    /// learnt it (the PROXY protocol's source address, see
    /// [`ProxyProtocolAcceptor`](crate::proxy_protocol::ProxyProtocolAcceptor)): requests then
    /// report it as their peer.
    Proxied(ProxiedFuture),
}

/// The future of [`Accept::Proxied`]: the stream to serve, and the real client if known.
pub type ProxiedFuture = Pin<Box<dyn Future<Output = io::Result<(Stream, Option<SocketAddr>)>>>>;

/// The step between accepting a connection and serving it (see the module documentation).
/// One acceptor value is shared by all the connections of a worker.
pub trait Acceptor: Clone + Send + 'static {
    /// Turns an accepted connection into the stream to serve.
    fn accept(&self, conn: Accepted) -> Accept;
}

/// The identity [`Acceptor`]: plain TCP and Unix sockets are served as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainAcceptor;

impl Acceptor for PlainAcceptor {
    #[inline]
    fn accept(&self, conn: Accepted) -> Accept {
        Accept::Ready(conn.stream)
    }
}
