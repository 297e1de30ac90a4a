//! What the wire will carry for a response, seen from the framework: the status and body size
//! the engine actually sends, and a hook that runs once the body has been handed over (at once
//! for a full body, at the end of a stream). Shared by [`Trace`](super::Trace),
//! [`Logger`](super::Logger) and [`Metrics`](crate::metrics::Metrics).

use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::codec::response::{self, INVALID_RESPONSE_REASON};
use peregrine_server::{Response, ResponseBody};
use std::pin::Pin;
use std::task::{Context, Poll};

/// The body the engine sends in place of a response it cannot encode: its length must be what
/// we log.
const ENGINE_INVALID_BODY_LEN: u64 = INVALID_RESPONSE_REASON.len() as u64 + 1;

/// The status the engine will put on the wire for `res`: the codec's rule
/// ([`wire_status`](peregrine_server::codec::response::wire_status)), the one the engine
/// applies. (A 101 with an upgrade counts as sent; the engine also requires an HTTP/1.1
/// request whose body is complete, which only the engine knows.)
pub(crate) fn wire_status(res: &Response) -> u16 {
    let fields = res.headers.iter().map(|(n, v)| (n.as_bytes(), &**v));
    let upgrade = matches!(res.body, ResponseBody::Upgrade(_));
    response::wire_status(res.status, fields, upgrade)
}

/// Calls `done(status, body_bytes)` with what the wire carries for `res` once its body has been
/// handed to the engine: now for empty and full bodies, when the stream ends (or is dropped,
/// say on a client disconnect) for streamed ones. `head`: the request was HEAD (no body sent).
pub(crate) fn on_complete(res: &mut Response, head: bool, done: impl FnOnce(u16, u64) + 'static) {
    let status = wire_status(res);
    if status != res.status {
        return done(status, if head { 0 } else { ENGINE_INVALID_BODY_LEN });
    }
    let no_body = head || matches!(status, 204 | 304);
    match &mut res.body {
        _ if no_body => done(status, 0),
        ResponseBody::Empty => done(status, 0),
        ResponseBody::Full(b) => done(status, b.len() as u64),
        ResponseBody::Static(b) => done(status, b.len() as u64),
        // Sent by the engine from the file (sendfile); a short write closes the connection.
        ResponseBody::File { len, .. } => done(status, *len),
        // The connection is handed over after the head: no body bytes.
        ResponseBody::Upgrade(_) => done(status, 0),
        ResponseBody::Stream(s) | ResponseBody::SizedStream { stream: s, .. } => {
            let inner = std::mem::replace(s, Box::pin(EmptyStream));
            *s = Box::pin(Counted {
                inner,
                bytes: 0,
                done: Some(Box::new(move |n| done(status, n))),
            });
        }
    }
}

struct EmptyStream;

impl Stream for EmptyStream {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(None)
    }
}

/// A streamed body that counts what passes and reports once, at its end or when dropped.
struct Counted {
    inner: peregrine_server::response::BodyStream,
    bytes: u64,
    done: Option<Box<dyn FnOnce(u64)>>,
}

impl Stream for Counted {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let r = self.inner.as_mut().poll_next(cx);
        match &r {
            Poll::Ready(Some(Ok(b))) => self.bytes += b.len() as u64,
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                if let Some(done) = self.done.take() {
                    done(self.bytes);
                }
            }
            Poll::Pending => {}
        }
        r
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(self.bytes);
        }
    }
}

/// `2xx`-style class of a status, as a static label.
#[cfg(feature = "metrics")]
pub(crate) fn status_class(status: u16) -> &'static str {
    match status / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_status_follows_the_engine() {
        assert_eq!(wire_status(&Response::new(101)), 500);
        assert_eq!(wire_status(&Response::new(199)), 500);
        assert_eq!(wire_status(&Response::new(1000)), 500);
        assert_eq!(wire_status(&Response::new(204)), 204);
        let split = Response::new(200).with_header("x-a", b"1\r\nx-b: 2".as_slice());
        assert_eq!(wire_status(&split), 500);
        let bad_name = Response::new(200).with_header("x a", b"1".as_slice());
        assert_eq!(wire_status(&bad_name), 500);
        // Fields the engine owns are dropped, but checked first like any other.
        let owned = Response::new(200).with_header("Content-Length", b"5".as_slice());
        assert_eq!(wire_status(&owned), 200);
        let owned = Response::new(200).with_header("Content-Length", b"\r\n".as_slice());
        assert_eq!(wire_status(&owned), 500);
    }

    #[test]
    fn sizes_are_what_the_body_sends() {
        let seen = std::rc::Rc::new(std::cell::Cell::new((0, 0)));
        let mut r = Response::text("hello");
        let s = seen.clone();
        on_complete(&mut r, false, move |st, n| s.set((st, n)));
        assert_eq!(seen.get(), (200, 5));
        let mut r = Response::text("hello");
        let s = seen.clone();
        on_complete(&mut r, true, move |st, n| s.set((st, n)));
        assert_eq!(seen.get(), (200, 0));
        let mut r = Response::text("hello").with_status(101);
        let s = seen.clone();
        on_complete(&mut r, false, move |st, n| s.set((st, n)));
        assert_eq!(seen.get(), (500, ENGINE_INVALID_BODY_LEN));
    }
}
