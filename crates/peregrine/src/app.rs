// Over 600 lines: the App builder and the service it compiles into (routing, worker state, serve/run forms) share private types; splitting them is a known follow-up.
//! The application: routes, state, layers; compiled once into an engine [`Service`].

use crate::error::Error;
use crate::handler::{BoxFuture, Handler, IntoHandler};
use crate::middleware::{self, Hook, Layer, Middleware};
use crate::path::{self, EncodedSlashes};
use crate::request::{Request, BAD_PATH, NO_ROUTE, PRE_ROUTING};
use crate::response::IntoResponse;
use crate::router::{self, MethodRouter, Router};
use crate::state::{Need, StateMapHolder, WorkerContext, WorkerInit, WorkerInits};
use peregrine_server::{Method, Response, Server, ServerConfig, ServerHandle, Service};
use smallvec::SmallVec;
use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Default limit for [`Request::bytes`], `text`, `json` and `form`.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

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
    body_limit: Option<usize>,
    decode_bodies: bool,
    fallback: Option<Arc<dyn Handler>>,
    encoded_slashes: EncodedSlashes,
}

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// An application with no routes (everything is 404).
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
    /// When it runs: on each worker, before the first request that worker answers (the
    /// engine's worker loop offers no hook before it accepts, so the first request waits for
    /// it; concurrent first requests share one run). If `init` fails, the error is logged,
    /// that request is answered `503` (problem+json, no internals), and the next request on
    /// that worker runs `init` again.
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

    /// The request body limit: one number for the engine and the framework. Reading a body
    /// with [`Request::bytes`], `text`, `json`, `form`, `multipart` (whole stream), and the
    /// decoded size of a compressed body, fail past it with a 413 problem document.
    ///
    /// Without this call the limit is the `max_body_size` of the [`ServerConfig`] given to
    /// [`App::serve`] / [`App::run`] (default 1 MiB; [`DEFAULT_BODY_LIMIT`] for a service built
    /// with [`App::into_service`]). When serving, the framework takes the engine's
    /// declared-length check over (it raises the engine's `max_body_size`), so a too-large
    /// body is answered as problem+json by the framework instead of `text/plain` by the
    /// engine; an unread body is still drained (at most 256 KiB) or the connection closed by
    /// the engine. A handler reading the raw body with [`Request::body_mut`] counts for itself.
    ///
    /// ```
    /// let app = peregrine::App::new().body_limit(64 * 1024);
    /// # let _ = app;
    /// ```
    pub fn body_limit(mut self, bytes: usize) -> Self {
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

    /// Compiles the route table into an engine [`Service`].
    ///
    /// # Panics
    /// If two route patterns conflict (for example `/users/{id}` and `/users/{name}`).
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// use peregrine::server::{Server, ServerConfig};
    /// let service = App::new().route("/", get(|_r: Request| async { "hi" })).into_service();
    /// // Hand it to the engine yourself, e.g. Server::new(ServerConfig::default()).serve(service)
    /// # let _ = (service, Server::new(ServerConfig::default()));
    /// ```
    pub fn into_service(self) -> AppService {
        match self.try_into_service() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Compiles the route table, reporting a conflict between patterns, or a handler needing
    /// state that was never provided, as an error.
    ///
    /// State needs are known for handlers taking [`State<T>`](crate::State),
    /// [`Local<T>`](crate::Local) or other [`Extract`](crate::Extract) arguments; a handler
    /// calling [`Request::state`] in its body is only checked when it runs (a logged 500).
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// let err = App::new()
    ///     .route("/users/{id}", get(|_r: Request| async { "a" }))
    ///     .route("/users/{name}", get(|_r: Request| async { "b" }))
    ///     .try_into_service()
    ///     .err()
    ///     .unwrap();
    /// assert!(err.contains("/users/{name}"));
    /// ```
    pub fn try_into_service(self) -> Result<AppService, String> {
        let mut matcher = matchit::Router::new();
        let mut routes = Vec::new();
        let mut all_methods: Vec<String> = Vec::new();
        let mut needs = Vec::new();
        for (path, methods) in self.router.flatten("") {
            check_needs(
                &path,
                &methods,
                &self.states,
                &self.worker_inits,
                &mut needs,
            )?;
            matcher
                .insert(path.as_str(), routes.len() as u32)
                .map_err(|e| format!("route {path}: {e}"))?;
            let methods = methods.build();
            let allow = methods.allow();
            for m in String::from_utf8_lossy(&allow).split(", ") {
                if !all_methods.iter().any(|x| x == m) {
                    all_methods.push(m.to_owned());
                }
            }
            routes.push(Route {
                param_names: router::param_names(&path).into_boxed_slice(),
                pattern: path.into_boxed_str(),
                allow,
                methods,
            });
        }
        if let Some(f) = &self.fallback {
            needs.clear();
            f.needs(&mut needs);
            if let Some(n) = needs
                .iter()
                .find(|n| !n.met(&self.states, &self.worker_inits))
            {
                return Err(format!("fallback handler needs {n}"));
            }
        }
        let states = Arc::new(StateMapHolder(self.states));
        let pre_routing = if self.pre_routing.is_empty() {
            None
        } else {
            Some(middleware::wrap(
                Arc::new(RouteThenStart),
                &self.pre_routing,
            ))
        };
        let chain = if self.layers.is_empty() {
            None
        } else {
            Some(middleware::wrap(Arc::new(Dispatch), &self.layers))
        };
        Ok(AppService {
            shared: Arc::new(Shared {
                matcher,
                routes,
                has_worker_inits: !self.worker_inits.is_empty(),
                worker: Arc::new(WorkerInits::new(self.worker_inits, states.clone())),
                states,
                body_limit: self.body_limit.unwrap_or(DEFAULT_BODY_LIMIT),
                decode_bodies: self.decode_bodies,
                chain,
                fallback: self.fallback,
                encoded_slashes: self.encoded_slashes,
                pre_routing,
                all_allow: all_methods.join(", ").into_bytes(),
            }),
        })
    }

    /// Starts serving on the engine; returns once the workers listen.
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    /// use peregrine::server::ServerConfig;
    /// let mut config = ServerConfig::default();
    /// config.addr = "127.0.0.1:0".parse().unwrap();
    /// let handle = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .serve(config)?;
    /// println!("listening on {}", handle.local_addr());
    /// handle.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// It does not block and works inside or outside a tokio runtime (the workers run their
    /// own runtimes on their own threads). A route conflict or a missing state is an
    /// `InvalidInput` error.
    pub fn serve(self, config: ServerConfig) -> std::io::Result<ServerHandle> {
        let (service, config) = self.build_for(config)?;
        Server::new(config).serve(service)
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully. Blocks the calling thread.
    ///
    /// Inside a tokio runtime (`#[tokio::main]`, `#[tokio::test]`) this returns an error
    /// instead of panicking; use [`App::run_async`] there.
    pub fn run(self, config: ServerConfig) -> std::io::Result<()> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(std::io::Error::other(
                "App::run blocks the thread and cannot be called inside a tokio runtime \
                 (#[tokio::main]); use `app.run_async(config).await` instead",
            ));
        }
        let (service, config) = self.build_for(config)?;
        Server::new(config).run_until_signal(service)
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully: [`App::run`] for use inside
    /// an existing tokio runtime (`#[tokio::main]`). The workers still run on their own
    /// threads; the calling task only waits.
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    ///
    /// #[tokio::main]
    /// async fn main() -> std::io::Result<()> {
    ///     App::new()
    ///         .route("/", get(|_req: Request| async { "hi" }))
    ///         .run_async(peregrine::ServerConfig::default())
    ///         .await
    /// }
    /// ```
    pub async fn run_async(self, config: ServerConfig) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        // Installed before serving, so a signal during startup is not fatal.
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        self.run_until(config, async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
        })
        .await
    }

    /// Serves until `shutdown` completes, then shuts down gracefully (in-flight requests
    /// finish, up to the configured `shutdown_timeout`). For use inside a tokio runtime.
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # rt.block_on(async {
    /// let mut config = peregrine::ServerConfig::default();
    /// config.addr = "127.0.0.1:0".parse().unwrap();
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .run_until(config, async { let _ = stopped.await; });
    /// stop.send(()).unwrap();
    /// server.await.unwrap();
    /// # });
    /// ```
    pub async fn run_until(
        self,
        config: ServerConfig,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let (service, config) = self.build_for(config)?;
        // Starting and stopping join threads: keep that off the runtime's own threads.
        let handle = tokio::task::spawn_blocking(move || Server::new(config).serve(service))
            .await
            .map_err(std::io::Error::other)??;
        shutdown.await;
        tokio::task::spawn_blocking(move || handle.shutdown())
            .await
            .map_err(std::io::Error::other)
    }

    /// The service, and the engine's configuration with the body limit agreed on: the app's
    /// limit is `body_limit` if set, else the config's `max_body_size`; the engine's own
    /// declared-length check is lifted so the framework answers (problem+json).
    fn build_for(
        mut self,
        mut config: ServerConfig,
    ) -> std::io::Result<(AppService, ServerConfig)> {
        let limit = self
            .body_limit
            .unwrap_or(usize::try_from(config.max_body_size).unwrap_or(usize::MAX));
        self.body_limit = Some(limit);
        config.max_body_size = u64::MAX;
        let service = self
            .try_into_service()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok((service, config))
    }
}

