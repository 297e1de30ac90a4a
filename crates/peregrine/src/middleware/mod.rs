//! Onion-style middleware, composed once when the application is built.
//!
//! A middleware receives the request and a [`Next`] standing for the rest of the stack; it may
//! act before calling `next.run(req)`, after it (on the response), or not call it at all
//! (short-circuit). Layers are wrapped around each handler when [`App`](crate::App) compiles
//! its routes, so at request time a stack of N layers is N direct calls: nothing is looked up,
//! and a route without layers pays nothing.
//!
//! Order: the layer added last is the outermost (it sees the request first and the response
//! last), as with tower/axum.
//!
//! ```
//! use peregrine::{App, IntoResponse, Request, get};
//! use peregrine::middleware::{from_fn, Next};
//!
//! let app = App::new()
//!     .route("/", get(|_req: Request| async { "hi" }))
//!     .layer(from_fn(|req: Request, next: Next| async move {
//!         if req.header("authorization").is_none() {
//!             return peregrine::Error::unauthorized().into_response(); // short-circuit
//!         }
//!         let mut res = next.run(req).await;                  // inner layers + handler
//!         res.headers.push(("x-checked".into(), b"1"[..].into()));
//!         res
//!     }));
//! # let _ = app;
//! ```

mod compression;
mod cors;
mod logger;
mod request_id;
mod timeout;

pub use compression::Compression;
pub use cors::Cors;
pub use logger::Logger;
pub use request_id::{RequestId, RequestIdLayer};
pub use timeout::Timeout;

use crate::handler::{BoxFuture, Handler};
use crate::request::Request;
use crate::response::IntoResponse;
use peregrine_server::Response;
use std::future::Future;
use std::sync::Arc;

/// A middleware layer. Implement it for reusable layers with configuration, or use
/// [`from_fn`] for one-off layers written as async closures.
///
/// ```
/// use peregrine::middleware::{Middleware, Next};
/// use peregrine::{BoxFuture, Request, Response};
///
/// /// Adds a fixed header to every response.
/// struct Tag(&'static str);
///
/// impl Middleware for Tag {
///     fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
///         let value = self.0;
///         Box::pin(async move {
///             let mut res = next.run(req).await;
///             res.headers.push(("x-tag".into(), value.as_bytes().into()));
///             res
///         })
///     }
/// }
/// let app = peregrine::App::new().layer(Tag("a"));
/// # let _ = app;
/// ```
pub trait Middleware: Send + Sync + 'static {
    /// Handles `req`, calling `next.run(req)` to continue inward.
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response>;
}

/// The rest of the middleware stack and the handler.
pub struct Next {
    inner: Arc<dyn Handler>,
}

impl Next {
    /// Runs the inner layers and the handler.
    #[inline]
    pub fn run(self, req: Request) -> BoxFuture<Response> {
        self.inner.call(req)
    }
}

/// A layer from an async function or closure `(Request, Next) -> impl IntoResponse`.
///
/// ```
/// use peregrine::middleware::{from_fn, Next};
/// use peregrine::Request;
/// let timing = from_fn(|req: Request, next: Next| async move {
///     let start = std::time::Instant::now();
///     let res = next.run(req).await;
///     tracing::debug!(elapsed = ?start.elapsed(), "done");
///     res
/// });
/// let app = peregrine::App::new().layer(timing);
/// # let _ = app;
/// ```
pub fn from_fn<F, Fut, R>(f: F) -> FromFn<F>
where
    F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoResponse,
{
    FromFn(f)
}

/// See [`from_fn`].
pub struct FromFn<F>(F);

impl<F, Fut, R> Middleware for FromFn<F>
where
    F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoResponse,
{
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let fut = (self.0)(req, next);
        Box::pin(async move { fut.await.into_response() })
    }
}

/// A handler with one layer around it.
struct Layered {
    layer: Arc<dyn Middleware>,
    inner: Arc<dyn Handler>,
}

impl Handler for Layered {
    #[inline]
    fn call(&self, req: Request) -> BoxFuture<Response> {
        self.layer.call(
            req,
            Next {
                inner: self.inner.clone(),
            },
        )
    }
}

/// Wraps `handler` in `layers`, the last one outermost. Done once at startup.
pub(crate) fn wrap(handler: Arc<dyn Handler>, layers: &[Arc<dyn Middleware>]) -> Arc<dyn Handler> {
    layers.iter().fold(handler, |inner, layer| {
        Arc::new(Layered {
            layer: layer.clone(),
            inner,
        }) as Arc<dyn Handler>
    })
}

/// Is this header present in the response (case-insensitive name)?
pub(crate) fn has_header(res: &Response, name: &str) -> bool {
    res.headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(name))
}
