//! An HTTP/2 stream as a byte stream, after an RFC 8441 extended CONNECT was accepted: the
//! stream's DATA frames both ways carry the tunnelled protocol (WebSocket, or whatever the
//! handler's upgrade speaks), within the stream's flow-control windows. A write the client
//! holds up (its window closed) waits within the write rules, as a response body's DATA do;
//! past them the stream is reset (`CANCEL`) and the write fails with `TimedOut`.

use super::limits::{Pace, WriteRules};
use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `AsyncRead` over the client's DATA frames, `AsyncWrite` as DATA frames to it. Shut down (or
/// dropped) it ends the stream with an empty DATA frame carrying `END_STREAM`.
pub(crate) struct Tunnel {
    recv: RecvStream,
    send: SendStream<Bytes>,
    /// The rest of the last DATA frame read (its window already given back).
    pending: Bytes,
    ended: bool,
    rules: WriteRules,
    /// The waits for the client since it last kept up.
    pace: Pace,
    /// The wait under way: since when, and its deadline (boxed: only a blocked write has one).
    wait: Option<(Instant, Pin<Box<Sleep>>)>,
}

impl Tunnel {
    pub(crate) fn new(recv: RecvStream, send: SendStream<Bytes>, rules: WriteRules) -> Self {
        Tunnel {
            recv,
            send,
            pending: Bytes::new(),
            ended: false,
            rules,
            pace: Pace::default(),
            wait: None,
        }
    }

    /// Send capacity, or `Pending` within the write rules; past them the stream is reset.
    fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<usize>>> {
        match self.send.poll_capacity(cx) {
            Poll::Ready(got) => {
                match self.wait.take() {
                    Some((since, _)) => {
                        self.pace.waited = self.pace.waited.saturating_add(since.elapsed());
                    }
                    // Granted without waiting: the client keeps up, the account starts over.
                    None => self.pace = Pace::default(),
                }
                if let Some(Ok(n)) = &got {
                    self.pace.sent = self.pace.sent.saturating_add(*n as u64);
                }
                Poll::Ready(got.map(|r| r.map_err(to_io)))
            }
            Poll::Pending => {
                let (pace, rules) = (self.pace, self.rules);
                let (_, timer) = self.wait.get_or_insert_with(|| {
                    let now = Instant::now();
                    (
                        now,
                        Box::pin(tokio::time::sleep_until(pace.deadline(now, &rules))),
                    )
                });
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
                self.ended = true;
                // Reset drops what h2 queued for the stream.
                self.send.send_reset(h2::Reason::CANCEL);
                tracing::debug!("HTTP/2 tunnel stalled past the write timeout; reset");
                Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "write timeout",
                ))))
            }
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
        loop {
            match ready!(self.poll_capacity(cx)) {
                // Capacity taken back (a SETTINGS change) before this write: wait again.
                Some(Ok(0)) => continue,
                Some(Ok(granted)) => {
                    let n = granted.min(buf.len());
                    self.send
                        .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                        .map_err(to_io)?;
                    return Poll::Ready(Ok(n));
                }
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
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
