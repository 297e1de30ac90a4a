//! [`MethodRouter`]: the handlers of one path by method, their per-route layers and body limit,
//! and the functions that start one ([`get`], [`post`], [`any`], [`on`]...).

use crate::handler::{BoxFuture, Handler, IntoHandler};
use crate::middleware::{self, Hook, Layer, Middleware};
use crate::request::Request;
use peregrine_server::Method;
use peregrine_server::Response;
use std::sync::Arc;

/// Slots for the methods the codec recognises; `Method::Other` goes to a list by name.
pub(crate) const METHOD_SLOTS: usize = 9;
const SLOT_NAMES: [&str; METHOD_SLOTS] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE",
];

pub(crate) fn slot(m: Method) -> Option<usize> {
    Some(match m {
        Method::Get => 0,
        Method::Head => 1,
        Method::Post => 2,
        Method::Put => 3,
        Method::Delete => 4,
        Method::Options => 5,
        Method::Patch => 6,
        Method::Connect => 7,
        Method::Trace => 8,
        Method::Other => return None,
    })
}

pub(crate) fn slot_name(i: usize) -> &'static str {
    SLOT_NAMES[i]
}

fn slot_by_name(name: &str) -> Option<usize> {
    SLOT_NAMES.iter().position(|n| *n == name)
}

/// The handlers of one path, by method. Build it with [`get`], [`post`], ... and chain more
/// methods: `get(list).post(create)`.
///
/// ```
/// use peregrine::{App, Request, get};
/// async fn list(_: Request) -> &'static str { "[]" }
/// async fn create(_: Request) -> (u16, &'static str) { (201, "made") }
/// let app = App::new().route("/items", get(list).post(create));
/// # let _ = app;
/// ```
#[derive(Clone, Default)]
pub struct MethodRouter {
    pub(crate) slots: [Option<Endpoint>; METHOD_SLOTS],
    pub(crate) other: Vec<(Box<str>, Endpoint)>,
    pub(crate) any: Option<Endpoint>,
    /// The layers (innermost first) the path's automatic `OPTIONS` and 405 answers go
    /// through: the same group and route layers its handlers get.
    pub(crate) auto_layers: Vec<Layer>,
}

/// A handler and the layers around it (innermost first). Layers are only collected while
/// routes are declared; [`Endpoint::build`] composes them once, when the app is compiled.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) handler: Arc<dyn Handler>,
    layers: Vec<Layer>,
    /// This route's own body limit ([`MethodRouter::body_limit`]), if it has one.
    body_limit: Option<u64>,
}

impl Endpoint {
    fn new(handler: Arc<dyn Handler>) -> Self {
        Endpoint {
            handler,
            layers: Vec::new(),
            body_limit: None,
        }
    }
    /// The handler with its layers composed around it, and the route's body limit set
    /// outside them (so the route's own middleware sees it too).
    pub(crate) fn build(self) -> Endpoint {
        let mut handler = middleware::wrap(self.handler, &self.layers);
        if let Some(limit) = self.body_limit {
            handler = Arc::new(WithBodyLimit {
                limit,
                inner: handler,
            });
        }
        Endpoint {
            handler,
            layers: Vec::new(),
            body_limit: None,
        }
    }
}

/// Sets a route's body limit on the request, then runs the route (no allocation of its own:
/// the inner handler's future is returned as is).
struct WithBodyLimit {
    limit: u64,
    inner: Arc<dyn Handler>,
}

impl Handler for WithBodyLimit {
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        req.set_body_limit(self.limit);
        self.inner.call(req)
    }
    fn needs(&self, needs: &mut Vec<crate::state::Need>) {
        self.inner.needs(needs);
    }
}

