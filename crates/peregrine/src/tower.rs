// Over 600 lines: both directions of the tower bridge (layers in, services mounted) need the same body and request adapters, kept private here.
//! tower interoperability, both directions (cargo feature `tower`):
//!
//! - [`TowerLayer`] applies any `tower::Layer` (tower-http's `TraceLayer`, `CompressionLayer`,
//!   `SetRequestIdLayer`, `TimeoutLayer`, rate limiters...) as a peregrine [`Middleware`], on
//!   the app, a group or a route (and before routing with
//!   [`App::layer_before_routing`]);
//! - [`App::mount_service`] mounts a `tower::Service` (an axum `Router`, a tonic-less gRPC
//!   gateway, any hyper-style service) under a path prefix.
//!
//! The bridge converts between peregrine's types and `http`'s: per request it builds an
//! `http::Request` (method, URI, headers; the body is streamed, not copied), lets the layer
//! run, and converts its `http::Response` back. What a layer changes on the request (method,
//! headers, body, extensions) is what the handler sees; what it changes on the response goes
//! out. Costs are measured in `docs/framework-tower.md`.
//!
//! ```
//! use peregrine::tower::TowerLayer;
//! use peregrine::{get, App, Request};
//! use tower_http::compression::CompressionLayer;
//! use tower_http::request_id::{MakeRequestUuid, SetRequestIdLayer};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = App::new()
//!     .route("/", get(|req: Request| async move {
//!         // A header a tower layer added to the request.
//!         req.header("x-request-id").unwrap_or("none").repeat(20)
//!     }))
//!     .layer(TowerLayer::new(CompressionLayer::new()))
//!     .layer(TowerLayer::new(SetRequestIdLayer::x_request_id(MakeRequestUuid)))
//!     .test();
//! let res = client.get("/").header("accept-encoding", "gzip").send().await;
//! assert_eq!(res.header("content-encoding"), Some("gzip"));
//! # });
//! ```

use crate::app::App;
use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::middleware::{Middleware, Next};
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::{Buf, Bytes};
use http_body::{Body as HttpBody, Frame, SizeHint};
use peregrine_server::{Body, BodyError, Response, ResponseBody};
use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Errors as tower passes them around.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `tower::Layer` used as peregrine middleware. The layer wraps the rest of the stack (inner
/// layers and the handler), seen by it as a `tower::Service<http::Request<LocalBody>>`.
///
/// The layer's service is built per request (`Layer::layer` is called with the rest of the
/// stack), which costs what the layer's constructor costs: usually a few `Arc` clones.
///
/// A service error (for example tower's own `Timeout` elapsing) is answered 500 and logged;
/// prefer layers that answer with a response (tower-http's `TimeoutLayer` answers 408).
pub struct TowerLayer<L>(L);

impl<L> TowerLayer<L> {
    /// Wraps `layer`.
    pub fn new(layer: L) -> Self {
        TowerLayer(layer)
    }
}

impl<L, S, B> Middleware for TowerLayer<L>
where
    L: Layer<NextService, Service = S> + Send + Sync + 'static,
    S: Service<http::Request<LocalBody>, Response = http::Response<B>> + 'static,
    S::Error: Into<BoxError>,
    S::Future: 'static,
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let mut svc = self.0.layer(NextService { next: Some(next) });
        Box::pin(async move {
            let (http_req, stash) = match to_http(req) {
                Ok(x) => x,
                Err(res) => return res,
            };
            if let Err(e) = std::future::poll_fn(|cx| svc.poll_ready(cx)).await {
                stash.take();
                return service_error(e.into());
            }
            let out = svc.call(http_req).await;
            // A layer that answered without calling the inner service leaves the request here.
            stash.take();
            match out {
                Ok(res) => from_http(res),
                Err(e) => service_error(e.into()),
            }
        })
    }
}

fn service_error(e: BoxError) -> Response {
    tracing::error!(error = %e, "tower service failed");
    Error::internal().into_response()
}

