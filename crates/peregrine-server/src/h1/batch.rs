//! A batch of requests: every complete request at the start of the read buffer parsed, handed
//! to the service, polled and encoded in one synchronous loop ([`Batch::answer_ready`]), the
//! request taken from the buffer by [`take_request`]. The `async` driver around it is `busy` in
//! `mod.rs`.

use super::body::ConnBody;
use super::io::BodyState;
use super::respond::{drop_answered, Answered};
use super::Conn;
#[cfg(feature = "http2")]
use crate::transport::Stream;
use crate::{Body, Request, Service};
use bytes::Buf;
use peregrine_codec::response::{CloseReason, KeepAlive};
use peregrine_codec::{BodyFraming, ChunkedDecoder, Expectation, Method, Parsed, Version};
use std::future::Future;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

/// What happens to a connection after the driver stops.
pub(super) enum Close {
    /// Flush what is pending (best effort) and close.
    Now,
    /// Flush, half-close, discard input for a while, close (see `io.rs`, `LINGER_TIME`).
    Linger,
    /// Flush the 101, then run the handler's function (kept in the connection's `Io`, so this
    /// enum and the connection's future keep their size) on the raw connection.
    Upgrade,
    /// The client speaks HTTP/2 (its first bytes were the preface): hand over to that driver.
    #[cfg(feature = "http2")]
    Http2,
}

/// The request being answered: what the driver needs of it once its handler answered.
#[derive(Clone, Copy)]
pub(super) struct Current {
    pub(super) version: Version,
    pub(super) head_request: bool,
    pub(super) keep_alive: KeepAlive,
}

/// Where [`Batch::answer_ready`] stopped.
pub(super) enum Stop {
    /// No complete request is left in the buffer.
    NeedMore,
    /// The connection must close (a request was refused, or the client speaks HTTP/2).
    Close(Close),
    /// The client closed the connection while the current request's handler was working
    /// (and [`ServerConfig::half_close`](crate::ServerConfig::half_close) is off): the
    /// handler's future is to be dropped, and the connection closed.
    ClientGone,
    /// The current request was answered (or its handler panicked: the flag), and what follows
    /// needs the driver: a body still to write or to skip, a closing connection, a full output
    /// buffer. `None`: the handler panicked before it answered.
    Answered(Option<Answered>, bool),
}

/// The requests of one batch, answered by [`Batch::answer_ready`].
pub(super) struct Batch<'a, S> {
    service: &'a S,
    conn: &'a Rc<Conn>,
    served: &'a mut u32,
    peer: SocketAddr,
    /// The request being answered (its handler may be pending).
    pub(super) cur: Current,
    /// Whether a request was taken from the buffer.
    pub(super) took: bool,
}

impl<'a, S: Service> Batch<'a, S> {
    /// A batch on `conn` that has taken no request yet.
    #[inline(always)]
    pub(super) fn new(
        service: &'a S,
        conn: &'a Rc<Conn>,
        served: &'a mut u32,
        peer: SocketAddr,
    ) -> Self {
        Batch {
            service,
            conn,
            served,
            peer,
            cur: Current {
                version: Version::Http11,
                head_request: false,
                keep_alive: KeepAlive::Busy,
            },
            took: false,
        }
    }

