//! The application: routes, state, layers; compiled once into an engine [`Service`].

use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::middleware::{self, Hook, Layer, Middleware};
use crate::path::{self, EncodedSlashes};
use crate::request::{Request, BAD_PATH, NO_ROUTE};
use crate::response::IntoResponse;
use crate::router::{self, MethodRouter, Router};
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
    states: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
    body_limit: usize,
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
            states: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
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
        self.states.push((id, Box::new(state)));
        self
    }

    /// Limit for reading whole bodies with [`Request::bytes`], `text`, `json` and `form`
    /// (413 past it). The engine's own `max_body_size` applies first.
    ///
    /// ```
    /// let app = peregrine::App::new().body_limit(64 * 1024);
    /// # let _ = app;
    /// ```
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
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
    pub fn fallback<H: Handler>(mut self, handler: H) -> Self {
        self.fallback = Some(Arc::new(handler));
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

    /// Compiles the route table, reporting a conflict between patterns as an error.
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
        for (path, methods) in self.router.flatten("") {
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
        let chain = if self.layers.is_empty() {
            None
        } else {
            Some(middleware::wrap(Arc::new(Dispatch), &self.layers))
        };
        Ok(AppService {
            shared: Arc::new(Shared {
                matcher,
                routes,
                states: self.states,
                body_limit: self.body_limit,
                chain,
                fallback: self.fallback,
                encoded_slashes: self.encoded_slashes,
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
    pub fn serve(self, config: ServerConfig) -> std::io::Result<ServerHandle> {
        Server::new(config).serve(self.into_service())
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully.
    pub fn run(self, config: ServerConfig) -> std::io::Result<()> {
        Server::new(config).run_until_signal(self.into_service())
    }
}

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
    states: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
    pub(crate) body_limit: usize,
    /// Application-wide layers around [`Dispatch`]; `None` when there are none, so the common
    /// case calls the handler directly.
    chain: Option<Arc<dyn Handler>>,
    fallback: Option<Arc<dyn Handler>>,
    encoded_slashes: EncodedSlashes,
    all_allow: Vec<u8>,
}

impl Shared {
    pub(crate) fn state<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.states
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
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
        // Route on the canonical path only (issue 17): see `crate::path` for the rules.
        let (route, params, normalized) =
            match path::normalize_with(inner.path(), shared.encoded_slashes) {
                Ok(path) => {
                    let (route, params) = shared.find_route(&path);
                    let owned = match path {
                        Cow::Owned(p) => Some(p.into_boxed_str()),
                        Cow::Borrowed(_) => None,
                    };
                    (route, params, owned)
                }
                Err(_) => (BAD_PATH, SmallVec::new(), None),
            };
        let mut req = Request::new(inner, shared.clone(), route, params);
        if let Some(p) = normalized {
            req.set_normalized_path(p);
        }
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if let Some(chain) = &shared.chain {
                return Ok(chain.call(req));
            }
            match shared.select(&req) {
                Selected::Handler(h) => Ok(h.call(req)),
                // 404/405/OPTIONS without layers: answered without boxing anything.
                Selected::Ready(r) => Err(r),
            }
        }));
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