thread_local! {
    /// Requests whose `http` form is inside a tower layer, by key (the layer only sees the key,
    /// in the request's extensions: `http` extensions must be `Send`, a request is not).
    static STASH: RefCell<Vec<(u64, Request)>> = const { RefCell::new(Vec::new()) };
    /// Streamed response bodies set aside by [`ResponseBodyAs`] (not `Send`), by the key of the
    /// request they answer.
    static BODY_STASH: RefCell<Vec<(u64, ResponseBody)>> = const { RefCell::new(Vec::new()) };
    static NEXT_KEY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[derive(Clone, Copy)]
struct StashKey(u64);

/// Removes a stashed request when dropped (the layer may never call the inner service).
struct StashGuard(u64);

impl StashGuard {
    fn take(&self) -> Option<Request> {
        STASH.with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|(k, _)| *k == self.0)?;
            Some(s.swap_remove(i).1)
        })
    }
}

impl Drop for StashGuard {
    fn drop(&mut self) {
        // During thread teardown the table may be gone already.
        let _ = STASH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.retain(|(k, _)| *k != self.0);
            }
        });
        let _ = BODY_STASH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.retain(|(k, _)| *k != self.0);
            }
        });
    }
}

/// The peregrine request as an `http::Request`: method, URI (path as routed, query), headers,
/// version, the body (streamed), the peer address as a `SocketAddr` extension. The request
/// itself waits in a per-thread stash for the inner service.
fn to_http(mut req: Request) -> Result<(http::Request<LocalBody>, StashGuard), Response> {
    let mut builder = http::Request::builder()
        .method(req.method())
        .uri(uri_of(req.path(), req.query_string()))
        .version(match req.version() {
            peregrine_server::Version::Http10 => http::Version::HTTP_10,
            _ => http::Version::HTTP_11,
        });
    if let Some(h) = builder.headers_mut() {
        h.reserve(16);
        for (n, v) in req.headers() {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(n.as_bytes()),
                http::HeaderValue::from_bytes(v),
            ) {
                h.append(n, v);
            }
        }
    }
    let key = NEXT_KEY.with(|k| {
        let v = k.get();
        k.set(v.wrapping_add(1));
        v
    });
    if let Some(ext) = builder.extensions_mut() {
        // What outer tower layers left for inner ones (a `RequestId`...).
        if let Some(prev) = req.extension::<http::Extensions>() {
            ext.extend(prev.clone());
        }
    }
    let body = LocalBody::new(std::mem::replace(req.inner.body_mut(), Body::empty()));
    let peer = req.peer_addr();
    let http_req = builder
        .extension(StashKey(key))
        .extension(peer)
        .body(body)
        .map_err(|e| {
            Error::bad_request()
                .with_detail(format!("request not representable for tower: {e}"))
                .into_response()
        })?;
    STASH.with(|s| s.borrow_mut().push((key, req)));
    Ok((http_req, StashGuard(key)))
}

fn uri_of(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// The rest of the stack as a `tower::Service`: what a [`TowerLayer`]'s layer wraps.
pub struct NextService {
    next: Option<Next>,
}

impl<B> Service<http::Request<B>> for NextService
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<LocalResBody>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, http_req: http::Request<B>) -> Self::Future {
        let next = self.next.take();
        Box::pin(async move {
            let res = match (next, back_to_peregrine(http_req).await) {
                (Some(next), Ok(req)) => next.run(req).await,
                (None, _) => Error::internal()
                    .with_detail("tower layer called its inner service twice")
                    .into_response(),
                (_, Err(res)) => res,
            };
            Ok(to_http_response(res))
        })
    }
}

