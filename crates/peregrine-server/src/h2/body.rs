//! A request body read from an HTTP/2 stream's DATA frames.

use crate::BodyError;
use bytes::Bytes;
use std::future::poll_fn;
use std::time::Duration;

/// The DATA frames of one stream, handed out as they arrive. Each piece read gives its bytes
/// back to the stream's and the connection's flow-control windows, so a handler that does not
/// read stops the client once the window is used up (backpressure, as over HTTP/1.1).
pub(crate) struct H2Body {
    recv: h2::RecvStream,
    content_length: Option<u64>,
    limit: u64,
    read: u64,
    timeout: Duration,
}

impl H2Body {
    pub(crate) fn new(
        recv: h2::RecvStream,
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
            let next = tokio::time::timeout(self.timeout, poll_fn(|cx| self.recv.poll_data(cx)))
                .await
                .map_err(|_| BodyError::Timeout)?;
            let data = match next {
                None => return Ok(None),
                // Reset by the client, or the connection failed.
                Some(Err(_)) => return Err(BodyError::Incomplete),
                Some(Ok(data)) => data,
            };
            let _ = self.recv.flow_control().release_capacity(data.len());
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