/// Fails if a handler of the route at `path` needs state the application does not provide.
fn check_needs(
    path: &str,
    methods: &MethodRouter,
    states: &[(TypeId, Arc<dyn Any + Send + Sync>)],
    locals: &[WorkerInit],
    needs: &mut Vec<Need>,
) -> Result<(), String> {
    let named = methods
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (router::slot_name(i), e)))
        .chain(methods.other.iter().map(|(n, e)| (&**n, e)))
        .chain(methods.any.iter().map(|e| ("any method", e)));
    for (method, endpoint) in named {
        needs.clear();
        endpoint.handler.needs(needs);
        if let Some(n) = needs.iter().find(|n| !n.met(states, locals)) {
            return Err(format!("route {method} {path}: handler needs {n}"));
        }
    }
    Ok(())
}

/// What routing found: the route, its parameters as byte ranges into the normalised path, and
/// that path when it differs from the one given.
type Routed = (u32, SmallVec<[(u32, u32); 4]>, Option<Box<str>>);

pub(crate) struct Route {
    pub(crate) pattern: Box<str>,
    pub(crate) param_names: Box<[Box<str>]>,
    allow: Vec<u8>,
    methods: MethodRouter,
}

/// Everything compiled at startup, shared (read-only) by every worker.
pub(crate) struct Shared {
    matcher: matchit::Router<u32>,
    pub(crate) routes: Vec<Route>,
    states: Arc<StateMapHolder>,
    /// Per-worker initialisers and where each thread keeps their values.
    worker: Arc<WorkerInits>,
    /// `!worker.is_empty()`, kept inline: checked on every request.
    has_worker_inits: bool,
    pub(crate) body_limit: usize,
    pub(crate) decode_bodies: bool,
    /// Application-wide layers around [`Dispatch`]; `None` when there are none, so the common
    /// case calls the handler directly.
    chain: Option<Arc<dyn Handler>>,
    fallback: Option<Arc<dyn Handler>>,
    encoded_slashes: EncodedSlashes,
    /// Layers before routing around [`RouteThenStart`]; `None` when there are none, so the
    /// common case routes right away.
    pre_routing: Option<Arc<dyn Handler>>,
    all_allow: Vec<u8>,
}