/// The stashed request with the layer's changes applied: method, path (before routing only),
/// headers, body, extensions.
async fn back_to_peregrine<B>(http_req: http::Request<B>) -> Result<Request, Response>
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = http_req.into_parts();
    let Some(StashKey(key)) = parts.extensions.remove::<StashKey>() else {
        return Err(Error::internal()
            .with_detail("tower layer dropped the request's extensions")
            .into_response());
    };
    let Some(mut req) = StashGuard(key).take() else {
        return Err(Error::internal()
            .with_detail("request missing from the tower stash")
            .into_response());
    };
    if parts.method.as_str() != req.method() {
        req.set_method(parts.method.as_str())
            .map_err(IntoResponse::into_response)?;
    }
    if parts.uri.path() != req.path() {
        req.set_path(parts.uri.path())
            .map_err(IntoResponse::into_response)?;
    }
    if !same_headers(&parts.headers, &req) {
        req.replace_headers(
            parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        );
    }
    // The body: ours unchanged goes back as is (streamed); a transformed one (decompressed,
    // limited...) is read here, up to the application's body limit.
    let boxed: Box<dyn Any> = Box::new(body);
    match boxed.downcast::<LocalBody>() {
        Ok(local) => *req.inner.body_mut() = local.into_engine_body(),
        Err(other) => {
            let Ok(other) = other.downcast::<B>() else {
                unreachable!("the body is a B")
            };
            let limit = usize::try_from(req.body_limit()).unwrap_or(usize::MAX);
            let bytes = collect(*other, limit).await?;
            *req.inner.body_mut() = Body::from_bytes(bytes);
        }
    }
    // The peer address was ours; anything else a layer left is worth keeping.
    parts.extensions.remove::<std::net::SocketAddr>();
    if !parts.extensions.is_empty() {
        // Layers leave values here (tower-http's `RequestId`, a tracing span...).
        req.insert_extension(parts.extensions);
    }
    Ok(req)
}

/// Reads a whole body, failing with 413 past `limit` bytes.
async fn collect<B>(body: B, limit: usize) -> Result<Bytes, Response>
where
    B: HttpBody,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            let e: BoxError = e.into();
            Error::bad_request()
                .with_detail(format!("request body: {e}"))
                .into_response()
        })?;
        if let Ok(mut data) = frame.into_data() {
            if out.len() + data.remaining() > limit {
                return Err(Error::new(413)
                    .with_detail("request body exceeds the size limit")
                    .into_response());
            }
            while data.has_remaining() {
                let c = data.chunk();
                out.extend_from_slice(c);
                let n = c.len();
                data.advance(n);
            }
        }
    }
    Ok(Bytes::from(out))
}

fn same_headers(map: &http::HeaderMap, req: &Request) -> bool {
    let mut n = 0;
    for (name, v) in req.headers() {
        n += 1;
        if !map.get_all(name).iter().any(|x| x.as_bytes() == v) {
            return false;
        }
    }
    n == map.len()
}

/// A peregrine response as an `http::Response` (for the layer to see and change).
fn to_http_response(res: Response) -> http::Response<LocalResBody> {
    let mut out = http::Response::new(LocalResBody(Some(res.body)));
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
fn from_http<B>(res: http::Response<B>) -> Response
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
            return Response {
                status: parts.status.as_u16(),
                headers,
                body,
            };
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
            if other.is_end_stream() {
                ResponseBody::Empty
            } else {
                ready_or_stream(Box::pin(*other))
            }
        }
    };
    Response {
        status: parts.status.as_u16(),
        headers,
        body,
    }
}

/// A layer's body that is all there at once (a wrapped full body: `TraceLayer`,
/// `SetResponseHeader`...) goes out as a full body with a `Content-Length`, not chunked: it is
/// polled once without a waker that matters, and streamed only if it is not ready.
fn ready_or_stream<B>(mut body: Pin<Box<B>>) -> ResponseBody
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
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
                        return ResponseBody::Stream(Box::pin(Prefixed {
                            first: data,
                            rest: BodyStream(body),
                        }));
                    }
                }
            }
            // An error or a body that must wait: stream it (what was read goes first).
            Poll::Ready(Some(Err(e))) => {
                let first = data.map(Ok).into_iter();
                let err = std::iter::once(Err(std::io::Error::other(e.into())));
                return ResponseBody::Stream(Box::pin(Iter(first.chain(err))));
            }
            Poll::Pending => {
                return ResponseBody::Stream(Box::pin(Prefixed {
                    first: data,
                    rest: BodyStream(body),
                }));
            }
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