    /// Answers the complete requests at the start of the read buffer, one after the other:
    /// polls the pending handler's future in `slot` if there is one, then parses, calls, polls
    /// and encodes the next requests while each handler answers at its first poll and nothing
    /// else is to be done between them (the common case of a pipelined batch). One synchronous
    /// loop in one `catch_unwind`, with no `await` per request, so the per-request values stay
    /// in registers rather than in the per-batch future; the service's future is polled in this
    /// one place only (two call sites kept the handler from being inlined). A handler's future
    /// lives in `slot` (pinned in the per-batch future), so it can stay there when `Pending`.
    /// The response is encoded where the handler's poll returned it (see docs/performance.md).
    #[inline(always)]
    pub(super) fn answer_ready(
        &mut self,
        cx: &mut Context<'_>,
        mut slot: Pin<&mut Option<S::Future>>,
    ) -> Poll<Stop> {
        let (service, conn, peer) = (self.service, self.conn, self.peer);
        let served = &mut *self.served;
        let max_pending = conn.shared.config.limits.max_pending_output;
        // Read once per poll, not per request: the flag is set only by the worker's main task,
        // which cannot run while this synchronous loop does.
        let shutting_down = conn.shared.is_shutting_down();
        let mut cur = self.cur;
        let mut took = false;
        let mut answered: Option<Answered> = None;
        let run = catch_unwind(AssertUnwindSafe(|| loop {
            if slot.is_none() {
                let (req, version, head_request, keep_alive) =
                    match take_request(conn, served, peer) {
                        Taken::Request(r) => r,
                        Taken::NeedMore => return Some(Stop::NeedMore),
                        Taken::Refused => return Some(Stop::Close(Close::Linger)),
                        #[cfg(feature = "http2")]
                        Taken::Http2 => return Some(Stop::Close(Close::Http2)),
                    };
                took = true;
                cur = Current {
                    version,
                    head_request,
                    keep_alive,
                };
                slot.set(Some(service.call(req)));
            }
            let Some(fut) = slot.as_mut().as_pin_mut() else {
                unreachable!("the future was just set")
            };
            match fut.poll(cx) {
                Poll::Ready(mut r) => {
                    if shutting_down {
                        cur.keep_alive.disable(CloseReason::ShuttingDown);
                    }
                    answered = Some(conn.answer(
                        &mut r,
                        &mut cur.keep_alive,
                        cur.version,
                        cur.head_request,
                    ));
                    // The handler's future (and the request it may hold) goes now, inside the
                    // `catch_unwind`: a panic in its drop is caught.
                    slot.set(None);
                    drop_answered(r);
                }
                Poll::Pending => return None,
            }
            // One borrow for the checks of the common case: encoded whole, connection kept, no
            // body left, output below the bound.
            let go_on =
                matches!(answered, Some(Answered::Encoded)) && cur.keep_alive.is_open() && {
                    let io = conn.io.borrow();
                    matches!(io.body, BodyState::Done) && io.out.len() - io.out_pos <= max_pending
                };
            if !go_on {
                return Some(Stop::Answered(answered.take(), false));
            }
            answered = None;
        }));
        self.cur = cur;
        self.took |= took;
        match run {
            Ok(Some(stop)) => Poll::Ready(stop),
            Ok(None) => {
                // Meanwhile, keep writing earlier responses of the batch.
                conn.poll_write_progress(cx);
                // And watch for the client leaving (end of input or an error; not while the
                // handler has the request body to read, which sees the end itself): nothing
                // would read the answer, so the handler's work stops there.
                if !conn.shared.config.half_close && conn.poll_peer_gone(cx) {
                    return Poll::Ready(Stop::ClientGone);
                }
                Poll::Pending
            }
            Err(_) => Poll::Ready(Stop::Answered(answered, true)),
        }
    }
}

/// What [`take_request`] found at the start of the read buffer.
enum Taken {
    /// A request to answer: the request, its version, whether it is HEAD, and the keep-alive
    /// state its head and the connection's request count call for.
    Request((Request, Version, bool, KeepAlive)),
    /// No complete head (yet).
    NeedMore,
    /// An error response was queued; the connection closes.
    Refused,
    /// The connection's first bytes are the HTTP/2 preface (h2c with prior knowledge).
    #[cfg(feature = "http2")]
    Http2,
}