impl Shared {
    pub(crate) fn states_map(&self) -> &crate::state::StateMap {
        &self.states.0
    }

    pub(crate) fn state<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.states
            .0
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// Normalises `path` and finds its route: the route, its parameters as byte ranges into the
    /// normalised path, and that path when it differs from `path`.
    #[inline]
    fn route_of(&self, path: &str) -> Routed {
        // Route on the canonical path only (issue 17): see `crate::path` for the rules.
        match path::normalize_with(path, self.encoded_slashes) {
            Ok(path) => {
                let (route, params) = self.find_route(&path);
                let owned = match path {
                    Cow::Owned(p) => Some(p.into_boxed_str()),
                    Cow::Borrowed(_) => None,
                };
                (route, params, owned)
            }
            Err(_) => (BAD_PATH, SmallVec::new(), None),
        }
    }

    /// The route matching the (normalised) `path` and its parameters as byte ranges into it.
    #[inline]
    fn find_route(&self, path: &str) -> (u32, SmallVec<[(u32, u32); 4]>) {
        match self.matcher.at(path) {
            Ok(m) => {
                let base = path.as_ptr() as usize;
                // matchit hands out slices of the path we gave it, in pattern order; keep their
                // offsets so the request owns no strings.
                let params = m
                    .params
                    .iter()
                    .map(|(_, v)| {
                        let s = v.as_ptr() as usize - base;
                        (s as u32, (s + v.len()) as u32)
                    })
                    .collect();
                (*m.value, params)
            }
            Err(_) => (NO_ROUTE, SmallVec::new()),
        }
    }