/// The request body as tower layers see it: the engine's body, read on demand (no copy).
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
    fn new(body: Body) -> Self {
        LocalBody {
            state: LocalBodyState::Idle(body),
        }
    }

    /// Back to the engine's body, if nothing was read from it yet; otherwise what is left.
    fn into_engine_body(self) -> Body {
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

/// A `tower::Layer` that makes the rest of the stack answer with a response body of type `B`
/// instead of [`LocalResBody`], for layers that only work with a given body type.
///
/// The case it exists for is tower_governor's `GovernorLayer`: its service requires
/// `http::Response<B>: From<GovernorError>` of the inner service's body type `B`, and that
/// conversion exists only for `axum::body::Body` (and tonic's); no other crate may add one for
/// its own body type (Rust's orphan rule: both `From` and `http::Response` are foreign, and a
/// local type as `Response`'s parameter does not make the impl local). Put `ResponseBodyAs`
/// directly under the governor layer, with `B = axum::body::Body`:
///
/// ```
/// use peregrine::tower::{ResponseBodyAs, TowerLayer};
/// use peregrine::{get, App, Request};
/// use std::net::{IpAddr, SocketAddr};
/// use std::sync::Arc;
/// use tower::ServiceBuilder;
/// use tower_governor::{governor::GovernorConfigBuilder, key_extractor::KeyExtractor};
/// use tower_governor::{GovernorError, GovernorLayer};
///
/// /// The key: the peer IP the bridge puts in the request's extensions (tower_governor's
/// /// `PeerIpKeyExtractor` reads axum's `ConnectInfo` only).
/// #[derive(Clone)]
/// struct PeerIp;
/// impl KeyExtractor for PeerIp {
///     type Key = IpAddr;
///     fn extract<T>(&self, req: &http::Request<T>) -> Result<IpAddr, GovernorError> {
///         let peer = req.extensions().get::<SocketAddr>();
///         peer.map(|a| a.ip()).ok_or(GovernorError::UnableToExtractKey)
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // Per client IP: a burst of 2, then one more request every 10 seconds.
/// let config = GovernorConfigBuilder::default()
///     .key_extractor(PeerIp)
///     .per_second(10)
///     .burst_size(2)
///     .finish()
///     .unwrap();
/// let client = App::new()
///     .route("/", get(|_req: Request| async { "ok" }))
///     .layer(TowerLayer::new(
///         ServiceBuilder::new()
///             .layer(GovernorLayer::new(Arc::new(config)))
///             .layer(ResponseBodyAs::<axum::body::Body>::new()),
///     ))
///     .test();
/// assert_eq!(client.get("/").send().await.status(), 200);
/// assert_eq!(client.get("/").send().await.status(), 200);
/// assert_eq!(client.get("/").send().await.status(), 429);
/// # });
/// ```
///
/// Bodies: an empty or in-memory body becomes a `B` (zero-copy from `Bytes`); a streamed or
/// file body, which is not `Send` and cannot go into `B`, is set aside on the worker and sent
/// as is (the layers above see an empty `B` for it), so layers between this one and the
/// [`TowerLayer`] must not rewrite streamed bodies (put a `CompressionLayer` in a
/// `TowerLayer` of its own).
pub struct ResponseBodyAs<B>(std::marker::PhantomData<fn() -> B>);

impl<B> ResponseBodyAs<B> {
    /// The layer.
    pub fn new() -> Self {
        ResponseBodyAs(std::marker::PhantomData)
    }
}

impl<B> Default for ResponseBodyAs<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B> Clone for ResponseBodyAs<B> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<B, S> Layer<S> for ResponseBodyAs<B> {
    type Service = ResponseBodyAsService<S, B>;
    fn layer(&self, inner: S) -> Self::Service {
        ResponseBodyAsService {
            inner,
            body: std::marker::PhantomData,
        }
    }
}

/// The service of [`ResponseBodyAs`].
pub struct ResponseBodyAsService<S, B> {
    inner: S,
    body: std::marker::PhantomData<fn() -> B>,
}

impl<S: Clone, B> Clone for ResponseBodyAsService<S, B> {
    fn clone(&self) -> Self {
        ResponseBodyAsService {
            inner: self.inner.clone(),
            body: std::marker::PhantomData,
        }
    }
}

/// Marks a response whose real body waits in the worker's stash (see [`ResponseBodyAs`]).
#[derive(Clone, Copy)]
struct StashedBody(u64);

impl<S, B, ReqBody> Service<http::Request<ReqBody>> for ResponseBodyAsService<S, B>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<LocalResBody>>,
    S::Future: 'static,
    B: From<Bytes> + Default + 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let key = req.extensions().get::<StashKey>().map(|k| k.0);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let (mut parts, body) = fut.await?.into_parts();
            let body = match (body.0, key) {
                (None | Some(ResponseBody::Empty), _) => B::default(),
                (Some(ResponseBody::Full(bytes)), _) => B::from(bytes),
                (Some(ResponseBody::Static(bytes)), _) => B::from(Bytes::from_static(bytes)),
                (Some(streamed), Some(key)) => {
                    BODY_STASH.with(|s| s.borrow_mut().push((key, streamed)));
                    parts.extensions.insert(StashedBody(key));
                    B::default()
                }
                (Some(_), None) => {
                    // Only reachable outside a `TowerLayer` (no request key to file it under).
                    tracing::error!(
                        "ResponseBodyAs used outside a TowerLayer: streamed body dropped"
                    );
                    B::default()
                }
            };
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// The response body as tower layers see it: the peregrine body, passed through untouched
/// unless a layer wraps it (compression). `Default` is the empty body (layers that answer
/// themselves, like tower-http's `TimeoutLayer`, build one).
#[derive(Default)]
pub struct LocalResBody(Option<ResponseBody>);

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
                match out {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(None) => {
                        self.0 = None;
                        Poll::Ready(None)
                    }
                    Poll::Ready(Some(r)) => Poll::Ready(Some(r.map(Frame::data))),
                }
            }
            Some(ResponseBody::SizedStream { len, mut stream }) => {
                let out = stream.as_mut().poll_next(cx);
                self.0 = Some(ResponseBody::SizedStream { len, stream });
                match out {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(None) => {
                        self.0 = None;
                        Poll::Ready(None)
                    }
                    Poll::Ready(Some(r)) => Poll::Ready(Some(r.map(Frame::data))),
                }
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

#[cfg(unix)]
fn read_file_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_file_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// The request body a mounted service sees: `Send` (axum requires it), fed from the engine's
/// body as the service reads it, with backpressure (a channel of one chunk).
pub struct SendBody {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, BodyError>>,
    exact: Option<u64>,
}

impl HttpBody for SendBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// A `tower::Service` mounted under a prefix (see [`App::mount_service`]).
struct Mounted<S> {
    prefix: Box<str>,
    svc: S,
}

impl<S, B> Handler for Mounted<S>
where
    S: Service<http::Request<SendBody>, Response = http::Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<BoxError>,
    S::Future: 'static,
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        let rest = req.path()[self.prefix.len()..].to_owned();
        let path = if rest.is_empty() {
            "/".to_owned()
        } else {
            rest
        };
        let mut builder = http::Request::builder()
            .method(req.method())
            .uri(uri_of(&path, req.query_string()))
            .version(http::Version::HTTP_11)
            .extension(req.peer_addr());
        if let Some(h) = builder.headers_mut() {
            for (n, v) in req.headers() {
                if let (Ok(n), Ok(v)) = (
                    http::HeaderName::from_bytes(n.as_bytes()),
                    http::HeaderValue::from_bytes(v),
                ) {
                    h.append(n, v);
                }
            }
        }
        // The application's body limit holds here too: a declared length past it is answered
        // 413 before the service runs, a longer stream is cut (the service sees a body error).
        let limit = req.body_limit();
        if req.content_length().is_some_and(|n| n > limit) {
            let res = crate::request::body_error(peregrine_server::BodyError::TooLarge);
            return Box::pin(std::future::ready(res.into_response()));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let body = SendBody {
            rx,
            exact: req.content_length(),
        };
        let http_req = match builder.body(body) {
            Ok(r) => r,
            Err(e) => {
                let res = Error::bad_request()
                    .with_detail(format!(
                        "request not representable for the mounted service: {e}"
                    ))
                    .into_response();
                return Box::pin(std::future::ready(res));
            }
        };
        let mut svc = self.svc.clone();
        let mut engine_body = std::mem::replace(req.inner.body_mut(), Body::empty());
        Box::pin(async move {
            // Feeds the service's Send body from ours, as it reads; runs beside the call (no
            // task spawned: the handler's future drives both).
            let pump = async move {
                let mut read = 0u64;
                loop {
                    let chunk = engine_body.chunk().await;
                    let item = match chunk {
                        Ok(Some(b)) => {
                            read = read.saturating_add(b.len() as u64);
                            if read > limit {
                                Err(peregrine_server::BodyError::TooLarge)
                            } else {
                                Ok(b)
                            }
                        }
                        Ok(None) => break,
                        Err(e) => Err(e),
                    };
                    let done = item.is_err();
                    if tx.send(item).await.is_err() || done {
                        break;
                    }
                }
            };
            let call = async move {
                if let Err(e) = std::future::poll_fn(|cx| svc.poll_ready(cx)).await {
                    return service_error(e.into());
                }
                match svc.call(http_req).await {
                    Ok(res) => from_http(res),
                    Err(e) => service_error(e.into()),
                }
            };
            let mut pump = std::pin::pin!(pump);
            let mut call = std::pin::pin!(call);
            let mut pumping = true;
            std::future::poll_fn(|cx| {
                if pumping && pump.as_mut().poll(cx).is_ready() {
                    pumping = false;
                }
                call.as_mut().poll(cx)
            })
            .await
        })
    }
}

