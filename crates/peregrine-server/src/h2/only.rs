//! The HTTP/2-only acceptor for cleartext listeners (h2c with prior knowledge).

use crate::transport::Stream;
use bytes::BytesMut;
use std::task::Poll;

/// An [`Acceptor`](crate::transport::Acceptor) for a cleartext listener that speaks only HTTP/2
/// (h2c with prior knowledge, like h2o's or Go's h2c-only servers): every connection goes to the
/// HTTP/2 driver, and one that does not start with the preface gets `GOAWAY(PROTOCOL_ERROR)`.
/// (A listener with the default acceptor serves HTTP/1.1 and recognises the preface itself.)
#[derive(Debug, Clone, Copy, Default)]
pub struct Http2OnlyAcceptor;

impl crate::transport::Acceptor for Http2OnlyAcceptor {
    /// Ready at once (there is no handshake): protocol selection, which every accept path goes
    /// through, sees the stream's `http2` mark.
    fn accept(&self, conn: crate::transport::Accepted) -> crate::transport::Accept {
        crate::transport::Accept::Ready(Stream::Other(Box::new(Http2Only(conn.stream))))
    }
}

/// A stream marked as HTTP/2 (see [`Http2OnlyAcceptor`]); everything else is the stream's own.
struct Http2Only(Stream);

impl crate::transport::Transport for Http2Only {
    fn poll_read_ready(&self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.poll_read_ready(cx)
    }
    fn poll_write_ready(&self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.poll_write_ready(cx)
    }
    fn try_read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        self.0.try_read_buf(buf)
    }
    fn try_read_into(&self, out: &mut tokio::io::ReadBuf<'_>) -> std::io::Result<usize> {
        self.0.try_read_into(out)
    }
    fn try_write(&self, data: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(data)
    }
    fn clear_read_ready(&self) {
        self.0.clear_read_ready()
    }
    fn shutdown_write(&self) -> std::io::Result<()> {
        self.0.shutdown_write()
    }
    fn reset_on_close(&self) -> std::io::Result<()> {
        self.0.reset_on_close()
    }
    fn http2(&self) -> bool {
        true
    }
}
