//! The body of the request being answered: its framing state, decoding from the read buffer
//! (Content-Length or chunked, with the body's size limit), waiting for more with the body
//! timeouts and the minimum body rate, `100 Continue`, and draining what the handler left unread.

use super::io::{BodyState, Fill, Io};
use super::Conn;
use crate::body::{BodyError, BodySource, ChunkFuture};
use crate::pace::PaceRules;
use crate::trailers::Trailers;
use bytes::{Buf, Bytes};
use peregrine_codec::response::CONTINUE_100;
use peregrine_codec::{ChunkedDecoder, ChunkedStep};
use std::rc::Rc;
use tokio::time::Instant;

/// Largest read buffer reserved for a request body read.
const BODY_READ_MAX: usize = 64 * 1024;
/// An unread request body of at most this many bytes is read and discarded after the response so
/// the connection can be kept; a larger rest closes the connection instead.
pub(super) const DRAIN_MAX: u64 = peregrine_codec::response::UNREAD_BODY_DRAIN_MAX;

/// One decoding step of the current body.
enum Step {
    Data(Bytes),
    End,
    NeedMore,
    Err(BodyError),
}

impl Conn {
    /// Slow path (a body read would block): when this wait starts, and when it must end.
    /// `body_timeout` bounds one wait; over all the waits for this body, `body_total_timeout`
    /// bounds their sum and `body_min_rate` the rate after `body_rate_grace` (mod_reqtimeout's
    /// `body=grace,MinRate=rate`: every `rate` bytes received buy one more second). Covers the
    /// drain of an unread body too.
    fn body_wait_deadline(&self) -> (Instant, Instant) {
        let cfg = &self.shared.config;
        let now = Instant::now();
        let io = self.io.borrow();
        let rules = PaceRules::body(cfg);
        (now, rules.deadline(now, io.body_waited, io.body_read))
    }

    /// Marks the current body failed (for example when the handler's limit was passed), so the
    /// driver closes the connection after the response.
    pub(crate) fn fail_body(&self, gen: u64, err: BodyError) {
        let mut io = self.io.borrow_mut();
        if io.gen == gen && !matches!(io.body, BodyState::Done) {
            io.body = BodyState::Failed(err);
        }
    }

    /// Decodes the next piece of the current body from what is buffered; a chunked body is held
    /// to `max_body` (data and extension bytes). At a chunked body's end its trailer fields go
    /// to `trailers`.
    fn body_step(&self, io: &mut Io, max_body: u64, trailers: &mut Option<Trailers>) -> Step {
        match &mut io.body {
            BodyState::Done => Step::End,
            BodyState::Failed(e) => Step::Err(e.clone()),
            BodyState::Length(rem) => {
                if io.rbuf.is_empty() {
                    return Step::NeedMore;
                }
                let n = (*rem).min(io.rbuf.len() as u64);
                *rem -= n;
                let data = io.rbuf.split_to(n as usize).freeze();
                if *rem == 0 {
                    io.body = BodyState::Done;
                }
                Step::Data(data)
            }
            BodyState::Chunked(dec, delivered) => loop {
                match dec.decode(&io.rbuf, &self.shared.config.limits.parser) {
                    Ok(ChunkedStep::NeedMore { consumed }) => {
                        io.rbuf.advance(consumed);
                        // A chunk that declares more than the limit allows is refused now, not
                        // after its data trickled in.
                        if chunked_over_limit(dec, *delivered, max_body) {
                            io.body = BodyState::Failed(BodyError::TooLarge);
                            return Step::Err(BodyError::TooLarge);
                        }
                        return Step::NeedMore;
                    }
                    Ok(ChunkedStep::Data {
                        consumed,
                        data_start,
                        data_len,
                    }) => {
                        io.rbuf.advance(data_start);
                        let data = io.rbuf.split_to(data_len).freeze();
                        io.rbuf.advance(consumed - data_start - data_len);
                        *delivered += data_len as u64;
                        if chunked_over_limit(dec, *delivered, max_body) {
                            io.body = BodyState::Failed(BodyError::TooLarge);
                            return Step::Err(BodyError::TooLarge);
                        }
                        if data_len > 0 {
                            return Step::Data(data);
                        }
                    }
                    Ok(ChunkedStep::Done { consumed }) => {
                        io.rbuf.advance(consumed);
                        *trailers = received_trailers(dec.take_trailers());
                        io.body = BodyState::Done;
                        return Step::End;
                    }
                    Err(e) => {
                        let err = BodyError::Invalid(e.reason);
                        io.body = BodyState::Failed(err.clone());
                        return Step::Err(err);
                    }
                }
            },
        }
    }

