//! [`TowerLayer`]: a `tower::Layer` as peregrine middleware, around [`NextService`] (the rest
//! of the stack as a `tower::Service`).

use super::body::{LocalBody, LocalResBody};
use super::box_error::{service_error, BoxError};
use super::request::{back_to_peregrine, to_http};
use super::response::{from_http, to_http_response};
use super::stash::StashKey;
use crate::error::Error;
use crate::handler::BoxFuture;
use crate::middleware::{Middleware, Next};
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::Buf;
use http_body::Body as HttpBody;
use peregrine_server::Response;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// A `tower::Layer` used as peregrine middleware. The layer wraps the rest of the stack (inner
/// layers and the handler), seen by it as a `tower::Service<http::Request<LocalBody>>`.
///
/// The layer's service is built per request (`Layer::layer` is called with the rest of the
/// stack), which costs what the layer's constructor costs: usually a few `Arc` clones.
///
/// A service error (for example tower's own `Timeout` elapsing) is answered 500 and logged;
/// prefer layers that answer with a response (tower-http's `TimeoutLayer` answers 408).
///
/// ```
/// use http::header::{HeaderValue, CACHE_CONTROL};
/// use peregrine::tower::TowerLayer;
/// use peregrine::{get, App, Request, Response, Router};
/// use tower_http::set_header::SetResponseHeaderLayer;
///
/// // Private answers for the account routes, unless a handler says otherwise.
/// let account = Router::new()
///     .route("/account", get(|_r: Request| async { "balance: 10" }))
///     .route("/account/avatar", get(|_r: Request| async {
///         Response::text("png").with_header("cache-control", &b"max-age=60"[..])
///     }))
///     .layer(TowerLayer::new(SetResponseHeaderLayer::if_not_present(
///         CACHE_CONTROL,
///         HeaderValue::from_static("private, no-store"),
///     )));
/// let client = App::new().merge(account).route("/", get(|_r: Request| async { "home" })).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/account").send().await.header("cache-control"), Some("private, no-store"));
/// assert_eq!(client.get("/account/avatar").send().await.header("cache-control"), Some("max-age=60"));
/// assert_eq!(client.get("/").send().await.header("cache-control"), None);
/// # });
/// ```
pub struct TowerLayer<L>(L);

impl<L> TowerLayer<L> {
    /// Wraps `layer`.
    ///
    /// ```
    /// use peregrine::tower::TowerLayer;
    /// use peregrine::{get, App, Request};
    /// use tower_http::normalize_path::NormalizePathLayer;
    ///
    /// // Before routing, so that `/users/` is routed as `/users`.
    /// let client = App::new()
    ///     .route("/users", get(|_r: Request| async { "users" }))
    ///     .layer_before_routing(TowerLayer::new(NormalizePathLayer::trim_trailing_slash()))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/users/").send().await.text(), "users");
    /// # });
    /// ```
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

/// The rest of the stack as a `tower::Service`: what a [`TowerLayer`]'s layer wraps.
///
/// ```
/// use peregrine::tower::{LocalBody, LocalResBody, NextService, TowerLayer};
/// use peregrine::{get, App, Request};
/// use tower::ServiceExt;
///
/// // Any tower layer whose service takes `NextService`; here one from `tower::util`.
/// let stamp = tower::layer::layer_fn(|inner: NextService| {
///     ServiceExt::<http::Request<LocalBody>>::map_response(inner, |mut res: http::Response<LocalResBody>| {
///         res.headers_mut().insert("x-served-by", http::HeaderValue::from_static("edge-1"));
///         res
///     })
/// });
/// let client = App::new().route("/", get(|_r: Request| async { "hi" })).layer(TowerLayer::new(stamp)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/").send().await.header("x-served-by"), Some("edge-1"));
/// # });
/// ```
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
        let key = http_req.extensions().get::<StashKey>().map(|k| k.0);
        Box::pin(async move {
            let res = match (next, back_to_peregrine(http_req).await) {
                (Some(next), Ok(req)) => next.run(req).await,
                (None, _) => Error::internal()
                    .with_detail("tower layer called its inner service twice")
                    .into_response(),
                (_, Err(res)) => res,
            };
            Ok(to_http_response(res, key))
        })
    }
}