    /// What answers `req`: a handler, or a ready response (400 for a refused path, 404, 405,
    /// automatic OPTIONS).
    fn select(&self, req: &Request) -> Selected<'_> {
        if req.route == BAD_PATH {
            return Selected::Ready(
                Error::bad_request()
                    .with_detail(
                        "'.' and '..' segments and encoded '/', '\\' or NUL are refused in paths",
                    )
                    .into_response(),
            );
        }
        let Some(route) = self.routes.get(req.route as usize) else {
            if let Some(f) = &self.fallback {
                return Selected::Handler(f);
            }
            if req.method_kind() == Method::Options && req.path() == "*" {
                return Selected::Ready(allow_response(&self.all_allow));
            }
            return Selected::Ready(Error::not_found().into_response());
        };
        let m = &route.methods;
        let kind = req.method_kind();
        let found = match router::slot(kind) {
            Some(i) => m.slots[i].as_ref().or_else(|| {
                // HEAD falls back to GET; the engine sends GET's headers without the body.
                if kind == Method::Head {
                    m.slots[0].as_ref()
                } else {
                    None
                }
            }),
            None => {
                let name = req.method();
                m.other.iter().find(|(n, _)| &**n == name).map(|(_, h)| h)
            }
        };
        match found.or(m.any.as_ref()) {
            Some(e) => Selected::Handler(&e.handler),
            None if kind == Method::Options => Selected::Ready(allow_response(&route.allow)),
            None => Selected::Ready(
                Error::new(405)
                    .with_header("allow", Cow::Owned(route.allow.clone()))
                    .into_response(),
            ),
        }
    }
}

enum Selected<'a> {
    Handler(&'a Arc<dyn Handler>),
    Ready(Response),
}

fn allow_response(allow: &[u8]) -> Response {
    Response::new(204).with_header("allow", Cow::Owned(allow.to_vec()))
}

/// Innermost handler of the application-wide stack: runs what routing selected.
struct Dispatch;

impl Handler for Dispatch {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let shared = req.shared.clone();
        match shared.select(&req) {
            Selected::Handler(h) => h.call(req),
            Selected::Ready(r) => Box::pin(std::future::ready(r)),
        }
    }
}

/// The compiled application as an engine [`Service`]. Cloning it (once per worker) shares
/// the compiled tables.
///
/// It can also be called directly, which makes handler tests cheap (no socket):
///
/// ```
/// use peregrine::server::{Request, Service};
/// use peregrine::{get, App, Json, ResponseBody};
///
/// let svc = App::new()
///     .route("/users/{id}", get(|req: peregrine::Request| async move {
///         let id: u32 = req.param("id")?;
///         Ok::<_, peregrine::Error>(Json(serde_json::json!({ "id": id })))
///     }))
///     .into_service();
/// let req = Request::from_bytes(b"GET /users/7 HTTP/1.1\r\nHost: t\r\n\r\n", "127.0.0.1:1".parse().unwrap())
///     .unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let res = rt.block_on(svc.call(req));
/// assert_eq!(res.status, 200);
/// let ResponseBody::Full(body) = res.body else { panic!() };
/// assert_eq!(&body[..], br#"{"id":7}"#);
/// ```
#[derive(Clone)]
pub struct AppService {
    shared: Arc<Shared>,
}