    /// The next piece of the body of request `gen` if it is buffered (or the body is over or
    /// failed), `None` when reading must wait; a chunked body is held to `max_body` (the body's
    /// limit).
    fn try_body_chunk(
        &self,
        gen: u64,
        max_body: u64,
        trailers: &mut Option<Trailers>,
    ) -> Option<Result<Option<Bytes>, BodyError>> {
        let mut io = self.io.borrow_mut();
        if io.gen != gen {
            return Some(Err(BodyError::Incomplete));
        }
        match self.body_step(&mut io, max_body, trailers) {
            Step::Data(b) => Some(Ok(Some(b))),
            Step::End => Some(Ok(None)),
            Step::Err(e) => Some(Err(e)),
            Step::NeedMore => None,
        }
    }

    /// Next piece of the body of request `gen` (see [`Body::chunk`](crate::Body::chunk)), a
    /// chunked one held to `max_body` (the body's limit), its trailers put in `trailers` at its
    /// end.
    pub(crate) async fn body_chunk(
        &self,
        gen: u64,
        max_body: u64,
        trailers: &mut Option<Trailers>,
    ) -> Result<Option<Bytes>, BodyError> {
        loop {
            if let Some(ready) = self.try_body_chunk(gen, max_body, trailers) {
                return ready;
            }
            {
                let mut io = self.io.borrow_mut();
                if io.eof {
                    io.body = BodyState::Failed(BodyError::Incomplete);
                    return Err(BodyError::Incomplete);
                }
                if io.continue_pending {
                    io.continue_pending = false;
                    io.out.extend_from_slice(CONTINUE_100);
                }
                // Read bodies in larger pieces than heads: up to what is still expected, at
                // most 64 KiB per read (the handler holds what it was given, not this buffer).
                let want = match io.body {
                    BodyState::Length(rem) => rem.min(BODY_READ_MAX as u64) as usize,
                    _ => BODY_READ_MAX / 4,
                };
                if io.rbuf.capacity() - io.rbuf.len() < want
                    && crate::grow::try_reserve(&mut io.rbuf, want).is_err()
                {
                    // No memory for the body now: too large for this server at this moment
                    // (413), for this request only; the process goes on.
                    io.body = BodyState::Failed(BodyError::TooLarge);
                    return Err(BodyError::TooLarge);
                }
            }
            let before = self.io.borrow().rbuf.len();
            // Before waiting for the client, send it what it may be waiting for: earlier
            // pipelined responses and the `100 Continue`.
            if self.flush().await.is_err() {
                self.fail_body(gen, BodyError::Incomplete);
                return Err(BodyError::Incomplete);
            }
            let (since, deadline) = self.body_wait_deadline();
            let filled = self.fill(deadline).await;
            {
                let mut io = self.io.borrow_mut();
                io.body_waited = io.body_waited.saturating_add(since.elapsed());
            }
            match filled {
                Ok(Fill::Data) => {
                    let mut io = self.io.borrow_mut();
                    let got = io.rbuf.len().saturating_sub(before) as u64;
                    io.body_read = io.body_read.saturating_add(got);
                }
                Ok(Fill::Eof) => {}
                Ok(Fill::TimedOut) => {
                    self.fail_body(gen, BodyError::Timeout);
                    return Err(BodyError::Timeout);
                }
                Err(_) => {
                    self.fail_body(gen, BodyError::Incomplete);
                    return Err(BodyError::Incomplete);
                }
            }
        }
    }

