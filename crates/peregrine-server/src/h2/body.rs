//! A request body read from an HTTP/2 stream's DATA frames.

use crate::BodyError;
use bytes::Bytes;
use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::time::Duration;

/// The stream's receiving half, shared by the request's body and the stream's task: when the
/// handler drops the body early, the task still drains it after the response (see [`drain`]).
pub(crate) type SharedRecv = Rc<RefCell<h2::RecvStream>>;

/// What is drained of a request body the handler did not read, at most (as over HTTP/1.1).
const DRAIN_MAX: usize = 256 * 1024;

/// Reads and drops what is left of a request body after the response, up to [`DRAIN_MAX`] and
/// `timeout` per wait, so the client's request completes (its trailers, errors included, are
/// still checked by h2) instead of being cancelled. Past either bound the stream is reset
/// (`CANCEL`) when the last reference goes.
pub(crate) async fn drain(recv: SharedRecv, timeout: Duration) {
    let mut left = DRAIN_MAX;
    while !recv.borrow().is_end_stream() {
        let next = tokio::time::timeout(timeout, poll_fn(|cx| recv.borrow_mut().poll_data(cx)));
        match next.await {
            Ok(Some(Ok(data))) => {
                let _ = recv
                    .borrow_mut()
                    .flow_control()
                    .release_capacity(data.len());
                match left.checked_sub(data.len()) {
                    Some(l) => left = l,
                    None => return,
                }
            }
            _ => return,
        }
    }
}

/// The DATA frames of one stream, handed out as they arrive. Each piece read gives its bytes
/// back to the stream's and the connection's flow-control windows, so a handler that does not
/// read stops the client once the window is used up (backpressure, as over HTTP/1.1).
pub(crate) struct H2Body {
    recv: SharedRecv,
    content_length: Option<u64>,
    limit: u64,
    read: u64,
    timeout: Duration,
}

impl H2Body {
    pub(crate) fn new(
        recv: SharedRecv,
        content_length: Option<u64>,
        limit: u64,
        timeout: Duration,
    ) -> Self {
        H2Body {
            recv,
            content_length,
            limit,
            read: 0,
            timeout,
        }
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        loop {
            let recv = &self.recv;
            let next =
                tokio::time::timeout(self.timeout, poll_fn(|cx| recv.borrow_mut().poll_data(cx)))
                    .await
                    .map_err(|_| BodyError::Timeout)?;
            let data = match next {
                None => return Ok(None),
                // Reset by the client, or the connection failed.
                Some(Err(_)) => return Err(BodyError::Incomplete),
                Some(Ok(data)) => data,
            };
            let _ = self
                .recv
                .borrow_mut()
                .flow_control()
                .release_capacity(data.len());
            self.read += data.len() as u64;
            if self.read > self.limit {
                return Err(BodyError::TooLarge);
            }
            if !data.is_empty() {
                return Ok(Some(data));
            }
        }
    }
}