impl App {
    /// Mounts a `tower::Service` (for example an axum `Router`) under `prefix`: requests for
    /// `prefix` and everything below it go to `svc` with the prefix stripped from the path
    /// (`/legacy/users?x=1` → `/users?x=1`, `/legacy` → `/`), whatever their method. The
    /// request body is streamed to the service; the peer address is in the request's
    /// extensions as a `SocketAddr`. Application-wide layers apply to these requests too.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let legacy = axum::Router::new().route("/users/{id}", axum::routing::get(
    ///     |axum::extract::Path(id): axum::extract::Path<u32>| async move { format!("axum user {id}") },
    /// ));
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "peregrine" }))
    ///     .mount_service("/legacy", legacy)
    ///     .test();
    /// assert_eq!(client.get("/legacy/users/7").send().await.text(), "axum user 7");
    /// assert_eq!(client.get("/").send().await.text(), "peregrine");
    /// # });
    /// ```
    ///
    /// # Panics
    /// If `prefix` does not start with `/`, ends with `/`, or clashes with a route.
    pub fn mount_service<S, B>(self, prefix: &str, svc: S) -> Self
    where
        S: Service<http::Request<SendBody>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: 'static,
        B: HttpBody + 'static,
        B::Data: Buf,
        B::Error: Into<BoxError>,
    {
        assert!(
            prefix.starts_with('/') && (prefix == "/" || !prefix.ends_with('/')),
            "mount prefix {prefix:?} must start with '/' and not end with one"
        );
        let base = if prefix == "/" { "" } else { prefix };
        let handler = std::sync::Arc::new(Mounted {
            prefix: base.into(),
            svc,
        });
        let any = |h: std::sync::Arc<Mounted<S>>| crate::router::any(ArcHandler(h));
        let app = self.route(
            &format!("{base}/{{*peregrine_mounted_rest}}"),
            any(handler.clone()),
        );
        if base.is_empty() {
            app.route("/", any(handler))
        } else {
            app.route(base, any(handler))
        }
    }
}

/// One mounted service shared by its two routes (`prefix` and `prefix/...`).
struct ArcHandler<H>(std::sync::Arc<H>);

impl<H: Handler> Handler for ArcHandler<H> {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        self.0.call(req)
    }
}
