//! The application: routes, state, layers; compiled once into an engine [`Service`].
//!
//! `mod.rs` is the builder ([`App`] and its settings); `compile.rs` turns it into the compiled
//! service (route table, state checks); `service.rs` is that service, answering requests;
//! `statics.rs` and `last_param.rs` are routing's two shortcuts before the matcher (exact
//! paths, and `prefix/{name}` routes); `serve.rs` starts the engine with it.

mod compile;
mod last_param;
mod serve;
mod service;
mod statics;

pub use service::{AppFuture, AppService};

use crate::handler::{Handler, IntoHandler};
use crate::middleware::{Hook, Layer, Middleware};
use crate::path::EncodedSlashes;
#[allow(unused_imports)] // for the rustdoc links
use crate::request::Request;
use crate::router::{MethodRouter, Router};
use crate::state::{WorkerContext, WorkerInit};
#[allow(unused_imports)] // for the rustdoc links
use peregrine_server::{Server, ServerConfig, Service};
use std::any::{Any, TypeId};
use std::future::Future;
use std::sync::Arc;

/// Default limit for [`Request::bytes`], `text`, `json` and `form`.
///
/// ```
/// use peregrine::{post, App, Request, DEFAULT_BODY_LIMIT};
///
/// assert_eq!(DEFAULT_BODY_LIMIT, 1 << 20);
/// let client = App::new().route("/", post(|req: Request| async move { req.body_limit().to_string() })).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.post("/").send().await.text(), DEFAULT_BODY_LIMIT.to_string());
/// # });
/// ```
pub const DEFAULT_BODY_LIMIT: u64 = peregrine_server::DEFAULT_BODY_LIMIT;

