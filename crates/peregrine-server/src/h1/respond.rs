//! Answering: a handler's response encoded into the output buffer (head through the worker's
//! head cache and the codec's response module, small bodies copied), large and streamed bodies
//! written after it (chunked through the codec's encoder), error responses, and the keep-alive
//! decision each of these may change.

use super::body::DRAIN_MAX;
use super::head::{BodyOut, HeadWritten, TextFields};
use super::io::BodyState;
use super::Conn;
use crate::response::{Response, ResponseBody};
use peregrine_codec::response::{
    check_field, is_engine_owned, is_final_status, sends_body, write_content_length, BodyKind,
    ChunkedEncoder, CloseReason, Framing, KeepAlive, SizedBody, CONNECTION_CLOSE, CONTINUE_100,
    INVALID_RESPONSE_REASON,
};
use peregrine_codec::Version;
use std::future::{poll_fn, Future};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Poll;

/// Bodies of at most this size are copied into the output buffer (one write per batch); larger
/// ones are written straight from their `Bytes` after the head, never copied.
const COPY_BODY_MAX: usize = 16 * 1024;

/// What became of a handler's response (see [`Conn::answer`]).
pub(super) enum Answered {
    /// Encoded whole into the output buffer.
    Encoded,
    /// Head encoded; this body is still to be written (large or streamed).
    Rest(ResponseBody),
    /// Not sent: an error response was encoded instead and the connection must close.
    Refused,
}

/// Drops what is left of a response once [`Conn::answer`] took it apart: normally nothing (the
/// field list was recycled, a small body copied). A body that owns nothing is recognised
/// inline; left to the response's drop glue it cost an out-of-line `drop_in_place` call per
/// request.
#[inline(always)]
pub(super) fn drop_answered(resp: Response) {
    let Response { headers, body, .. } = resp;
    drop(headers);
    if matches!(body, ResponseBody::Empty | ResponseBody::Static(_)) {
        // Owns nothing.
        std::mem::forget(body);
    } else {
        drop_body(body);
    }
}

/// The rare case of [`drop_answered`]: a body that was not sent (HEAD, 204/304, an error) or
/// still owns its buffer.
#[inline(never)]
fn drop_body(body: ResponseBody) {
    drop(body);
}

impl Conn {
    /// Appends an error response (small text body with the reason, `Connection: close`).
    pub(super) fn push_error(&self, status: u16, reason: &str, head_only: bool) {
        self.push_error_for(status, reason, head_only, false);
    }

