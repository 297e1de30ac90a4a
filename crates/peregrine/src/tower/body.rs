//! The bodies tower layers see: [`LocalBody`] (the request's, read on demand) and
//! [`LocalResBody`] (the response's, passed through untouched unless a layer wraps it).

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use peregrine_server::{Body, BodyError, ResponseBody};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The request body as tower layers see it: the engine's body, read on demand (no copy). A
/// layer that does not read it hands it on to the handler untouched.
///
/// ```
/// use peregrine::tower::{LocalBody, TowerLayer};
/// use peregrine::{post, App, Error, Request};
///
/// async fn create(mut req: Request) -> Result<String, Error> {
///     let tenant = req.header("x-tenant").unwrap_or("-").to_owned();
///     let body = req.text().await?; // still all there after the tower layer
///     Ok(format!("{tenant}: {body}"))
/// }
///
/// // The layer's service sees `http::Request<LocalBody>`; this one only adds a header.
/// let layer = tower::util::MapRequestLayer::new(|mut req: http::Request<LocalBody>| {
///     if !req.headers().contains_key("x-tenant") {
///         req.headers_mut().insert("x-tenant", http::HeaderValue::from_static("default"));
///     }
///     req
/// });
/// let client = App::new().route("/notes", post(create)).layer(TowerLayer::new(layer)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.post("/notes").body("buy milk").send().await.text(), "default: buy milk");
/// # });
/// ```
pub struct LocalBody {
    state: LocalBodyState,
}

type ChunkFuture = Pin<Box<dyn Future<Output = (Body, Result<Option<Bytes>, BodyError>)>>>;

enum LocalBodyState {
    Idle(Body),
    Reading(ChunkFuture),
    Done,
}

impl LocalBody {
    pub(super) fn new(body: Body) -> Self {
        LocalBody {
            state: LocalBodyState::Idle(body),
        }
    }

    /// Back to the engine's body, if nothing was read from it yet; otherwise what is left.
    pub(super) fn into_engine_body(self) -> Body {
        match self.state {
            LocalBodyState::Idle(b) => b,
            // A layer started reading and handed the body on: the rest is lost to us, which
            // no known layer does; answer with an empty body rather than a corrupt one.
            LocalBodyState::Reading(_) | LocalBodyState::Done => Body::empty(),
        }
    }
}

impl HttpBody for LocalBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            match std::mem::replace(&mut self.state, LocalBodyState::Done) {
                LocalBodyState::Done => return Poll::Ready(None),
                LocalBodyState::Idle(mut body) => {
                    self.state = LocalBodyState::Reading(Box::pin(async move {
                        let r = body.chunk().await;
                        (body, r)
                    }));
                }
                LocalBodyState::Reading(mut fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = LocalBodyState::Reading(fut);
                        return Poll::Pending;
                    }
                    Poll::Ready((body, Ok(Some(chunk)))) => {
                        self.state = LocalBodyState::Idle(body);
                        return Poll::Ready(Some(Ok(Frame::data(chunk))));
                    }
                    Poll::Ready((_, Ok(None))) => return Poll::Ready(None),
                    Poll::Ready((_, Err(e))) => return Poll::Ready(Some(Err(e))),
                },
            }
        }
    }
}

/// The response body as tower layers see it: the peregrine body, passed through untouched
/// unless a layer wraps it (compression). `Default` is the empty body (layers that answer
/// themselves, like tower-http's `TimeoutLayer`, build one).
///
/// ```
/// use http_body::Body as _;
/// use peregrine::tower::{LocalBody, LocalResBody, NextService, TowerLayer};
/// use peregrine::{get, App, Request};
/// use tower::ServiceExt;
///
/// // A layer reading the response body's size without touching the body.
/// let size = tower::layer::layer_fn(|inner: NextService| {
///     ServiceExt::<http::Request<LocalBody>>::map_response(inner, |mut res: http::Response<LocalResBody>| {
///         let n = res.body().size_hint().exact().unwrap_or(0);
///         res.headers_mut().insert("x-body-bytes", n.into());
///         res
///     })
/// });
/// let client = App::new().route("/", get(|_r: Request| async { "twelve bytes" })).layer(TowerLayer::new(size)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/").send().await.header("x-body-bytes"), Some("12"));
/// # });
/// assert!(LocalResBody::default().is_end_stream());
/// ```
#[derive(Default)]
pub struct LocalResBody(pub(super) Option<ResponseBody>);

impl HttpBody for LocalResBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.0.take() {
            None | Some(ResponseBody::Empty) => Poll::Ready(None),
            Some(ResponseBody::Full(b)) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Some(ResponseBody::Static(b)) => {
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b)))))
            }
            Some(ResponseBody::Stream(mut s)) => {
                let out = s.as_mut().poll_next(cx);
                self.0 = Some(ResponseBody::Stream(s));
                stream_frame(&mut self.0, out)
            }
            Some(ResponseBody::SizedStream { len, mut stream }) => {
                let out = stream.as_mut().poll_next(cx);
                self.0 = Some(ResponseBody::SizedStream { len, stream });
                stream_frame(&mut self.0, out)
            }
            // A file through a layer is read in pieces, as the engine does off plain TCP.
            Some(ResponseBody::File { file, offset, len }) => {
                if len == 0 {
                    return Poll::Ready(None);
                }
                let mut buf = vec![0; len.min(64 * 1024) as usize];
                match read_file_at(&file, &mut buf, offset) {
                    Ok(0) => Poll::Ready(Some(Err(std::io::ErrorKind::UnexpectedEof.into()))),
                    Ok(n) => {
                        buf.truncate(n);
                        let (offset, len) = (offset + n as u64, len - n as u64);
                        self.0 = Some(ResponseBody::File { file, offset, len });
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
                    }
                    Err(e) => Poll::Ready(Some(Err(e))),
                }
            }
            // A protocol switch cannot pass through a tower body: the response goes out bodiless.
            Some(ResponseBody::Upgrade(_)) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.0, None | Some(ResponseBody::Empty))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            None | Some(ResponseBody::Empty) => SizeHint::with_exact(0),
            Some(ResponseBody::Full(b)) => SizeHint::with_exact(b.len() as u64),
            Some(ResponseBody::Static(b)) => SizeHint::with_exact(b.len() as u64),
            Some(ResponseBody::Stream(_)) => SizeHint::default(),
            Some(ResponseBody::SizedStream { len, .. } | ResponseBody::File { len, .. }) => {
                SizeHint::with_exact(*len)
            }
            Some(ResponseBody::Upgrade(_)) => SizeHint::with_exact(0),
        }
    }
}

/// The frame for what a streamed body's stream gave (`out`); at the stream's end the body is
/// done (`body` emptied).
fn stream_frame(
    body: &mut Option<ResponseBody>,
    out: Poll<Option<Result<Bytes, std::io::Error>>>,
) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
    match out {
        Poll::Pending => Poll::Pending,
        Poll::Ready(None) => {
            *body = None;
            Poll::Ready(None)
        }
        Poll::Ready(Some(r)) => Poll::Ready(Some(r.map(Frame::data))),
    }
}

#[cfg(unix)]
fn read_file_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_file_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}
