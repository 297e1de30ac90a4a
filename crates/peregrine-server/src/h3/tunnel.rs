//! Extended CONNECT over HTTP/3 (RFC 9220, RFC 8441's mechanism): the request reaches the
//! service as HTTP/2's does (`GET` with `Upgrade: <protocol>`), and a handler's 101 upgrade
//! gets `200` and the request stream as its connection, the same [`Upgraded`] the HTTP/1.1
//! and HTTP/2 drivers hand over. The stream's DATA frames both ways carry the tunnelled bytes;
//! each side's FIN is its half-close (a read of 0 bytes, and `shutdown` of the writer).

use super::context::{answer, Ctx};
use super::respond::{self, settle, SendHalf};
use crate::extended_connect::{run_tunnel, tunnel_answer};
use crate::pace::PaceRules;
use crate::upgrade::Upgraded;
use crate::{Response, Service, Version};
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::server::RequestStream;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Bytes taken from one `write` at most: what a blocked tunnel holds besides quinn's buffer.
const MAX_WRITE: usize = 64 * 1024;

type RecvHalf = RequestStream<h3_quinn::RecvStream, Bytes>;

/// Serves an extended CONNECT for `protocol` on its stream: the service's answer, then the
/// tunnel while the handler's upgrade runs. Without
/// [`Http3Config::extended_connect`](crate::h3::Http3Config::extended_connect) the request is
/// malformed (the `:protocol` pseudo-field was not announced, RFC 9220 §3) and answered 400.
pub(super) async fn serve<S: Service>(
    head: http::Request<()>,
    protocol: &str,
    stream: RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    service: &S,
    ctx: &Ctx,
    peer: SocketAddr,
) {
    let (mut send, recv) = stream.split();
    let (parts, ()) = head.into_parts();
    let request = if ctx.extended_connect {
        crate::h2::connect_request(&parts, protocol, Version::Http3, peer)
    } else {
        None
    };
    let mut res = match request {
        Some(request) => answer(service.call(request)).await,
        None => Response::new(400),
    };
    let Some(upgrade) = tunnel_answer(&mut res) else {
        return send_answer(&mut send, res, ctx).await;
    };
    let mut head = match crate::h2::response_head(&mut res, ctx.server_name) {
        Ok(head) => head,
        Err(why) => {
            // Only a field can fail here (the status is 200 now); the handler's was 101.
            why.log(101, crate::h2::Over::Http3);
            return send_answer(&mut send, Response::new(500), ctx).await;
        }
    };
    // The tunnel's DATA is not a body of known length (RFC 9220 §3: a 2xx opens the tunnel).
    head.headers_mut().remove(http::header::CONTENT_LENGTH);
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    let sent = tokio::time::timeout(ctx.write_timeout, send.send_response(head)).await;
    if settle(&mut send, sent).is_err() {
        return;
    }
    let tunnel = Tunnel::new(recv, send, ctx.write_rules);
    run_tunnel(upgrade, Upgraded::new(tunnel, Bytes::new())).await;
}

/// Sends an answer that opens no tunnel (the receiving half, dropped after it, stops the
/// client's sending).
async fn send_answer(send: &mut SendHalf, res: Response, ctx: &Ctx) {
    let sent = respond::send(send, res, false, ctx.server_name, ctx.write_timeout).await;
    if let Err(why) = sent {
        tracing::debug!(
            ?why,
            "HTTP/3 answer to an extended CONNECT not sent completely"
        );
    }
}

/// An operation's end: the sending half back, and how it went.
type Sent = (Box<SendHalf>, io::Result<()>);

/// What the sending half is doing.
enum Sending {
    /// Ready for the next write (boxed once: every operation moves it into its future).
    Idle(Box<SendHalf>),
    /// A DATA frame or the FIN under way (h3 sends them only as futures, which own the half
    /// until they end).
    Busy(Pin<Box<dyn Future<Output = Sent>>>),
    /// Finished, or failed: every later write fails.
    Done,
}