    /// Reads and discards what is left of the current body, up to `DRAIN_MAX` bytes. `true` if
    /// the body ended and the next request can be read.
    pub(super) async fn drain_body(&self) -> bool {
        let gen = self.io.borrow().gen;
        let mut drained = 0u64;
        let ext_before = self.chunk_extension_bytes();
        loop {
            // What is skipped is bounded by `DRAIN_MAX` (extensions included), not the limit.
            // Trailers of a body nobody reads are dropped with it.
            match self.body_chunk(gen, u64::MAX, &mut None).await {
                Ok(None) => return true,
                Ok(Some(b)) => {
                    drained += b.len() as u64;
                    // Chunk extensions are input to skip too.
                    let ext = self.chunk_extension_bytes().saturating_sub(ext_before);
                    if drained.saturating_add(ext) > DRAIN_MAX {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Chunk-extension bytes of the current body so far (0 unless it is chunked).
    fn chunk_extension_bytes(&self) -> u64 {
        match &self.io.borrow().body {
            BodyState::Chunked(dec, _) => dec.extension_bytes(),
            _ => 0,
        }
    }
}

/// A request body read from the connection. `gen` identifies the request: once the engine moved
/// on to the next request, a stale body reports [`BodyError::Incomplete`] instead of reading
/// bytes that belong to someone else.
pub(super) struct ConnBody {
    pub(super) conn: Rc<Conn>,
    pub(super) gen: u64,
    pub(super) content_length: Option<u64>,
    /// The trailers of a chunked body, once it ended.
    pub(super) trailers: Option<Trailers>,
}

impl BodySource for ConnBody {
    fn try_chunk(&mut self, limit: u64) -> Option<Result<Option<Bytes>, BodyError>> {
        self.conn
            .try_body_chunk(self.gen, limit, &mut self.trailers)
    }

    fn chunk(&mut self, limit: u64) -> ChunkFuture<'_> {
        Box::pin(self.conn.body_chunk(self.gen, limit, &mut self.trailers))
    }

    fn trailers(&self) -> Option<&Trailers> {
        self.trailers.as_ref()
    }

    fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    fn refuse_too_large(&self) {
        self.conn.fail_body(self.gen, BodyError::TooLarge);
    }
}

/// A chunked body's decoded trailer fields as the engine's [`Trailers`] (`None`: there were
/// none). Names are tokens, values field values: the decoder checked both.
fn received_trailers(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Option<Trailers> {
    if fields.is_empty() {
        return None;
    }
    let fields = fields
        .into_iter()
        .map(|(n, v)| (String::from_utf8_lossy(&n).into_owned().into(), v.into()))
        .collect();
    Some(Trailers::received(fields))
}

/// Chunk-extension bytes a body may carry beyond its data bytes (see [`chunked_over_limit`]).
pub(super) const CHUNK_EXT_ALLOWANCE: u64 = 64 * 1024;

/// Whether a chunked body already breaks its limits: the data delivered, plus what the current
/// chunk still declares, plus every chunk-extension byte so far is over `max_body` (an
/// oversized chunk is answered 413 at once); or the extensions outgrow the data delivered by
/// more than [`CHUNK_EXT_ALLOWANCE`]. The second bound holds whatever `max_body` is, so a body
/// without a limit (`u64::MAX`) or being drained cannot carry unbounded extensions either.
#[inline]
fn chunked_over_limit(dec: &ChunkedDecoder, delivered: u64, max_body: u64) -> bool {
    delivered
        .saturating_add(dec.chunk_data_remaining())
        .saturating_add(dec.extension_bytes())
        > max_body
        || dec.extension_bytes() > delivered.saturating_add(CHUNK_EXT_ALLOWANCE)
}