macro_rules! method_fns {
    ($($(#[$doc:meta])* $name:ident => $slot:expr;)*) => {
        impl MethodRouter {
            $(
                $(#[$doc])*
                pub fn $name<M, H: IntoHandler<M>>(self, handler: H) -> Self {
                    self.set_slot($slot, handler.into_handler())
                }
            )*
        }
        $(
            $(#[$doc])*
            pub fn $name<M, H: IntoHandler<M>>(handler: H) -> MethodRouter {
                MethodRouter::default().$name(handler)
            }
        )*
    };
}

method_fns! {
    /// Handle `GET` (and `HEAD`, unless a `HEAD` handler is set: the engine sends the headers
    /// of the GET answer without its body).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    /// let app = App::new().route("/", get(|_req: Request| async { "home" }));
    /// # let _ = app;
    /// ```
    get => 0;
    /// Handle `HEAD` explicitly.
    ///
    /// ```
    /// use peregrine::{get, head, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/file", get(|_r: Request| async { "contents" }).head(|_r: Request| async { ([("x-size", "8")], "") }))
    ///     .route("/probe", head(|_r: Request| async { ([("x-alive", "yes")], "") }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.head("/file").send().await.header("x-size"), Some("8"));
    /// assert_eq!(client.get("/file").send().await.text(), "contents");
    /// assert_eq!(client.head("/probe").send().await.header("x-alive"), Some("yes"));
    /// # });
    /// ```
    head => 1;
    /// Handle `POST`.
    ///
    /// ```
    /// use peregrine::{get, post, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/items/{id}", get(|_r: Request| async { "item" }).post(|_r: Request| async { (202, "post ok") }))
    ///     .route("/only", post(|_r: Request| async { "only post" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/items/1").send().await.status(), 202);
    /// assert_eq!(client.post("/only").send().await.text(), "only post");
    /// assert_eq!(client.get("/only").send().await.status(), 405);
    /// # });
    /// ```
    post => 2;
    /// Handle `PUT`.
    ///
    /// ```
    /// use peregrine::{get, put, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/items/{id}", get(|_r: Request| async { "item" }).put(|_r: Request| async { (202, "put ok") }))
    ///     .route("/only", put(|_r: Request| async { "only put" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.put("/items/1").send().await.status(), 202);
    /// assert_eq!(client.put("/only").send().await.text(), "only put");
    /// assert_eq!(client.get("/only").send().await.status(), 405);
    /// # });
    /// ```
    put => 3;
    /// Handle `DELETE`.
    ///
    /// ```
    /// use peregrine::{get, delete, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/items/{id}", get(|_r: Request| async { "item" }).delete(|_r: Request| async { (202, "delete ok") }))
    ///     .route("/only", delete(|_r: Request| async { "only delete" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.delete("/items/1").send().await.status(), 202);
    /// assert_eq!(client.delete("/only").send().await.text(), "only delete");
    /// assert_eq!(client.get("/only").send().await.status(), 405);
    /// # });
    /// ```
    delete => 4;
    /// Handle `OPTIONS` (otherwise answered automatically: 204 with `Allow`).
    ///
    /// ```
    /// use peregrine::{get, options, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/auto", get(|_r: Request| async { "x" }))
    ///     .route("/custom", get(|_r: Request| async { "x" }).options(|_r: Request| async { (200, "custom") }))
    ///     .route("/only", options(|_r: Request| async { "options only" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let auto = client.options("/auto").send().await;
    /// assert_eq!(auto.status(), 204);
    /// assert!(auto.header("allow").is_some_and(|a| a.contains("GET")));
    /// assert_eq!(client.options("/custom").send().await.text(), "custom");
    /// assert_eq!(client.options("/only").send().await.text(), "options only");
    /// # });
    /// ```
    options => 5;
    /// Handle `PATCH`.
    ///
    /// ```
    /// use peregrine::{get, patch, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/items/{id}", get(|_r: Request| async { "item" }).patch(|_r: Request| async { (202, "patch ok") }))
    ///     .route("/only", patch(|_r: Request| async { "only patch" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.patch("/items/1").send().await.status(), 202);
    /// assert_eq!(client.patch("/only").send().await.text(), "only patch");
    /// assert_eq!(client.get("/only").send().await.status(), 405);
    /// # });
    /// ```
    patch => 6;
    /// Handle `TRACE`.
    ///
    /// ```
    /// use peregrine::{get, trace, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "x" }).trace(|req: Request| async move { req.method().to_owned() }))
    ///     .route("/t", trace(|_r: Request| async { "traced" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.request("TRACE", "/").send().await.text(), "TRACE");
    /// assert_eq!(client.request("TRACE", "/t").send().await.text(), "traced");
    /// # });
    /// ```
    trace => 8;
}

/// A route answering every method with `handler`.
///
/// ```
/// use peregrine::{any, App, Request};
/// let app = App::new().route("/echo-method", any(|req: Request| async move {
///     req.method().to_owned()
/// }));
/// # let _ = app;
/// ```
pub fn any<M, H: IntoHandler<M>>(handler: H) -> MethodRouter {
    MethodRouter {
        any: Some(Endpoint::new(handler.into_handler())),
        ..MethodRouter::default()
    }
}

/// A route for a method by name, including extension methods such as `PROPFIND`.
///
/// ```
/// use peregrine::{on, Request};
/// let r = on("PROPFIND", |_req: Request| async { (207, "<multistatus/>") });
/// # let _ = r;
/// ```
pub fn on<M, H: IntoHandler<M>>(method: &str, handler: H) -> MethodRouter {
    MethodRouter::default().on(method, handler)
}

impl MethodRouter {
    fn set_slot(mut self, i: usize, h: Arc<dyn Handler>) -> Self {
        let h = Endpoint::new(h);
        assert!(
            self.slots[i].is_none(),
            "handler for {} set twice",
            SLOT_NAMES[i]
        );
        self.slots[i] = Some(h);
        self
    }

    /// Adds a handler for the method named `method` (case-sensitive, as HTTP methods are).
    ///
    /// # Panics
    /// If `method` is not a valid token or already has a handler.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/cache/{key}", get(|_r: Request| async { "value" }).on("PURGE", |_r: Request| async { "purged" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.request("PURGE", "/cache/home").send().await.text(), "purged");
    /// let res = client.delete("/cache/home").send().await;
    /// assert_eq!(res.status(), 405);
    /// assert_eq!(res.header("allow"), Some("GET, HEAD, OPTIONS, PURGE"));
    /// # });
    /// ```
    pub fn on<M, H: IntoHandler<M>>(mut self, method: &str, handler: H) -> Self {
        assert!(
            peregrine_server::codec::grammar::is_token(method.as_bytes()),
            "invalid method name {method:?}"
        );
        if let Some(i) = slot_by_name(method) {
            return self.set_slot(i, handler.into_handler());
        }
        assert!(
            !self.other.iter().any(|(n, _)| &**n == method),
            "handler for {method} set twice"
        );
        self.other
            .push((method.into(), Endpoint::new(handler.into_handler())));
        self
    }

    /// Handles every method not otherwise set.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/webhook", get(|_r: Request| async { "send a POST" }).any(|req: Request| async move {
    ///         format!("got {}", req.method())
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/webhook").send().await.text(), "send a POST");
    /// assert_eq!(client.post("/webhook").send().await.text(), "got POST");
    /// assert_eq!(client.request("PATCH", "/webhook").send().await.text(), "got PATCH");
    /// # });
    /// ```
    pub fn any<M, H: IntoHandler<M>>(mut self, handler: H) -> Self {
        self.any = Some(Endpoint::new(handler.into_handler()));
        self
    }

    /// Wraps this route's handlers in `layer` (the last layer added is the outermost).
    ///
    /// ```
    /// use peregrine::{get, Request};
    /// use peregrine::middleware::Timeout;
    /// let r = get(|_req: Request| async { "slow" }).layer(Timeout::new(std::time::Duration::from_secs(2)));
    /// # let _ = r;
    /// ```
    pub fn layer<M: Middleware>(self, layer: M) -> Self {
        self.push_layer(Layer::Async(Arc::new(layer)))
    }

    /// Wraps this route's handlers in a synchronous [`Hook`] (see there: consecutive hooks
    /// cost one allocation per request together, not one each).
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, Request, Response};
    ///
    /// /// Marks a deprecated endpoint (RFC 9745).
    /// struct Deprecated;
    /// impl Hook for Deprecated {
    ///     fn after(&self, res: &mut Response) {
    ///         res.headers.push(("deprecation".into(), b"@1735689600"[..].into()));
    ///     }
    /// }
    ///
    /// let client = App::new()
    ///     .route("/v1/items", get(|_r: Request| async { "[]" }).hook(Deprecated))
    ///     .route("/v2/items", get(|_r: Request| async { "[]" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/v1/items").send().await.header("deprecation"), Some("@1735689600"));
    /// assert_eq!(client.get("/v2/items").send().await.header("deprecation"), None);
    /// # });
    /// ```
    pub fn hook<H: Hook>(self, hook: H) -> Self {
        self.push_layer(Layer::Hook(Arc::new(hook)))
    }

    /// This route's body limit, in bytes, instead of the application's
    /// ([`App::body_limit`](crate::App::body_limit)): for an upload route that takes more (or
    /// an endpoint that should take less). It holds for every way of reading the body
    /// ([`Request::bytes`], `json`, `form`, `multipart`, the raw
    /// [`Request::body_mut`] stream) and is set before the route's own middleware runs;
    /// application-wide middleware runs before routing's choice is applied and sees the
    /// application's limit. Applies to the methods registered so far on this `MethodRouter`.
    ///
    /// ```
    /// use peregrine::{post, put, App, Error, Request};
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let mut n = 0;
    ///     while let Some(piece) = req.body_mut().chunk().await? {
    ///         n += piece.len(); // write it somewhere
    ///     }
    ///     Ok(n.to_string())
    /// }
    /// let app = App::new()
    ///     .body_limit(16 * 1024) // JSON endpoints
    ///     .route("/videos", post(upload).put(upload).body_limit(2 << 30)); // 2 GiB here
    /// # let _ = app;
    /// ```
    pub fn body_limit(mut self, bytes: u64) -> Self {
        for e in self.endpoints_mut() {
            e.body_limit = Some(bytes);
        }
        self
    }

    /// No body limit for this route (see [`MethodRouter::body_limit`]): the handler decides
    /// how much it reads. The engine's timeouts and minimum rates still apply.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn ingest(mut req: Request) -> Result<String, Error> {
    ///     let mut n = 0;
    ///     while let Some(piece) = req.body_mut().chunk().await? {
    ///         n += piece.len();
    ///     }
    ///     Ok(n.to_string())
    /// }
    ///
    /// let client = App::new()
    ///     .body_limit(1024)
    ///     .route("/small", post(ingest))
    ///     .route("/ingest", post(ingest).no_body_limit())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/small").body(vec![0u8; 4096]).send().await.status(), 413);
    /// assert_eq!(client.post("/ingest").body(vec![0u8; 4096]).send().await.text(), "4096");
    /// # });
    /// ```
    pub fn no_body_limit(self) -> Self {
        self.body_limit(u64::MAX)
    }

    pub(crate) fn push_layer(mut self, layer: Layer) -> Self {
        for e in self.endpoints_mut() {
            e.layers.push(layer.clone());
        }
        // The automatic answers are the path's too: a group's CORS answers their preflight,
        // its auth hook guards the method list.
        self.auto_layers.push(layer);
        self
    }

    fn endpoints_mut(&mut self) -> impl Iterator<Item = &mut Endpoint> {
        self.slots
            .iter_mut()
            .flatten()
            .chain(self.other.iter_mut().map(|(_, e)| e))
            .chain(self.any.iter_mut())
    }

    /// Every handler with its layers composed (done once, at compile time).
    pub(crate) fn build(mut self) -> MethodRouter {
        for e in self.endpoints_mut() {
            *e = e.clone().build();
        }
        self
    }

    pub(super) fn merge(&mut self, other: MethodRouter, path: &str) {
        for (i, h) in other.slots.into_iter().enumerate() {
            if let Some(h) = h {
                assert!(
                    self.slots[i].is_none(),
                    "route {path}: handler for {} registered twice",
                    SLOT_NAMES[i]
                );
                self.slots[i] = Some(h);
            }
        }
        for (n, h) in other.other {
            assert!(
                !self.other.iter().any(|(m, _)| *m == n),
                "route {path}: handler for {n} registered twice"
            );
            self.other.push((n, h));
        }
        if let Some(h) = other.any {
            assert!(
                self.any.is_none(),
                "route {path}: `any` handler registered twice"
            );
            self.any = Some(h);
        }
        // Groups sharing a path: the automatic answers take the layers of the first one that
        // has any (a layered group is never skipped for an unlayered one).
        if self.auto_layers.is_empty() {
            self.auto_layers = other.auto_layers;
        }
    }

    /// The `Allow` header value: the methods set, plus HEAD with GET, plus OPTIONS (answered
    /// automatically when not set).
    pub(crate) fn allow(&self) -> Vec<u8> {
        if self.any.is_some() {
            return b"GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH, TRACE".to_vec();
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, h) in self.slots.iter().enumerate() {
            if h.is_some() || (i == 1 && self.slots[0].is_some()) || i == 5 {
                names.push(SLOT_NAMES[i]);
            }
        }
        names.extend(self.other.iter().map(|(n, _)| &**n));
        names.join(", ").into_bytes()
    }
}