/// `AsyncRead` over the client's DATA frames, `AsyncWrite` as DATA frames to it. A write the
/// client holds up (QUIC's flow control) waits within the write rules, as a response body's
/// DATA do; past them the stream is reset (`H3_REQUEST_CANCELLED`) and the write fails with
/// `TimedOut`. Shut down (or dropped) it sends FIN; a tunnel dropped with a write under way
/// ends with that frame cut short.
pub(super) struct Tunnel {
    recv: RecvHalf,
    /// The rest of the last DATA frame read.
    pending: Bytes,
    read_ended: bool,
    send: Sending,
    /// The FIN was started: once `send` is idle again, the stream is finished.
    finishing: bool,
    rules: PaceRules,
    /// The waits for the client since it last kept up, and the bytes written meanwhile.
    waited: Duration,
    sent: u64,
    /// Since when the operation under way has been waiting, if it had to.
    waiting_since: Option<Instant>,
}

impl Tunnel {
    fn new(recv: RecvHalf, send: SendHalf, rules: PaceRules) -> Self {
        Tunnel {
            recv,
            pending: Bytes::new(),
            read_ended: false,
            send: Sending::Idle(Box::new(send)),
            finishing: false,
            rules,
            waited: Duration::ZERO,
            sent: 0,
            waiting_since: None,
        }
    }

    /// Starts sending `data` (or the FIN, for `None`) within the write rules' deadline.
    fn start(&mut self, mut send: Box<SendHalf>, data: Option<Bytes>) {
        let deadline = self.rules.deadline(Instant::now(), self.waited, self.sent);
        self.send = Sending::Busy(Box::pin(async move {
            let outcome = match data {
                Some(data) => tokio::time::timeout_at(deadline, send.send_data(data)).await,
                None => tokio::time::timeout_at(deadline, send.finish()).await,
            };
            let result = match outcome {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(io::ErrorKind::BrokenPipe.into()),
                Err(_) => {
                    send.stop_stream(Code::H3_REQUEST_CANCELLED);
                    tracing::debug!("HTTP/3 tunnel stalled past the write timeout; reset");
                    Err(io::Error::new(io::ErrorKind::TimedOut, "write timeout"))
                }
            };
            (send, result)
        }));
    }

    /// Drives the operation under way, if any, to its end.
    fn poll_busy(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Sending::Busy(op) = &mut self.send else {
            return Poll::Ready(Ok(()));
        };
        let Poll::Ready((send, result)) = op.as_mut().poll(cx) else {
            self.waiting_since.get_or_insert_with(Instant::now);
            return Poll::Pending;
        };
        match self.waiting_since.take() {
            Some(since) => self.waited = self.waited.saturating_add(since.elapsed()),
            // Taken without waiting: the client keeps up, the account starts over.
            None => (self.waited, self.sent) = (Duration::ZERO, 0),
        }
        self.send = match result {
            Ok(()) if !self.finishing => Sending::Idle(send),
            _ => Sending::Done,
        };
        Poll::Ready(result)
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.pending.is_empty() {
            if this.read_ended {
                return Poll::Ready(Ok(()));
            }
            match ready!(this.recv.poll_recv_data(cx)) {
                Ok(Some(mut data)) => this.pending = data.copy_to_bytes(data.remaining()),
                // The client's FIN: end of file.
                Ok(None) => this.read_ended = true,
                Err(_) => {
                    this.read_ended = true;
                    return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
                }
            }
        }
        let n = this.pending.len().min(out.remaining());
        out.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        Poll::Ready(Ok(()))
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
        ready!(self.poll_busy(cx))?;
        match std::mem::replace(&mut self.send, Sending::Done) {
            Sending::Idle(send) if !self.finishing => {
                let n = buf.len().min(MAX_WRITE);
                self.start(send, Some(Bytes::copy_from_slice(&buf[..n])));
                self.sent = self.sent.saturating_add(n as u64);
                // Polled at once, so the frame goes out without waiting for a flush; if it
                // fails now, the next write fails (`BrokenPipe`).
                if let Poll::Ready(Err(e)) = self.poll_busy(cx) {
                    tracing::debug!(error = %e, "HTTP/3 tunnel write failed");
                }
                Poll::Ready(Ok(n))
            }
            _ => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_busy(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_busy(cx))?;
            match std::mem::replace(&mut self.send, Sending::Done) {
                Sending::Idle(send) if !self.finishing => {
                    self.finishing = true;
                    self.start(send, None);
                }
                // Finished (or failed before: nothing is left to shut down).
                _ => return Poll::Ready(Ok(())),
            }
        }
    }
}
