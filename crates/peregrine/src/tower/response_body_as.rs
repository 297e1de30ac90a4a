//! [`ResponseBodyAs`]: the rest of the stack answering with a given body type, for layers that
//! need one (tower_governor).

use super::body::LocalResBody;
use super::stash::{StashKey, StashedBody, BODY_STASH};
use crate::handler::BoxFuture;
use bytes::Bytes;
use peregrine_server::ResponseBody;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

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
///
/// [`TowerLayer`]: super::TowerLayer
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
