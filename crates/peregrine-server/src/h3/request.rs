//! Turning an HTTP/3 request into an engine [`Request`]: its fields (split cookies joined, as
//! for HTTP/2), the body's framing, and the body itself read from the stream's DATA frames.

use crate::body::{BodyError, BodySource, ChunkFuture};
use crate::h2::JoinedCookies;
use crate::pace::PaceRules;
use crate::request::PartsInfo;
use crate::trailers::Trailers;
use crate::{Body, Request, Version};
use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use peregrine_codec::BodyFraming;
use std::cell::RefCell;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The receiving half of a request stream, shared by the request's body and the stream's task
/// (which stops the client's sending when the handler left the body unread).
pub(super) type SharedRecv = Rc<RefCell<Recv>>;

/// A request body's DATA and the account of the time spent waiting for them.
pub(super) struct Recv {
    stream: RequestStream<h3_quinn::RecvStream, Bytes>,
    /// The client finished the body (or the stream failed): nothing more will be read.
    pub(super) ended: bool,
    waited: Duration,
    received: u64,
    /// The body has been read from: h3-quinn may then hold the QUIC stream inside a read,
    /// and its `stop_sending` panics while it does.
    read_from: bool,
}

impl Recv {
    /// Tells the client to stop sending a body nobody will read (RFC 9114 §4.1: after a
    /// complete response, with `H3_NO_ERROR`, so the client keeps the response).
    pub(super) fn stop(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.read_from {
            // h3 reads ahead: a poll that returned a frame already buffered may have left a
            // read of the QUIC stream pending inside h3-quinn, so no poll result says the
            // stream is free. Dropping it stops the client's sending instead (quinn sends
            // STOP_SENDING with code 0, an unknown code, which RFC 9114 §9 treats as
            // H3_NO_ERROR).
            return;
        }
        self.stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
}

/// The engine request for `head`, its body reading from `recv`; `None` when a part is not what
/// the engine's accessors promise (a non-ASCII method or target) or the request is malformed
/// (a connection-specific field): answered 400.
pub(super) fn map(
    head: http::Request<()>,
    recv: RequestStream<h3_quinn::RecvStream, Bytes>,
    peer: SocketAddr,
    max_body_size: u64,
    rules: PaceRules,
) -> Option<(Request, SharedRecv)> {
    let (parts, ()) = head.into_parts();
    // Malformed in HTTP/3 (RFC 9114 §4.2), which h3 does not check: refused, so a client cannot
    // pass for an HTTP/1.1 upgrade (`Upgrade` reaches the service only from an extended CONNECT).
    if parts.headers.iter().any(|(n, v)| {
        crate::h2::is_connection_specific(n) || (n == http::header::TE && v != "trailers")
    }) {
        return None;
    }
    // h3 has checked the pseudo-fields; content-length is checked against the DATA by `Body`.
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let recv = Rc::new(RefCell::new(Recv {
        stream: recv,
        ended: declared == Some(0),
        waited: Duration::ZERO,
        received: 0,
        read_from: false,
    }));
    let (framing, body) = match declared {
        Some(0) => (BodyFraming::None, Body::empty()),
        // Without a length, whether DATA follows is known only when the stream is read (the
        // HTTP/1.1 equivalent is chunked).
        declared => {
            let source = H3Body {
                recv: recv.clone(),
                content_length: declared,
                rules,
                trailers: None,
            };
            let framing = declared.map_or(BodyFraming::Chunked, BodyFraming::Length);
            // The limit is checked as the body is read (a declared length before any DATA).
            (framing, Body::from_source(Box::new(source), max_body_size))
        }
    };
    let target = match parts.uri.path_and_query() {
        Some(pq) => pq.as_str(),
        // CONNECT has only an authority (RFC 9114 §4.4), as over HTTP/2.
        None => parts.uri.authority().map_or("", |a| a.as_str()),
    };
    let cookies = JoinedCookies::of(&parts.headers);
    let request = Request::from_parts(
        parts.method.as_str().as_bytes(),
        target.as_bytes(),
        parts.uri.authority().map(|a| a.as_str().as_bytes()),
        cookies.fields(&parts.headers),
        PartsInfo {
            version: Version::Http3,
            framing,
            peer,
            body,
        },
    )?;
    Some((request, recv))
}

/// The DATA frames of one request stream, handed out as they arrive. QUIC's flow control gives
/// the client more room only as they are read, so a handler that does not read stops the
/// client (backpressure, as over HTTP/1.1 and HTTP/2). The size limit is `Body`'s.
struct H3Body {
    recv: SharedRecv,
    content_length: Option<u64>,
    rules: PaceRules,
    /// The trailers, once the DATA ended (a HEADERS frame after them).
    trailers: Option<Trailers>,
}

impl H3Body {
    /// The next piece of the body, waiting within the body rules (`body_timeout`,
    /// `body_min_rate`, `body_total_timeout`).
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        if self.recv.borrow().ended {
            return Ok(None);
        }
        let start = Instant::now();
        let deadline = {
            let r = self.recv.borrow();
            self.rules.deadline(start, r.waited, r.received)
        };
        let next = tokio::time::timeout_at(
            deadline,
            poll_fn(|cx| {
                let mut r = self.recv.borrow_mut();
                r.read_from = true;
                r.stream.poll_recv_data(cx)
            }),
        )
        .await;
        let read = {
            let mut r = self.recv.borrow_mut();
            r.waited = r.waited.saturating_add(start.elapsed());
            match next {
                Err(_) => Err(BodyError::Timeout),
                Ok(Ok(Some(mut data))) => {
                    let data = data.copy_to_bytes(data.remaining());
                    r.received = r.received.saturating_add(data.len() as u64);
                    Ok(Some(data))
                }
                // Ended before the trailers are read: a read of them left waiting holds
                // nothing `stop` needs.
                Ok(Ok(None)) => {
                    r.ended = true;
                    Ok(None)
                }
                // Reset by the client, or the connection failed.
                Ok(Err(_)) => {
                    r.ended = true;
                    Err(BodyError::Incomplete)
                }
            }
        };
        if matches!(read, Ok(None)) {
            self.read_trailers(deadline).await?;
        }
        read
    }
}

impl H3Body {
    /// After the last DATA: the trailers, if the client sent any, waiting until `deadline`.
    async fn read_trailers(&mut self, deadline: Instant) -> Result<(), BodyError> {
        let recv = &self.recv;
        self.trailers = crate::body::trailers_after_data(deadline, |cx| {
            recv.borrow_mut().stream.poll_recv_trailers(cx)
        })
        .await?;
        Ok(())
    }
}

impl BodySource for H3Body {
    /// DATA arrives through the QUIC stream: every read waits on it.
    fn try_chunk(&mut self, _limit: u64) -> Option<Result<Option<Bytes>, BodyError>> {
        None
    }

    /// HTTP/3 frames carry nothing outside the data to hold to the limit: `Body` counts it.
    fn chunk(&mut self, _limit: u64) -> ChunkFuture<'_> {
        Box::pin(async move {
            loop {
                match self.next_chunk().await? {
                    Some(data) if data.is_empty() => continue,
                    other => return Ok(other),
                }
            }
        })
    }

    fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The stream's task stops the client's sending after the response.
    fn refuse_too_large(&self) {}

    fn trailers(&self) -> Option<&Trailers> {
        self.trailers.as_ref()
    }
}