impl Service for AppService {
    type Future = AppFuture;

    #[inline]
    fn call(&self, inner: peregrine_server::Request) -> AppFuture {
        let shared = &self.shared;
        let mut req = if shared.pre_routing.is_some() {
            // Routed inside the chain, after the layers that may rewrite it (RouteThenStart).
            Request::new(inner, shared.clone(), PRE_ROUTING, SmallVec::new())
        } else {
            let (route, params, normalized) = shared.route_of(inner.path());
            let mut req = Request::new(inner, shared.clone(), route, params);
            if let Some(p) = normalized {
                req.set_normalized_path(p);
            }
            req
        };
        if shared.has_worker_inits {
            match shared.worker.ready() {
                Some(locals) => req.locals = Some(locals),
                // First request on this worker: build its state first.
                None => {
                    return AppFuture {
                        fut: Some(Box::pin(init_then_start(req))),
                        ready: None,
                    }
                }
            }
        }
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| start(shared, req)));
        match started {
            Ok(Ok(fut)) => AppFuture {
                fut: Some(fut),
                ready: None,
            },
            Ok(Err(res)) => AppFuture {
                fut: None,
                ready: Some(res),
            },
            Err(p) => AppFuture {
                fut: None,
                ready: Some(panic_response(p)),
            },
        }
    }
}

/// Runs the application-wide layers, or routing's choice directly when there are none:
/// `Err` is a ready answer (404/405/OPTIONS without layers: nothing boxed).
/// `shared` is the request's own (passed in so the hot path clones no `Arc`).
#[inline]
fn start(shared: &Shared, req: Request) -> Result<BoxFuture<Response>, Response> {
    if req.route == PRE_ROUTING {
        if let Some(pre) = &shared.pre_routing {
            return Ok(pre.call(req));
        }
    }
    if let Some(chain) = &shared.chain {
        return Ok(chain.call(req));
    }
    match shared.select(&req) {
        Selected::Handler(h) => Ok(h.call(req)),
        Selected::Ready(r) => Err(r),
    }
}

/// Innermost handler of the layers before routing: routes the (possibly rewritten) request,
/// then runs the application-wide layers and the handler.
struct RouteThenStart;

impl Handler for RouteThenStart {
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        let shared = req.shared.clone();
        let (route, params, normalized) = shared.route_of(req.path());
        req.set_route(route, params, normalized);
        match start(&shared, req) {
            Ok(fut) => fut,
            Err(res) => Box::pin(std::future::ready(res)),
        }
    }
}

/// Builds this worker's state ([`App::on_worker_start`]), then answers `req`.
async fn init_then_start(mut req: Request) -> Response {
    let worker = req.shared.worker.clone();
    match worker.init().await {
        Ok(locals) => {
            req.locals = Some(locals);
            let shared = req.shared.clone();
            match start(&shared, req) {
                Ok(fut) => fut.await,
                Err(res) => res,
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "on_worker_start failed; will retry on the next request");
            Error::new(503).into_response()
        }
    }
}

/// The future answering one request; a panic while polling it is turned into a 500 problem
/// document and the connection carries on.
pub struct AppFuture {
    fut: Option<BoxFuture<Response>>,
    ready: Option<Response>,
}

impl Future for AppFuture {
    type Output = Response;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        if let Some(r) = self.ready.take() {
            return Poll::Ready(r);
        }
        let Some(fut) = self.fut.as_mut() else {
            panic!("AppFuture polled after completion");
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => {
                self.fut = None;
                Poll::Ready(r)
            }
            Err(p) => {
                // Drop the poisoned future now; its destructors run here, not in the engine.
                self.fut = None;
                Poll::Ready(panic_response(p))
            }
        }
    }
}

fn panic_response(payload: Box<dyn Any + Send>) -> Response {
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(non-string panic payload)");
    tracing::error!(panic = msg, "handler panicked");
    Error::internal().into_response()
}
