//! The stack itself: the [`Middleware`] and [`Hook`] traits, [`Next`], and how layers are
//! wrapped around a handler, a leaf the middlewares beside it build on.

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
///
/// ```
/// use peregrine::middleware::{from_fn, Next};
/// use peregrine::{get, App, Request};
///
/// // Each layer records itself on the way in (a request header) and on the way out.
/// fn mark(name: &'static str) -> impl Fn(Request, Next) -> peregrine::BoxFuture<peregrine::Response> + Send + Sync {
///     move |mut req: Request, next: Next| {
///         let seen = format!("{}{name}>", req.header("x-path").unwrap_or(""));
///         req.set_header("x-path", seen).unwrap();
///         Box::pin(async move {
///             let mut res = next.run(req).await;
///             res.headers.push(("x-out".into(), name.as_bytes().to_vec().into()));
///             res
///         })
///     }
/// }
///
/// let client = App::new()
///     .route("/", get(|req: Request| async move { req.header("x-path").unwrap_or("").to_owned() }))
///     .layer(from_fn(mark("inner")))
///     .layer(from_fn(mark("outer"))) // added last: outermost
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/").send().await;
/// assert_eq!(res.text(), "outer>inner>");
/// assert_eq!(res.header_all("x-out"), ["inner", "outer"]);
/// # });
/// ```
pub struct Next {
    inner: Arc<dyn Handler>,
}

impl Next {
    /// Runs the inner layers and the handler.
    ///
    /// ```
    /// use peregrine::middleware::{from_fn, Next};
    /// use peregrine::{get, App, Error, IntoResponse, Request};
    ///
    /// // Runs the rest only for callers with a key; the others never reach the handler.
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "secret" }))
    ///     .layer(from_fn(|req: Request, next: Next| async move {
    ///         if req.header("x-key").is_none() {
    ///             return Error::new(401).into_response();
    ///         }
    ///         next.run(req).await
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").header("x-key", "k").send().await.text(), "secret");
    /// assert_eq!(client.get("/").send().await.status(), 401);
    /// # });
    /// ```
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

/// A layer as declared: asynchronous middleware or a synchronous hook.
#[derive(Clone)]
pub(crate) enum Layer {
    Async(Arc<dyn Middleware>),
    Hook(Arc<dyn Hook>),
}