/// A web application: a route table, shared state and middleware, served by the engine.
///
/// ```no_run
/// use peregrine::{App, Json, Request, get};
/// use peregrine::server::ServerConfig;
///
/// async fn hello(_req: Request) -> &'static str {
///     "Hello, World!"
/// }
///
/// fn main() -> std::io::Result<()> {
///     App::new()
///         .route("/", get(hello))
///         .run(ServerConfig::default()) // 127.0.0.1:8080 until SIGTERM / Ctrl-C
/// }
/// ```
pub struct App {
    router: Router,
    layers: Vec<Layer>,
    /// Layers that run before routing (they may rewrite method, path and headers).
    pre_routing: Vec<Layer>,
    states: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
    worker_inits: Vec<WorkerInit>,
    /// `None`: the engine's `max_body_size` from the config given to `serve`/`run`.
    body_limit: Option<u64>,
    decode_bodies: bool,
    fallback: Option<Arc<dyn Handler>>,
    method_not_allowed: Option<Arc<dyn Handler>>,
    encoded_slashes: EncodedSlashes,
}

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// An application with no routes (everything is 404).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/anything").send().await;
    /// assert_eq!((res.status(), res.header("content-type")), (404, Some("application/problem+json")));
    /// # });
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { "home" })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "home");
    /// assert_eq!(client.head("/").send().await.status(), 200); // HEAD from GET
    /// assert_eq!(client.post("/").send().await.status(), 405);
    /// # });
    /// ```
    pub fn new() -> Self {
        App {
            router: Router::new(),
            layers: Vec::new(),
            pre_routing: Vec::new(),
            states: Vec::new(),
            worker_inits: Vec::new(),
            body_limit: None,
            decode_bodies: true,
            fallback: None,
            method_not_allowed: None,
            encoded_slashes: EncodedSlashes::Refuse,
        }
    }

    /// Adds a route; see [`Router::route`] for the path syntax.
    ///
    /// ```
    /// use peregrine::{App, Request, get, post};
    /// async fn list(_: Request) -> &'static str { "[]" }
    /// async fn create(_: Request) -> (u16, &'static str) { (201, "{}") }
    /// async fn file(req: Request) -> Result<String, peregrine::Error> {
    ///     Ok(req.param_str("path")?.into_owned())
    /// }
    /// let app = App::new()
    ///     .route("/items", get(list).post(create))
    ///     .route("/files/{*path}", get(file));
    /// # let _ = app;
    /// ```
    pub fn route(mut self, path: &str, methods: MethodRouter) -> Self {
        self.router = self.router.route(path, methods);
        self
    }

    /// Mounts a group under `prefix`; see [`Router::nest`].
    ///
    /// ```
    /// use peregrine::{App, Request, Router, get};
    /// let v1 = Router::new().route("/status", get(|_r: Request| async { "ok" }));
    /// let app = App::new().nest("/api/v1", v1); // GET /api/v1/status
    /// # let _ = app;
    /// ```
    pub fn nest(mut self, prefix: &str, group: Router) -> Self {
        self.router = self.router.nest(prefix, group);
        self
    }

    /// Adds the routes of `group` at the top level, with its own layers.
    ///
    /// ```
    /// use peregrine::{App, Request, Router, get};
    /// use peregrine::middleware::Timeout;
    /// use std::time::Duration;
    /// let slow = Router::new()
    ///     .route("/report", get(|_r: Request| async { "done" }))
    ///     .layer(Timeout::new(Duration::from_secs(30))); // only for this group
    /// let app = App::new().route("/", get(|_r: Request| async { "home" })).merge(slow);
    /// # let _ = app;
    /// ```
    pub fn merge(mut self, group: Router) -> Self {
        self.router = self.router.merge(group);
        self
    }

    /// Adds an application-wide layer. It sees every request, including those answered 404,
    /// 405 or by the automatic `OPTIONS` (so CORS and logging belong here). The layer added
    /// last is the outermost. Routing happens before the layers run, so
    /// [`Request::route`] is known inside them.
    ///
    /// ```
    /// use peregrine::middleware::{Compression, Logger};
    /// let app = peregrine::App::new().layer(Compression::new()).layer(Logger::new());
    /// # let _ = app;
    /// ```
    pub fn layer<M: Middleware>(mut self, layer: M) -> Self {
        self.layers.push(Layer::Async(Arc::new(layer)));
        self
    }

    /// Adds an application-wide synchronous [`Hook`] (runs like a layer, in the order added).
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::Response;
    /// struct NoSniff;
    /// impl Hook for NoSniff {
    ///     fn after(&self, res: &mut Response) {
    ///         res.headers.push(("x-content-type-options".into(), b"nosniff"[..].into()));
    ///     }
    /// }
    /// let app = peregrine::App::new().hook(NoSniff);
    /// # let _ = app;
    /// ```
    pub fn hook<H: Hook>(mut self, hook: H) -> Self {
        self.layers.push(Layer::Hook(Arc::new(hook)));
        self
    }

    /// Adds a layer that runs *before routing*, so it may rewrite what routing sees: the method
    /// ([`Request::set_method`]), the path ([`Request::set_path`]) and headers
    /// ([`Request::set_header`]). The rewritten path is normalised and routed exactly like a
    /// path sent by the client (so a rewrite cannot smuggle `..` or `%2F` past the checks of
    /// the `path` module). These layers are outside every [`App::layer`]; the last added is
    /// the outermost. [`Request::route`] is not known inside them.
    ///
    /// ```
    /// use peregrine::middleware::{from_fn, Next};
    /// use peregrine::{get, App, Error, IntoResponse, Request};
    ///
    /// // Old clients call /v1/...; the routes live under /api/v1/.
    /// let app = App::new()
    ///     .route("/api/v1/ping", get(|_r: Request| async { "pong" }))
    ///     .layer_before_routing(from_fn(|mut req: Request, next: Next| async move {
    ///         if let Some(rest) = req.path().strip_prefix("/v1/") {
    ///             let new = format!("/api/v1/{rest}");
    ///             if let Err(e) = req.set_path(&new) {
    ///                 return e.into_response();
    ///             }
    ///         }
    ///         next.run(req).await
    ///     }));
    /// # let _ = app;
    /// ```
    pub fn layer_before_routing<M: Middleware>(mut self, layer: M) -> Self {
        self.pre_routing.push(Layer::Async(Arc::new(layer)));
        self
    }

    /// A synchronous [`Hook`] that runs before routing (see [`App::layer_before_routing`]):
    /// the cheap way to rewrite a request.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{delete, App, IntoResponse, Request, Response};
    ///
    /// /// HTML forms can only POST: honour `X-HTTP-Method-Override`.
    /// struct MethodOverride;
    /// impl Hook for MethodOverride {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if req.method() == "POST" {
    ///             if let Some(m) = req.header("x-http-method-override").map(str::to_owned) {
    ///                 req.set_method(&m).map_err(|e| e.into_response())?;
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// let app = App::new()
    ///     .route("/todos/{id}", delete(|_r: Request| async { "deleted" }))
    ///     .hook_before_routing(MethodOverride);
    /// # let _ = app;
    /// ```
    pub fn hook_before_routing<H: Hook>(mut self, hook: H) -> Self {
        self.pre_routing.push(Layer::Hook(Arc::new(hook)));
        self
    }

    /// Registers shared state of type `T`, read by handlers with [`Request::state`]. Several
    /// states of different types may be registered; registering a type again replaces it.
    /// Use interior mutability (atomics, `Mutex`) for state that changes.
    ///
    /// ```
    /// use peregrine::{App, Error, Request, get};
    /// use std::sync::Mutex;
    ///
    /// struct Config { greeting: String }
    /// struct Log(Mutex<Vec<String>>);
    ///
    /// async fn greet(req: Request) -> Result<String, Error> {
    ///     let who = req.param_str("who")?;
    ///     req.state::<Log>()?.0.lock().unwrap().push(who.to_string());
    ///     Ok(format!("{} {who}", req.state::<Config>()?.greeting))
    /// }
    /// let app = App::new()
    ///     .with_state(Config { greeting: "hello".into() })
    ///     .with_state(Log(Mutex::new(Vec::new())))
    ///     .route("/greet/{who}", get(greet));
    /// # let _ = app;
    /// ```
    pub fn with_state<T: Send + Sync + 'static>(mut self, state: T) -> Self {
        let id = TypeId::of::<T>();
        self.states.retain(|(t, _)| *t != id);
        self.states.push((id, Arc::new(state)));
        self
    }

    /// Builds per-worker state: `init` runs once on each worker thread, on that worker's
    /// runtime (so it may `await`, use `spawn_local`, and build values that are neither `Send`
    /// nor `Sync`: an `Rc`, a `RefCell` cache, a connection pool bound to the worker's
    /// runtime). Handlers read the value with [`Local<T>`](crate::Local) arguments (checked
    /// when the app is built) or [`Request::local`]; middleware with [`Request::local`].
    ///
    /// Initialisers run in the order registered and can read the values built before them
    /// with [`WorkerContext::local`] and the shared states with [`WorkerContext::state`].
    ///
    /// When it runs: served with [`App::serve`], [`App::run`], [`App::run_async`] or
    /// [`App::run_until`], on each worker before that worker accepts its first connection
    /// (the engine's [`Server::on_worker_start`] hook). If `init` fails on any worker, startup
    /// fails: those calls return the error (naming the worker) and nothing is served.
    ///
    /// A service built with [`App::into_service`] and called some other way (the
    /// [test client](crate::TestClient), an engine you start yourself) builds the state on
    /// the first request of each thread instead; there a failed `init` is logged, that request
    /// is answered `503` (problem+json, no internals) and the next request runs `init` again.
    ///
    /// ```
    /// use peregrine::{App, Local, Request, State, WorkerContext, get};
    /// use std::cell::RefCell;
    /// use std::collections::HashMap;
    ///
    /// struct DbUrl(String);
    /// /// Stands for a connection pool: one per worker, no locks between workers.
    /// struct Pool { url: String, worker: usize, cache: RefCell<HashMap<u64, String>> }
    ///
    /// async fn user(req: Request, Local(pool): Local<Pool>) -> Result<String, peregrine::Error> {
    ///     let id: u64 = req.param("id")?;
    ///     let mut cache = pool.cache.borrow_mut();
    ///     let name = cache.entry(id).or_insert_with(|| format!("user-{id}"));
    ///     Ok(format!("{name} via {} on worker {}", pool.url, pool.worker))
    /// }
    ///
    /// let app = App::new()
    ///     .with_state(DbUrl("postgres://db/app".into()))
    ///     .on_worker_start(|w: WorkerContext| async move {
    ///         let url = w.state::<DbUrl>().expect("registered above").0.clone();
    ///         // e.g. `Pool::connect(&url).await?`
    ///         Ok::<_, std::io::Error>(Pool { url, worker: w.index(), cache: Default::default() })
    ///     })
    ///     .route("/users/{id}", get(user));
    /// # let _ = app;
    /// ```
    pub fn on_worker_start<F, Fut, T, E>(mut self, init: F) -> Self
    where
        F: Fn(WorkerContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + 'static,
        T: 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.worker_inits.push(WorkerInit::new(init));
        self
    }

    /// [`App::on_worker_start`] for a value built without awaiting or failing.
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// use std::cell::Cell;
    /// struct Counter(Cell<u64>);
    /// let app = App::new()
    ///     .worker_local(|_w| Counter(Cell::new(0)))
    ///     .route("/", get(|req: Request| async move {
    ///         let c = req.local::<Counter>()?;
    ///         c.0.set(c.0.get() + 1);
    ///         Ok::<_, peregrine::Error>(c.0.get().to_string())
    ///     }));
    /// # let _ = app;
    /// ```
    pub fn worker_local<F, T>(self, init: F) -> Self
    where
        F: Fn(&WorkerContext) -> T + Send + Sync + 'static,
        T: 'static,
    {
        let init = Arc::new(init);
        self.on_worker_start(move |w| {
            let init = init.clone();
            async move { Ok::<T, std::convert::Infallible>(init(&w)) }
        })
    }

    /// The application's request body limit, in bytes: the engine's limit on each request's
    /// body ([`peregrine_server::Body::set_limit`], set before any middleware runs), which
    /// holds for every way of reading the body: [`Request::bytes`], `text`, `json`, `form`,
    /// `multipart` (whole stream), the raw [`Request::body_mut`] stream, the decoded size of a
    /// compressed body, and the body a mounted tower service (`App::mount_service`) reads, over
    /// HTTP/1.1 (Content-Length or chunked, its chunk extensions included) and HTTP/2 alike.
    /// Past it the answer is a 413 problem document (a declared `Content-Length` past it fails
    /// before anything is read, and before `100 Continue`). A route that takes more (an upload)
    /// or less sets its own with [`MethodRouter::body_limit`] or opts out with
    /// [`MethodRouter::no_body_limit`]; middleware and handlers may set it per request with
    /// [`Request::set_body_limit`] before reading.
    ///
    /// Without this call the limit is the engine's: the `max_body_size` of the [`ServerConfig`]
    /// given to [`App::serve`] / [`App::run`] ([`DEFAULT_BODY_LIMIT`], 1 MiB, by default and for
    /// a request made in memory, as by [`App::test`]). An unread body is drained (at most
    /// 256 KiB) or the connection closed by the engine.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let mut n = 0;
    ///     while let Some(piece) = req.body_mut().chunk().await? { // 413 past 100 MiB
    ///         n += piece.len();
    ///     }
    ///     Ok(n.to_string())
    /// }
    /// let app = App::new()
    ///     .body_limit(64 * 1024) // every route...
    ///     .route("/upload", post(upload).body_limit(100 << 20)); // ...but this one
    /// # let _ = app;
    /// ```
    pub fn body_limit(mut self, bytes: u64) -> Self {
        self.body_limit = Some(bytes);
        self
    }

    /// Whether [`Request::bytes`] (and `text`, `json`, `form`) decode a request body sent with
    /// `Content-Encoding: gzip`, `deflate` or `br` (default: yes). The decoded size is held to
    /// the body limit as it is produced, so a small compressed "bomb" is refused with 413
    /// without the worker allocating past the limit; an unknown coding is answered 415.
    ///
    /// ```
    /// let app = peregrine::App::new().decode_request_bodies(false); // hand over the raw bytes
    /// # let _ = app;
    /// ```
    pub fn decode_request_bodies(mut self, on: bool) -> Self {
        self.decode_bodies = on;
        self
    }

    /// What to do with `%2F` / `%5C` in request paths: refused with 400 by default; `Keep`
    /// leaves them encoded inside their segment (see [`crate::path`] for every rule).
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// use peregrine::path::EncodedSlashes;
    /// // GET /projects/group%2Fname -> id = "group/name"
    /// let app = App::new()
    ///     .encoded_slashes(EncodedSlashes::Keep)
    ///     .route("/projects/{id}", get(|req: Request| async move {
    ///         req.param_str("id").map(|id| id.into_owned())
    ///     }));
    /// # let _ = app;
    /// ```
    pub fn encoded_slashes(mut self, policy: EncodedSlashes) -> Self {
        self.encoded_slashes = policy;
        self
    }

    /// Answers requests that match no route (instead of the 404 problem document).
    ///
    /// ```
    /// use peregrine::{App, Html, Request};
    /// let app = App::new().fallback(|_req: Request| async { (404, Html("<h1>Lost?</h1>")) });
    /// # let _ = app;
    /// ```
    pub fn fallback<M, H: IntoHandler<M>>(mut self, handler: H) -> Self {
        self.fallback = Some(handler.into_handler());
        self
    }

    /// Answers requests for a known path with a method it has no handler for (instead of the
    /// 405 problem document), so that they take the application's own error format. The
    /// `Allow` header is added to the handler's answer unless it sets one. Like the automatic
    /// `OPTIONS` answer, it runs inside the layers and hooks of the path's group.
    ///
    /// ```
    /// use peregrine::{get, App, Json, Request};
    ///
    /// let client = App::new()
    ///     .route("/items", get(|_r: Request| async { "[]" }))
    ///     .method_not_allowed(|req: Request| async move {
    ///         let msg = format!("{} is not supported here", req.method());
    ///         (405, Json(serde_json::json!({ "error": msg })))
    ///     })
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.delete("/items").send().await;
    /// assert_eq!(res.status(), 405);
    /// assert_eq!(res.header("allow"), Some("GET, HEAD, OPTIONS"));
    /// assert_eq!(res.text(), r#"{"error":"DELETE is not supported here"}"#);
    /// # });
    /// ```
    pub fn method_not_allowed<M, H: IntoHandler<M>>(mut self, handler: H) -> Self {
        self.method_not_allowed = Some(handler.into_handler());
        self
    }
}
