//! The response both ways: a peregrine response as an `http::Response` for a layer, and an
//! `http::Response` (from a layer or a mounted service) back, its body full when ready at once
//! and streamed otherwise.

use super::body::LocalResBody;
use super::box_error::BoxError;
use super::stash::{StashedBody, BODY_STASH};
use bytes::{Buf, Bytes};
use http_body::Body as HttpBody;
use peregrine_server::{Response, ResponseBody};
use std::any::Any;
use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A peregrine response as an `http::Response` (for the layer to see and change). A protocol
/// switch cannot travel in a body a layer may wrap (and is not `Send`, so not in the
/// extensions either): it waits in the worker's stash under the request's `key`, marked in the
/// extensions as hyper marks its `OnUpgrade`, and [`from_http`] puts it back.
pub(super) fn to_http_response(res: Response, key: Option<u64>) -> http::Response<LocalResBody> {
    let (body, stashed) = match (res.body, key) {
        (ResponseBody::Upgrade(up), Some(key)) => {
            BODY_STASH.with(|s| s.borrow_mut().push((key, ResponseBody::Upgrade(up))));
            (ResponseBody::Empty, Some(StashedBody(key)))
        }
        (body, _) => (body, None),
    };
    let mut out = http::Response::new(LocalResBody(Some(body)));
    if let Some(mark) = stashed {
        out.extensions_mut().insert(mark);
    }
    *out.status_mut() =
        http::StatusCode::from_u16(res.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    for (n, v) in res.headers {
        match (
            http::HeaderName::from_bytes(n.as_bytes()),
            http::HeaderValue::from_bytes(&v),
        ) {
            (Ok(n), Ok(v)) => {
                h.append(n, v);
            }
            _ => tracing::error!(header = %n, "response header not representable in http; dropped"),
        }
    }
    out
}

/// An `http::Response` from a layer or a mounted service, as a peregrine response. Framing
/// headers are left to the engine.
pub(super) fn from_http<B>(res: http::Response<B>) -> Response
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let (parts, body) = res.into_parts();
    let mut headers = Vec::with_capacity(parts.headers.len());
    for (n, v) in &parts.headers {
        if n == http::header::CONTENT_LENGTH || n == http::header::TRANSFER_ENCODING {
            continue;
        }
        headers.push((
            Cow::Owned(n.as_str().to_owned()),
            Cow::Owned(v.as_bytes().to_vec()),
        ));
    }
    // A streamed body that `ResponseBodyAs` set aside: the one to send.
    if let Some(StashedBody(key)) = parts.extensions.get::<StashedBody>() {
        let stashed = BODY_STASH.with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|(k, _)| k == key)?;
            Some(s.swap_remove(i).1)
        });
        if let Some(body) = stashed {
            return engine_response(parts.status.as_u16(), headers, body);
        }
    }
    let boxed: Box<dyn Any> = Box::new(body);
    let body = match boxed.downcast::<LocalResBody>() {
        // Our own body, untouched by the layer: no re-streaming.
        Ok(mine) => mine.0.unwrap_or(ResponseBody::Empty),
        Err(other) => {
            let Ok(other) = other.downcast::<B>() else {
                unreachable!("the body is a B")
            };
            // A layer's wrapper keeps the inner size when it does not change the bytes
            // (`TraceLayer`, `CompressionLayer` on what it leaves alone): the size goes out as
            // `Content-Length`, never chunked.
            let exact = other.size_hint().exact();
            if other.is_end_stream() || exact == Some(0) {
                ResponseBody::Empty
            } else {
                ready_or_stream(Box::pin(*other), exact)
            }
        }
    };
    engine_response(parts.status.as_u16(), headers, body)
}

/// An engine response from its parts.
fn engine_response(
    status: u16,
    headers: Vec<(Cow<'static, str>, Cow<'static, [u8]>)>,
    body: ResponseBody,
) -> Response {
    let mut r = Response::new(status).with_body(body);
    r.headers = headers;
    r
}

/// A layer's body that is all there at once (a wrapped full body: `TraceLayer`,
/// `SetResponseHeader`...) goes out as a full body with a `Content-Length`, not chunked: it is
/// polled once without a waker that matters, and streamed only if it is not ready. A body of
/// `exact` size is streamed as a sized body (`Content-Length`, also to HEAD); one past
/// [`READY_MAX`] is streamed at once rather than read into memory first.
fn ready_or_stream<B>(mut body: Pin<Box<B>>, exact: Option<u64>) -> ResponseBody
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let streamed = |first: Option<Bytes>, body: Pin<Box<B>>| {
        let stream = Box::pin(Prefixed {
            first,
            rest: BodyStream(body),
        });
        match exact {
            Some(len) => ResponseBody::SizedStream { len, stream },
            None => ResponseBody::Stream(stream),
        }
    };
    if exact.is_some_and(|n| n > READY_MAX as u64) {
        return streamed(None, body);
    }
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut data: Option<Bytes> = None;
    loop {
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(None) => {
                return data.map_or(ResponseBody::Empty, ResponseBody::Full);
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(mut d) = frame.into_data() {
                    let b = d.copy_to_bytes(d.remaining());
                    data = Some(match data.take() {
                        None => b,
                        Some(prev) => {
                            let mut v = Vec::with_capacity(prev.len() + b.len());
                            v.extend_from_slice(&prev);
                            v.extend_from_slice(&b);
                            Bytes::from(v)
                        }
                    });
                    // A body that keeps being ready (an endless generator) is streamed, not
                    // gathered without bound.
                    if data.as_ref().is_some_and(|d| d.len() > READY_MAX) {
                        return streamed(data, body);
                    }
                }
            }
            // An error or a body that must wait: stream it (what was read goes first).
            Poll::Ready(Some(Err(e))) => {
                let first = data.map(Ok).into_iter();
                let err = std::iter::once(Err(std::io::Error::other(e.into())));
                return ResponseBody::Stream(Box::pin(Iter(first.chain(err))));
            }
            Poll::Pending => return streamed(data, body),
        }
    }
}

/// Most a ready body is gathered into one full body (beyond it the rest is streamed).
const READY_MAX: usize = 1 << 20;

fn noop_waker() -> std::task::Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    thread_local! {
        static NOOP: std::task::Waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    }
    NOOP.with(|w| w.clone())
}

/// What was read before the body had to wait, then the rest of it.
struct Prefixed<B> {
    first: Option<Bytes>,
    rest: BodyStream<B>,
}

impl<B> futures_core::Stream for Prefixed<B>
where
    B: HttpBody,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(b) = self.first.take() {
            return Poll::Ready(Some(Ok(b)));
        }
        Pin::new(&mut self.rest).poll_next(cx)
    }
}

struct Iter<I>(I);

impl<I: Iterator<Item = Result<Bytes, std::io::Error>> + Unpin> futures_core::Stream for Iter<I> {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.next())
    }
}

/// Any `http_body::Body` as the engine's stream of chunks (trailers are dropped: HTTP/1.1
/// responses here carry none).
struct BodyStream<B>(Pin<Box<B>>);

impl<B> futures_core::Stream for BodyStream<B>
where
    B: HttpBody,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match self.0.as_mut().poll_frame(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => {
                    Poll::Ready(Some(Err(std::io::Error::other(e.into()))))
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut d) => {
                        let b = d.copy_to_bytes(d.remaining());
                        if b.is_empty() {
                            continue;
                        }
                        Poll::Ready(Some(Ok(b)))
                    }
                    // Trailers: nothing to send.
                    Err(_) => continue,
                },
            };
        }
    }
}