/// A synchronous layer: code that runs before the inner layers and handler (and may answer
/// instead of them) and after them (on the response), without awaiting anything.
///
/// Hooks exist for speed: an asynchronous [`Middleware`] wraps the rest of the stack in a
/// future of its own (one allocation per layer and request), while any run of consecutive
/// hooks is composed into a single wrapper — five hooks cost one allocation per request, as
/// one would. Use a hook for header-adding, checking and rewriting layers; use [`Middleware`]
/// when the layer must await (timeouts, rate limiters calling out, body transforms).
///
/// Onion order holds across both kinds: the layer added last is the outermost. When a hook's
/// `before` answers, the hooks and layers inside it do not run, and those outside it still see
/// the response in their `after`.
///
/// ```
/// use peregrine::middleware::Hook;
/// use peregrine::{App, Error, IntoResponse, Request, Response, get};
///
/// /// Refuses requests without an API key; tags answers.
/// struct ApiKey;
///
/// impl Hook for ApiKey {
///     fn before(&self, req: &mut Request) -> Result<(), Response> {
///         match req.header("x-api-key") {
///             Some("letmein") => Ok(()),
///             _ => Err(Error::unauthorized().into_response()),
///         }
///     }
///     fn after(&self, res: &mut Response) {
///         res.headers.push(("x-api".into(), b"v1"[..].into()));
///     }
/// }
/// let app = App::new().route("/", get(|_r: Request| async { "hi" })).hook(ApiKey);
/// # let _ = app;
/// ```
pub trait Hook: Send + Sync + 'static {
    /// Runs before the inner layers; `Err(response)` answers with it (short-circuit). It may
    /// also change the request.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, IntoResponse, Request, Response};
    ///
    /// /// Maps the legacy `x-api-version: 1` header onto the v1 routes.
    /// struct LegacyVersion;
    ///
    /// impl Hook for LegacyVersion {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if req.header("x-api-version") == Some("1") && !req.path().starts_with("/v1/") {
    ///             let path = format!("/v1{}", req.path());
    ///             req.set_path(&path).map_err(|e| e.into_response())?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let client = App::new()
    ///     .route("/v1/users", get(|_r: Request| async { "v1 users" }))
    ///     .hook_before_routing(LegacyVersion)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/users").header("x-api-version", "1").send().await.text(), "v1 users");
    /// assert_eq!(client.get("/users").send().await.status(), 404);
    /// # });
    /// ```
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        let _ = req;
        Ok(())
    }
    /// Runs on the response on its way out (also on answers from a `before` further in, and
    /// on error answers).
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, Request, Response};
    ///
    /// /// Security headers on every answer, unless the handler set its own.
    /// struct SecurityHeaders;
    ///
    /// impl Hook for SecurityHeaders {
    ///     fn after(&self, res: &mut Response) {
    ///         for (name, value) in [("x-content-type-options", "nosniff"), ("x-frame-options", "DENY")] {
    ///             if !res.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
    ///                 res.headers.push((name.into(), value.as_bytes().into()));
    ///             }
    ///         }
    ///     }
    /// }
    ///
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "home" }))
    ///     .route("/embed", get(|_r: Request| async {
    ///         Response::text("widget").with_header("x-frame-options", &b"SAMEORIGIN"[..])
    ///     }))
    ///     .hook(SecurityHeaders)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let home = client.get("/").send().await;
    /// assert_eq!(home.header("x-frame-options"), Some("DENY"));
    /// assert_eq!(home.header("x-content-type-options"), Some("nosniff"));
    /// assert_eq!(client.get("/embed").send().await.header("x-frame-options"), Some("SAMEORIGIN"));
    /// # });
    /// ```
    fn after(&self, res: &mut Response) {
        let _ = res;
    }
}

/// A handler with one asynchronous layer around it.
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

/// A handler with a run of hooks around it, outermost first.
struct Hooked {
    hooks: Arc<[Arc<dyn Hook>]>,
    inner: Arc<dyn Handler>,
}

impl Handler for Hooked {
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        for (i, h) in self.hooks.iter().enumerate() {
            if let Err(mut res) = h.before(&mut req) {
                // Only the hooks outside the one that answered see the response.
                for outer in self.hooks[..i].iter().rev() {
                    outer.after(&mut res);
                }
                return Box::pin(std::future::ready(res));
            }
        }
        let fut = self.inner.call(req);
        let hooks = self.hooks.clone();
        Box::pin(async move {
            let mut res = fut.await;
            for h in hooks.iter().rev() {
                h.after(&mut res);
            }
            res
        })
    }
}

/// Wraps `handler` in `layers` (innermost first, so the last is the outermost), merging each
/// run of consecutive hooks into one wrapper. Done once at startup.
pub(crate) fn wrap(handler: Arc<dyn Handler>, layers: &[Layer]) -> Arc<dyn Handler> {
    let mut inner = handler;
    let mut i = 0;
    while i < layers.len() {
        match &layers[i] {
            Layer::Async(m) => {
                inner = Arc::new(Layered {
                    layer: m.clone(),
                    inner,
                });
                i += 1;
            }
            Layer::Hook(_) => {
                let start = i;
                while i < layers.len() && matches!(layers[i], Layer::Hook(_)) {
                    i += 1;
                }
                // Outermost first: the declaration order reversed.
                let hooks: Arc<[Arc<dyn Hook>]> = layers[start..i]
                    .iter()
                    .rev()
                    .map(|l| match l {
                        Layer::Hook(h) => h.clone(),
                        Layer::Async(_) => unreachable!("run holds hooks only"),
                    })
                    .collect();
                inner = Arc::new(Hooked { hooks, inner });
            }
        }
    }
    inner
}

/// Is this header present in the response (case-insensitive name)?
pub(crate) fn has_header(res: &Response, name: &str) -> bool {
    res.headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(name))
}