/// Parses the head at the start of the read buffer and, for a complete one, builds the request
/// (its body wired to the connection), all under one borrow of the connection and of the
/// worker's field table. The codec writes the head straight into the request's recycled box and
/// the few values needed here are read from it in place (see docs/performance.md).
#[inline(always)]
fn take_request(conn: &Rc<Conn>, served: &mut u32, peer: SocketAddr) -> Taken {
    let cfg = &conn.shared.config;
    let mut io = conn.io.borrow_mut();
    if io.rbuf.is_empty() {
        return Taken::NeedMore;
    }
    let mut table = conn.shared.proto.fields.borrow_mut();
    let mut pending = Request::pending();
    let found = match pending.parse(&io.rbuf, &cfg.limits.parser, &mut table) {
        Ok(Parsed::Complete(h)) => Ok((
            h.method_kind,
            h.framing,
            h.expect,
            h.te_trailers,
            h.version,
            KeepAlive::for_request(h.version, h.connection),
            h.head_len,
            h.field_count,
        )),
        Ok(Parsed::Incomplete) => Err(None),
        Err(e) => Err(Some((e.status, e.reason))),
    };
    let (method_kind, framing, expect, te_trailers, version, mut keep_alive, head_len, field_count) =
        match found {
            Ok(values) => values,
            Err(None) => {
                pending.give_back();
                return Taken::NeedMore;
            }
            Err(Some((status, reason))) => {
                pending.give_back();
                // `PRI * HTTP/2.0` is refused as an HTTP version; as a connection's first bytes it
                // is the HTTP/2 preface. Only on this error path, so HTTP/1.1 pays nothing.
                #[cfg(feature = "http2")]
                if status == 505
                    && *served == 0
                    && !matches!(conn.stream(), Stream::Other(_))
                    && crate::protocol::preface::detect_preface(&io.rbuf) != Some(false)
                {
                    return Taken::Http2;
                }
                drop((io, table));
                conn.push_error(status, reason, false);
                return Taken::Refused;
            }
        };
    let head_request = method_kind == Method::Head;
    // (A body over the size limit is refused when it is read: the limit may change first.)
    let refusal = (expect == Expectation::Unknown).then_some((417, "unsupported expectation"));
    *served = served.saturating_add(1);
    if let Some((status, reason)) = refusal {
        pending.give_back();
        drop((io, table));
        conn.push_error(status, reason, head_request);
        return Taken::Refused;
    }
    io.gen += 1;
    let gen = io.gen;
    io.te_trailers = te_trailers;
    // The body's declared length (`None`: chunked), for a request with one.
    let body_len = match framing {
        BodyFraming::None | BodyFraming::Length(0) => {
            io.body = BodyState::Done;
            // No body to wait for: no `100 Continue` either.
            io.continue_pending = false;
            // (The request's box already holds an empty body.)
            None
        }
        BodyFraming::Length(n) => {
            io.body = BodyState::Length(n);
            // The body's slow-client account starts empty.
            io.body_waited = Duration::ZERO;
            io.body_read = 0;
            io.continue_pending = expect == Expectation::Continue && version == Version::Http11;
            Some(Some(n))
        }
        BodyFraming::Chunked => {
            io.body = BodyState::Chunked(ChunkedDecoder::new(), 0);
            io.body_waited = Duration::ZERO;
            io.body_read = 0;
            io.continue_pending = expect == Expectation::Continue && version == Version::Http11;
            Some(None)
        }
    };
    // The request copies the head's bytes and fields; the read buffer moves on.
    let mut req = pending.finish(&io.rbuf, &table[..field_count], peer);
    if let Some(len) = body_len {
        let body = ConnBody {
            conn: conn.clone(),
            gen,
            content_length: len,
            trailers: None,
        };
        *req.body_mut() = Body::from_source(Box::new(body), cfg.limits.max_body_size);
    }
    io.rbuf.advance(head_len);
    if cfg
        .limits
        .max_requests_per_connection
        .is_some_and(|max| u64::from(*served) >= max)
    {
        keep_alive.disable(CloseReason::RequestLimit);
    }
    Taken::Request((req, version, head_request, keep_alive))
}
