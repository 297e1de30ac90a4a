//! An HTTP/2 stream as a byte stream, after an RFC 8441 extended CONNECT was accepted: the
//! stream's DATA frames both ways carry the tunnelled protocol (WebSocket, or whatever the
//! handler's upgrade speaks), within the stream's flow-control windows.

use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `AsyncRead` over the client's DATA frames, `AsyncWrite` as DATA frames to it. Shut down (or
/// dropped) it ends the stream with an empty DATA frame carrying `END_STREAM`.
pub(crate) struct Tunnel {
    recv: RecvStream,
    send: SendStream<Bytes>,
    /// The rest of the last DATA frame read (its window already given back).
    pending: Bytes,
    ended: bool,
}

impl Tunnel {
    pub(crate) fn new(recv: RecvStream, send: SendStream<Bytes>) -> Self {
        Tunnel {
            recv,
            send,
            pending: Bytes::new(),
            ended: false,
        }
    }
}

fn to_io(e: h2::Error) -> io::Error {
    if e.is_io() {
        e.into_io()
            .unwrap_or_else(|| io::Error::other("h2 I/O error"))
    } else {
        io::Error::new(io::ErrorKind::ConnectionReset, e)
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.pending.is_empty() {
                let n = this.pending.len().min(out.remaining());
                out.put_slice(&this.pending[..n]);
                this.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            match ready!(this.recv.poll_data(cx)) {
                // END_STREAM from the client: end of file.
                None => return Poll::Ready(Ok(())),
                Some(Ok(data)) => {
                    // One frame is held at a time: its window goes back as it is taken, so the
                    // client's sending is bounded by what the tunnel's reader consumes.
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    this.pending = data;
                }
                Some(Err(e)) => return Poll::Ready(Err(to_io(e))),
            }
        }
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.ended {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        // What h2 buffers for the stream is bounded by `max_send_buffer` and the client's
        // window: capacity is granted only as it allows.
        self.send.reserve_capacity(buf.len());
        match ready!(self.send.poll_capacity(cx)) {
            Some(Ok(granted)) => {
                let n = granted.min(buf.len());
                self.send
                    .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                    .map_err(to_io)?;
                Poll::Ready(Ok(n))
            }
            Some(Err(e)) => Poll::Ready(Err(to_io(e))),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Data handed to h2 is written by the connection's own poll.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.ended {
            self.ended = true;
            self.send.send_data(Bytes::new(), true).map_err(to_io)?;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        // A tunnel whose user returned without shutting down still ends cleanly (END_STREAM,
        // not a reset).
        if !self.ended {
            let _ = self.send.send_data(Bytes::new(), true);
        }
    }
}