    /// [`Conn::push_error`] in place of the service's own response (`replaced`, told to the
    /// events: a log that wrote the service's answer already has a line for this request).
    fn push_error_for(&self, status: u16, reason: &str, head_only: bool, replaced: bool) {
        // Every response the engine makes itself passes here: one branch when nobody listens.
        if let Some(events) = &self.shared.events {
            let bytes_out = if head_only {
                0
            } else {
                reason.len() as u64 + 1
            };
            let peer = self.peer.get();
            crate::events::emit_rejection(&**events, status, reason, peer, bytes_out, replaced);
        }
        let mut io = self.io.borrow_mut();
        let out = &mut io.out;
        self.shared
            .proto
            .head_cache
            .borrow()
            .write_prefix(out, status, true);
        out.extend_from_slice(b"Content-Type: text/plain; charset=utf-8\r\n");
        write_content_length(out, reason.len() as u64 + 1);
        out.extend_from_slice(CONNECTION_CLOSE);
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(reason.as_bytes());
            out.push(b'\n');
        }
    }

    /// Everything done with a handler's response before the driver goes on: the interim
    /// `100 Continue` a streamed response may need, the check that the request body arrived
    /// intact, and the encoding ([`Conn::start_response`]). Synchronous, and given the response
    /// where the handler returned it (see the poll in `busy`).
    pub(super) fn answer(
        &self,
        resp: &mut Response,
        keep_alive: &mut KeepAlive,
        version: Version,
        head_request: bool,
    ) -> Answered {
        // The common case, a request without a body (or with all of it read), needs none of
        // what follows the check: one borrow and one branch.
        if !matches!(self.io.borrow().body, BodyState::Done) {
            if let Some(refused) = self.check_request_body(resp, keep_alive, head_request) {
                return refused;
            }
        }
        match self.start_response(resp, keep_alive, version, head_request) {
            Some(rest) => Answered::Rest(rest),
            None => Answered::Encoded,
        }
    }

    /// [`Conn::answer`] when the request body is not done: the interim `100 Continue` a
    /// streamed response may need, and whether the rest of the body can be skipped to keep the
    /// connection. `Some` if an error response was encoded instead of `resp`.
    #[inline(never)]
    fn check_request_body(
        &self,
        resp: &Response,
        keep_alive: &mut KeepAlive,
        head_request: bool,
    ) -> Option<Answered> {
        // A streamed response may read the body while it is sent: `100 Continue` goes first.
        if matches!(
            resp.body,
            ResponseBody::Stream(_) | ResponseBody::SizedStream { .. }
        ) && !head_request
        {
            let mut io = self.io.borrow_mut();
            if io.continue_pending && !matches!(io.body, BodyState::Done) {
                io.continue_pending = false;
                io.out.extend_from_slice(CONTINUE_100);
            }
        }
        // Decide now whether the rest of the body can be skipped to keep the connection.
        let (body_failed, close) = {
            let io = self.io.borrow();
            match &io.body {
                BodyState::Done => (None, None),
                BodyState::Failed(e) => (Some(e.clone()), Some(CloseReason::BodyFailed)),
                // The client waits for `100 Continue`: it may never send the body to skip.
                _ if io.continue_pending => (None, Some(CloseReason::BodyUnread)),
                BodyState::Length(rem) if *rem > DRAIN_MAX => (None, Some(CloseReason::BodyUnread)),
                BodyState::Length(_) | BodyState::Chunked(..) => (None, None),
            }
        };
        if let Some(reason) = close {
            keep_alive.disable(reason);
        }
        if let Some(err) = body_failed {
            if resp.status < 400 {
                // The handler answered success on a body that did not arrive intact.
                self.push_error_for(err.status(), &err.to_string(), head_request, true);
                return Some(Answered::Refused);
            }
        }
        None
    }

    /// Encodes `resp` into the output buffer: the head, and the body when it is small. Returns
    /// the body still to be written (large or streamed) by [`Conn::finish_response`]. Kept
    /// synchronous so the common case adds no state to the per-batch future.
    fn start_response(
        &self,
        resp: &mut Response,
        keep_alive: &mut KeepAlive,
        version: Version,
        head_request: bool,
    ) -> Option<ResponseBody> {
        // A handler may not send 1xx (the engine sends `100 Continue` itself) or non-codes: the
        // codec's `wire_status` states the whole rule, for observers.
        let status = if is_final_status(resp.status) {
            resp.status
        } else {
            0
        };
        let body = match &resp.body {
            ResponseBody::Empty => BodyKind::Empty,
            ResponseBody::Full(b) => BodyKind::Full(b.len() as u64),
            ResponseBody::Static(b) => BodyKind::Full(b.len() as u64),
            ResponseBody::Stream(_) => BodyKind::Stream,
            ResponseBody::SizedStream { len, .. } | ResponseBody::File { len, .. } => {
                BodyKind::Sized(*len)
            }
            ResponseBody::Upgrade(_) => BodyKind::Empty,
        };
        if Framing::delimits_by_close(status, body, version) {
            keep_alive.disable(CloseReason::CloseDelimited);
        }
        let framing = Framing::choose(status, body, version);
        // Looked at before the fields are recycled; for streamed bodies only.
        let event_stream = matches!(body, BodyKind::Stream) && is_event_stream(&resp.headers);
        let sends_body = sends_body(status, head_request);
        // A small `'static` body goes to the head memo, which may append it with the head.
        let static_body: &'static [u8] = match resp.body {
            ResponseBody::Static(b) if sends_body && b.len() <= COPY_BODY_MAX => b,
            _ => &[],
        };
        {
            let mut io = self.io.borrow_mut();
            let out = &mut io.out;
            let written = self.shared.proto.head_cache.borrow_mut().write_head(
                out,
                status,
                &resp.headers,
                keep_alive,
                version,
                BodyOut {
                    framing,
                    bytes: static_body,
                },
            );
            let (body_written, text_fields) = match written {
                HeadWritten::Head(text) => (false, text),
                HeadWritten::HeadAndBody(text) => (true, text),
                HeadWritten::Refused => (false, TextFields::Unknown),
            };
            if written == HeadWritten::Refused {
                drop(io);
                // A 101 is not a status handlers may send, except to switch protocols: only
                // this (already failing) path looks for it, so other responses pay nothing.
                if let Some(upgrade) = self.start_upgrade(resp, version) {
                    return Some(upgrade);
                }
                // A refused field was logged where it was found, by the head encoder.
                if status == 0 {
                    tracing::error!(status = resp.status, "handler returned an invalid status");
                }
                keep_alive.disable(CloseReason::Error);
                self.push_error_for(500, INVALID_RESPONSE_REASON, head_request, true);
                return None;
            }
            let fields = std::mem::take(&mut resp.headers);
            if text_fields == TextFields::Yes {
                crate::response::recycle_text_fields(fields);
            } else {
                crate::response::recycle_fields(fields);
            }
            if !sends_body || body_written {
                return None;
            }
            match &resp.body {
                ResponseBody::Empty => return None,
                ResponseBody::Static(b) if b.len() <= COPY_BODY_MAX => {
                    io.out.extend_from_slice(b);
                    return None;
                }
                ResponseBody::Full(b) if b.len() <= COPY_BODY_MAX => {
                    io.out.extend_from_slice(b);
                    drop(io);
                    // The copied body goes here, inline (the `Bytes` vtable call only): left
                    // in the response, it was dropped by an out-of-line `drop_in_place` call.
                    if let ResponseBody::Full(b) =
                        std::mem::replace(&mut resp.body, ResponseBody::Empty)
                    {
                        drop(b);
                    }
                    return None;
                }
                _ => {}
            }
        }
        // Off the hot path (large and streamed bodies only): an upgrade function with a status
        // other than 101 (encoded above like any response, with no body) is dropped, not run.
        if matches!(resp.body, ResponseBody::Upgrade(_)) {
            return None;
        }
        if matches!(resp.body, ResponseBody::Stream(_)) {
            let mut io = self.io.borrow_mut();
            io.event_stream = event_stream;
            // Trailers go in the last chunk, to a client that accepts them (RFC 9112 §7.1.2);
            // a body of known length has no place for them: they are dropped with it.
            io.trailers = if version == Version::Http11 && io.te_trailers {
                resp.take_trailers()
            } else {
                None
            };
        }
        Some(std::mem::replace(&mut resp.body, ResponseBody::Empty))
    }

    /// For a 101 with an upgrade function over HTTP/1.1, once the request body is complete:
    /// writes the head and returns the function (as the "rest" of the response, which the
    /// driver recognises). `None` otherwise (the caller answers 500).
    fn start_upgrade(&self, resp: &mut Response, version: Version) -> Option<ResponseBody> {
        if resp.status != 101 || !matches!(resp.body, ResponseBody::Upgrade(_)) {
            return None;
        }
        let mut io = self.io.borrow_mut();
        if version != Version::Http11 || !matches!(io.body, BodyState::Done) {
            return None;
        }
        let out = &mut io.out;
        let mark = out.len();
        out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n");
        for (name, value) in &resp.headers {
            // Every field is checked, the dropped ones too (the rule of `check_field`).
            if check_field(name.as_bytes(), value).is_err() {
                out.truncate(mark);
                return None;
            }
            // `Connection` is the engine's (written below); a length or coding has no meaning.
            if is_engine_owned(name.as_bytes()) {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Connection: upgrade\r\n\r\n");
        crate::response::recycle_fields(std::mem::take(&mut resp.headers));
        Some(std::mem::replace(&mut resp.body, ResponseBody::Empty))
    }

    /// Writes what [`Conn::start_response`] left: a large body from its own buffer, or a stream.
    pub(super) async fn finish_response(
        &self,
        body: ResponseBody,
        version: Version,
    ) -> io::Result<()> {
        match body {
            // An upgrade is taken by the driver before this; nothing to write for it here.
            ResponseBody::Empty | ResponseBody::Upgrade(_) => Ok(()),
            ResponseBody::Full(b) => self.write_direct(&b).await,
            ResponseBody::Static(b) => self.write_direct(b).await,
            ResponseBody::Stream(s) => {
                // Taken now: whatever becomes of the body, the connection keeps none.
                let trailers = self.io.borrow_mut().trailers.take();
                self.finish_stream(s, version == Version::Http11, None, trailers)
                    .await
            }
            ResponseBody::SizedStream { len, stream } => {
                self.finish_stream(stream, false, Some(SizedBody::new(len)), None)
                    .await
            }
            ResponseBody::File { file, offset, len } => {
                Box::pin(self.write_file(&file, offset, len)).await
            }
        }
    }

    /// Writes a stream (see [`Conn::write_stream`]), then drops it.
    async fn finish_stream(
        &self,
        mut s: crate::response::BodyStream,
        chunked: bool,
        sized: Option<SizedBody>,
        trailers: Option<Box<crate::trailers::PendingTrailers>>,
    ) -> io::Result<()> {
        let written = Box::pin(self.write_stream(&mut s, chunked, sized, trailers)).await;
        // A panic dropping the stream is caught: whatever was written stays,
        // and the connection closes.
        if catch_unwind(AssertUnwindSafe(move || drop(s))).is_err() {
            tracing::error!("response body stream panicked when dropped");
            return Err(io::Error::other("body stream panicked on drop"));
        }
        written
    }

    /// Streams a body, chunked (or raw for HTTP/1.0, or raw and held to its announced length
    /// when `sized`), flushing whenever the stream has nothing ready or the pending output
    /// passes the bound, so memory stays bounded whatever its size. A chunked body ends with
    /// `trailers`, if any.
    async fn write_stream(
        &self,
        s: &mut crate::response::BodyStream,
        chunked: bool,
        mut sized: Option<SizedBody>,
        mut trailers: Option<Box<crate::trailers::PendingTrailers>>,
    ) -> io::Result<()> {
        let limit = self
            .shared
            .config
            .limits
            .max_pending_output
            .max(COPY_BODY_MAX);
        let mut encoder = ChunkedEncoder::new();
        // An event stream never ends by itself: it ends (cleanly) when shutdown starts, so
        // that graceful shutdown does not wait `shutdown_timeout` for it.
        let event_stream = std::mem::take(&mut self.io.borrow_mut().event_stream);
        let mut shutdown = std::pin::pin!(async {
            if event_stream {
                self.shared.shutdown_started().await;
            } else {
                std::future::pending::<()>().await;
            }
        });
        loop {
            // Take what the stream has ready; when it has nothing, first send what is pending
            // (the client should not wait for bytes we hold), then wait for the stream, for
            // the client's close (the stream is dropped then: an SSE sender sees its client
            // leave at once, not at its next write) and, for an event stream, for shutdown.
            let step =
                poll_fn(
                    |cx| match catch_unwind(AssertUnwindSafe(|| s.as_mut().poll_next(cx))) {
                        Ok(Poll::Ready(item)) => Poll::Ready(Step::Item(item)),
                        Ok(Poll::Pending) if self.pending_output() > 0 => Poll::Ready(Step::Flush),
                        Ok(Poll::Pending) if self.poll_peer_gone(cx) => Poll::Ready(Step::PeerGone),
                        Ok(Poll::Pending) => match shutdown.as_mut().poll(cx) {
                            Poll::Ready(()) => Poll::Ready(Step::Item(None)),
                            Poll::Pending => Poll::Pending,
                        },
                        Err(_) => Poll::Ready(Step::Panicked),
                    },
                )
                .await;
            let item = match step {
                Step::Item(item) => item,
                Step::Flush => {
                    self.flush().await?;
                    continue;
                }
                Step::PeerGone => {
                    tracing::debug!("client closed the connection during a streamed response");
                    return Err(io::ErrorKind::ConnectionAborted.into());
                }
                Step::Panicked => {
                    tracing::error!("response body stream panicked");
                    return Err(io::Error::other("body stream panicked"));
                }
            };
            match item {
                None => {
                    if chunked {
                        match trailers.take() {
                            None => encoder.end(&mut self.io.borrow_mut().out),
                            Some(pending) => self.end_with_trailers(&mut encoder, *pending).await?,
                        }
                    }
                    if let Some(sized) = sized {
                        // Fewer bytes than `Content-Length` announced: the connection closes.
                        sized.end().map_err(|e| {
                            tracing::warn!(error = %e, "sized response body ended early");
                            io::Error::new(io::ErrorKind::UnexpectedEof, e)
                        })?;
                    }
                    return Ok(());
                }
                Some(Err(e)) => {
                    // The response cannot be completed: the client must see it truncated.
                    tracing::warn!(error = %e, "response body stream failed");
                    return Err(e);
                }
                Some(Ok(data)) if data.is_empty() => {}
                Some(Ok(data)) => {
                    if let Some(sized) = &mut sized {
                        // More than announced: nothing of this piece is sent; the connection
                        // closes after what was (the client sees a short body, not a corrupt
                        // next response).
                        sized.piece(data.len()).map_err(|e| {
                            tracing::warn!(error = %e, "sized response body overran");
                            io::Error::other(e)
                        })?;
                    }
                    let small = data.len() <= COPY_BODY_MAX;
                    {
                        let mut io = self.io.borrow_mut();
                        if chunked {
                            encoder.chunk_head(&mut io.out, data.len());
                        }
                        if small {
                            io.out.extend_from_slice(&data);
                            if chunked {
                                encoder.chunk_tail(&mut io.out);
                            }
                        }
                    }
                    if !small {
                        self.write_direct(&data).await?;
                        if chunked {
                            encoder.chunk_tail(&mut self.io.borrow_mut().out);
                        }
                    }
                    if self.pending_output() > limit {
                        self.flush().await?;
                    }
                }
            }
        }
    }
}

impl Conn {
    /// Ends a chunked body with the response's trailers, once they are known. A trailers
    /// future that panicked leaves the body unterminated: the connection closes and the
    /// client sees it cut short, not complete.
    async fn end_with_trailers(
        &self,
        encoder: &mut ChunkedEncoder,
        pending: crate::trailers::PendingTrailers,
    ) -> io::Result<()> {
        let Some(trailers) = pending.resolve().await else {
            return Err(io::Error::other("response trailers future panicked"));
        };
        let fields: Vec<(&[u8], &[u8])> = trailers.iter().map(|(n, v)| (n.as_bytes(), v)).collect();
        let mut io = self.io.borrow_mut();
        // `Trailers` refused what the encoder refuses when the fields were added.
        if let Err(e) = encoder.end_with_trailers(&mut io.out, &fields) {
            tracing::error!(error = %e, "response trailers refused by the encoder; sent none");
            encoder.end(&mut io.out);
        }
        Ok(())
    }
}

/// Whether a response's fields say `Content-Type: text/event-stream`.
#[inline(never)]
fn is_event_stream(
    fields: &[(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, [u8]>,
    )],
) -> bool {
    fields.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("content-type")
            && v.len() >= 17
            && v[..17].eq_ignore_ascii_case(b"text/event-stream")
    })
}

/// What a streamed body's writer does next (see [`Conn::write_stream`]).
enum Step {
    /// The stream's next item (`None`: its end, or shutdown ending an event stream).
    Item(Option<io::Result<bytes::Bytes>>),
    /// The stream has nothing ready: send what is pending first.
    Flush,
    /// The client closed or reset the connection.
    PeerGone,
    /// The stream panicked.
    Panicked,
}
