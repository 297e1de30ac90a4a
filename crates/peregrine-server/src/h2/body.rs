//! A request body read from an HTTP/2 stream's DATA frames.

use crate::body::{BodyError, BodySource, ChunkFuture};
use crate::trailers::Trailers;
use bytes::Bytes;
use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The stream's receiving half, shared by the request's body and the stream's task: when the
/// handler drops the body early, the task still drains it after the response (see [`drain`]).
pub(crate) type SharedRecv = Rc<RefCell<Recv>>;

/// A request body's DATA and the account of the time spent waiting for them, which the
/// handler's reads and the engine's drain share (as over HTTP/1.1).
pub(crate) struct Recv {
    stream: h2::RecvStream,
    waited: Duration,
    received: u64,
}

impl Recv {
    pub(crate) fn new(stream: h2::RecvStream) -> Self {
        Recv {
            stream,
            waited: Duration::ZERO,
            received: 0,
        }
    }
}

/// The request-body rules of `ServerConfig`: `body_timeout` per wait; `body_min_rate` after
/// `body_rate_grace`, and `body_total_timeout`, over all the waits of one body.
pub(crate) type BodyRules = crate::pace::PaceRules;

/// The next DATA of `recv` (its window given back), waiting within `rules`; `Err(())` when the
/// rules' time is up.
async fn next_data(
    recv: &SharedRecv,
    rules: &BodyRules,
) -> Result<Option<Result<Bytes, h2::Error>>, ()> {
    let start = Instant::now();
    let deadline = {
        let r = recv.borrow();
        rules.deadline(start, r.waited, r.received)
    };
    let next = tokio::time::timeout_at(
        deadline,
        poll_fn(|cx| recv.borrow_mut().stream.poll_data(cx)),
    )
    .await;
    let mut r = recv.borrow_mut();
    r.waited = r.waited.saturating_add(start.elapsed());
    let next = next.map_err(|_| ())?;
    if let Some(Ok(data)) = &next {
        let _ = r.stream.flow_control().release_capacity(data.len());
        r.received = r.received.saturating_add(data.len() as u64);
    }
    Ok(next)
}

/// What is drained of a request body the handler did not read, at most (as over HTTP/1.1).
const DRAIN_MAX: usize = peregrine_codec::response::UNREAD_BODY_DRAIN_MAX as usize;

/// Reads and drops what is left of a request body after the response, up to [`DRAIN_MAX`] and
/// `timeout` per wait, so the client's request completes (its trailers, errors included, are
/// still checked by h2) instead of being cancelled. Past either bound (the time under the
/// body's rules, whose account the handler's reads started) the stream is reset
/// (`CANCEL`) when the last reference goes.
pub(crate) async fn drain(recv: SharedRecv, rules: BodyRules) {
    let mut left = DRAIN_MAX;
    while !recv.borrow().stream.is_end_stream() {
        match next_data(&recv, &rules).await {
            Ok(Some(Ok(data))) => match left.checked_sub(data.len()) {
                Some(l) => left = l,
                None => return,
            },
            _ => return,
        }
    }
}

/// The DATA frames of one stream, handed out as they arrive. Each piece read gives its bytes
/// back to the stream's and the connection's flow-control windows, so a handler that does not
/// read stops the client once the window is used up (backpressure, as over HTTP/1.1).
/// The body's size limit is `Body`'s, which counts what this hands out.
pub(crate) struct H2Body {
    recv: SharedRecv,
    content_length: Option<u64>,
    rules: BodyRules,
    /// The trailers, once the DATA ended (a HEADERS frame after them).
    trailers: Option<Trailers>,
}

impl H2Body {
    pub(crate) fn new(recv: SharedRecv, content_length: Option<u64>, rules: BodyRules) -> Self {
        H2Body {
            recv,
            content_length,
            rules,
            trailers: None,
        }
    }

    /// After the last DATA: the trailers, if the client sent any (h2 has them once the
    /// stream's end arrived, which the end of the DATA means).
    async fn read_trailers(&mut self) -> Result<(), BodyError> {
        let start = Instant::now();
        let deadline = {
            let r = self.recv.borrow();
            self.rules.deadline(start, r.waited, r.received)
        };
        let recv = &self.recv;
        let received = crate::body::trailers_after_data(deadline, |cx| {
            recv.borrow_mut().stream.poll_trailers(cx)
        })
        .await?;
        self.trailers = received;
        Ok(())
    }

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        loop {
            let next = next_data(&self.recv, &self.rules)
                .await
                .map_err(|_| BodyError::Timeout)?;
            let data = match next {
                None => {
                    self.read_trailers().await?;
                    return Ok(None);
                }
                // Reset by the client, or the connection failed.
                Some(Err(_)) => return Err(BodyError::Incomplete),
                Some(Ok(data)) => data,
            };
            if !data.is_empty() {
                return Ok(Some(data));
            }
        }
    }
}

impl BodySource for H2Body {
    /// DATA frames arrive through h2's stream: every read waits on it.
    fn try_chunk(&mut self, _limit: u64) -> Option<Result<Option<Bytes>, BodyError>> {
        None
    }

    /// HTTP/2 frames carry nothing outside the data to hold to the limit: `Body` counts it.
    fn chunk(&mut self, _limit: u64) -> ChunkFuture<'_> {
        Box::pin(self.next_chunk())
    }

    fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The stream is drained after the response within its bounds, or reset past them.
    fn refuse_too_large(&self) {}

    fn trailers(&self) -> Option<&Trailers> {
        self.trailers.as_ref()
    }
}
