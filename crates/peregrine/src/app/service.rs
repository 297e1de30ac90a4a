//! The compiled application ([`AppService`]): routing a request, running its layers and
//! handler, and turning a panic into a 500.

use super::last_param::LastParamRoutes;
use super::statics::StaticRoutes;
use crate::error::Error;
use crate::future_slot::FutureSlot;
use crate::handler::{BoxFuture, Handler};
use crate::path::{self, EncodedSlashes};
use crate::request::context::AppContext;
use crate::request::{Request, BAD_PATH, NO_ROUTE, PRE_ROUTING};
use crate::response::IntoResponse;
use crate::router::{self, MethodRouter};
use crate::state::WorkerInits;
use peregrine_server::{Method, Response, Service};
use smallvec::SmallVec;
use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// What routing found: the route, its parameters as byte ranges into the normalised path, and
/// that path when it differs from the one given.
type Routed = (u32, SmallVec<[(u32, u32); 4]>, Option<Box<str>>);

/// Marks a matcher entry for the bare prefix of a catch-all route (`/p/` or `/p` for
/// `/p/{*rest}`): the route index is the rest of the value, and the catch-all is empty.
pub(super) const BARE_PREFIX: u32 = 1 << 31;

/// A route's handlers (its pattern and parameter names are in the request's [`AppContext`]).
pub(crate) struct Route {
    pub(super) methods: MethodRouter,
    /// The automatic `OPTIONS` / 405 answer inside the path's group and route layers; `None`
    /// when it has none.
    pub(super) auto: Option<Arc<dyn Handler>>,
}

/// Everything compiled at startup, shared (read-only) by every worker. The parts are nested so
/// that the handlers inside them (the layers' innermost [`Dispatch`] and [`RouteThenStart`])
/// hold what they need without a reference cycle, and requests hold only the [`AppContext`].
pub(crate) struct Shared {
    pub(super) routing: Arc<Routing>,
    /// Per-worker initialisers and where each thread keeps their values.
    pub(super) worker: Arc<WorkerInits>,
    /// `!worker.is_empty()`, kept inline: checked on every request.
    pub(super) has_worker_inits: bool,
    /// [`App::body_limit`](super::App::body_limit), set on each request's body; `None` leaves
    /// the engine's.
    pub(super) body_limit: Option<u64>,
    /// Layers before routing around [`RouteThenStart`]; `None` when there are none, so the
    /// common case routes right away.
    pub(super) pre_routing: Option<Arc<dyn Handler>>,
    pub(super) ctx: Arc<AppContext>,
}

/// Routing and what runs after it: the matcher, the application-wide layers, the routes.
pub(crate) struct Routing {
    pub(super) matcher: matchit::Router<u32>,
    /// The routes without parameters by exact path, tried before normalising and matching.
    pub(super) statics: StaticRoutes,
    /// The routes `prefix/{name}` by prefix, tried after normalising, before the matcher.
    pub(super) last_param: LastParamRoutes,
    pub(super) encoded_slashes: EncodedSlashes,
    /// Application-wide layers around [`Dispatch`]; `None` when there are none, so the common
    /// case calls the handler directly.
    pub(super) chain: Option<Arc<dyn Handler>>,
    pub(super) table: Arc<Table>,
}

/// What answers a routed request: the routes' handlers and the automatic answers.
pub(crate) struct Table {
    pub(super) routes: Vec<Route>,
    /// Each route's `Allow` value, by route index.
    pub(super) allows: Arc<[Vec<u8>]>,
    pub(super) fallback: Option<Arc<dyn Handler>>,
    /// [`App::method_not_allowed`](super::App::method_not_allowed)'s handler.
    pub(super) method_not_allowed: Option<Arc<dyn Handler>>,
    /// [`AutoAnswer`] unlayered: for a 405 that needs the handler above.
    pub(super) auto_answer: Arc<dyn Handler>,
    pub(super) all_allow: Vec<u8>,
}

impl Routing {
    /// Normalises `path` and finds its route: the route, its parameters as byte ranges into the
    /// normalised path, and that path when it differs from `path`.
    #[inline]
    fn route_of(&self, path: &str) -> Routed {
        if let Some(route) = self.statics.get(path) {
            return (route, SmallVec::new(), None);
        }
        // `/users/42` under a route `/users/{id}`: canonical as sent, so not normalised.
        if let Some((route, range)) = self.last_param.get_canonical(path) {
            let mut params = SmallVec::new();
            params.push(range);
            return (route, params, None);
        }
        // Route on the canonical path only: see `crate::path` for the rules.
        match path::normalize_with(path, self.encoded_slashes) {
            Ok(path) => {
                let (route, params) = match &path {
                    // A path normalised into a static route's is that route, as in the matcher
                    // (the last-parameter table relies on it: see `last_param.rs`).
                    Cow::Owned(p) => match self.statics.get(p) {
                        Some(route) => (route, SmallVec::new()),
                        None => self.find_route(p),
                    },
                    Cow::Borrowed(p) => self.find_route(p),
                };
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
        if let Some((route, range)) = self.last_param.get(path) {
            let mut params = SmallVec::new();
            params.push(range);
            return (route, params);
        }
        match self.matcher.at(path) {
            Ok(m) => {
                let base = path.as_ptr() as usize;
                // matchit hands out slices of the path we gave it, in pattern order; keep their
                // offsets so the request owns no strings.
                let mut params: SmallVec<_> = m
                    .params
                    .iter()
                    .map(|(_, v)| {
                        let s = v.as_ptr() as usize - base;
                        (s as u32, (s + v.len()) as u32)
                    })
                    .collect();
                if *m.value & BARE_PREFIX != 0 {
                    params.push((path.len() as u32, path.len() as u32));
                }
                (*m.value & !BARE_PREFIX, params)
            }
            Err(_) => (NO_ROUTE, SmallVec::new()),
        }
    }

    /// Runs the application-wide layers, or the table's choice directly when there are none:
    /// `Err` is a ready answer (404/405/OPTIONS without layers: nothing boxed).
    #[inline]
    fn start(&self, req: Request) -> Result<FutureSlot, Response> {
        if let Some(chain) = &self.chain {
            return Ok(FutureSlot::boxed(chain.call(req)));
        }
        match self.table.select(&req) {
            Selected::Handler(h) => h.call_pooled(req),
            Selected::Ready(r) => Err(r),
        }
    }

    /// [`start`](Self::start) for a caller that hands the future on as a [`BoxFuture`]: the
    /// handler boxes it on its own, as no one would give a pooled box back.
    fn start_boxed(&self, req: Request) -> BoxFuture<Response> {
        if let Some(chain) = &self.chain {
            return chain.call(req);
        }
        match self.table.select(&req) {
            Selected::Handler(h) => h.call(req),
            Selected::Ready(r) => Box::pin(std::future::ready(r)),
        }
    }
}

impl Table {
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
        let index = req.route as usize;
        let (Some(route), Some(allow)) = (self.routes.get(index), self.allows.get(index)) else {
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
        match (found.or(m.any.as_ref()), &route.auto) {
            (Some(e), _) => Selected::Handler(&e.handler),
            (None, Some(auto)) => Selected::Handler(auto),
            (None, None) if kind == Method::Options => Selected::Ready(allow_response(allow)),
            (None, None) if self.method_not_allowed.is_some() => {
                Selected::Handler(&self.auto_answer)
            }
            (None, None) => Selected::Ready(not_allowed(allow)),
        }
    }
}

fn not_allowed(allow: &[u8]) -> Response {
    Error::new(405)
        .with_header("allow", Cow::Owned(allow.to_vec()))
        .into_response()
}

/// The automatic answer for a method a route has no handler for: `204` with `Allow` to
/// `OPTIONS`, `405` (or [`App::method_not_allowed`](super::App::method_not_allowed)'s answer)
/// otherwise. It is a handler so that the path's group and route layers wrap it.
pub(super) struct AutoAnswer {
    /// Each route's `Allow` value, by route index.
    pub(super) allows: Arc<[Vec<u8>]>,
    pub(super) method_not_allowed: Option<Arc<dyn Handler>>,
}

impl Handler for AutoAnswer {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let Some(allow) = self.allows.get(req.route as usize) else {
            return Box::pin(std::future::ready(Error::not_found().into_response()));
        };
        if req.method_kind() == Method::Options {
            return Box::pin(std::future::ready(allow_response(allow)));
        }
        let Some(h) = &self.method_not_allowed else {
            return Box::pin(std::future::ready(not_allowed(allow)));
        };
        let allow = allow.clone();
        let fut = h.call(req);
        Box::pin(async move {
            let mut res = fut.await;
            if !res
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("allow"))
            {
                res.headers
                    .push((Cow::Borrowed("allow"), Cow::Owned(allow)));
            }
            res
        })
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
pub(super) struct Dispatch(pub(super) Arc<Table>);

impl Handler for Dispatch {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        match self.0.select(&req) {
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
    pub(super) shared: Arc<Shared>,
}

impl Service for AppService {
    type Future = AppFuture;

    #[inline]
    fn call(&self, mut inner: peregrine_server::Request) -> AppFuture {
        let shared = &self.shared;
        if let Some(limit) = shared.body_limit {
            inner.body_mut().set_limit(limit);
        }
        let ctx = shared.ctx.clone();
        let mut req = if shared.pre_routing.is_some() {
            // Routed inside the chain, after the layers that may rewrite it (RouteThenStart).
            Request::new(inner, ctx, PRE_ROUTING, SmallVec::new())
        } else {
            let (route, params, normalized) = shared.routing.route_of(inner.path());
            let mut req = Request::new(inner, ctx, route, params);
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
                        fut: Some(FutureSlot::boxed(Box::pin(init_then_start(
                            shared.clone(),
                            req,
                        )))),
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

/// Runs the layers before routing, or [`Routing::start`] when there are none (or the request
/// is routed already): `Err` is a ready answer.
#[inline]
fn start(shared: &Shared, req: Request) -> Result<FutureSlot, Response> {
    if req.route == PRE_ROUTING {
        if let Some(pre) = &shared.pre_routing {
            return Ok(FutureSlot::boxed(pre.call(req)));
        }
    }
    shared.routing.start(req)
}

/// Innermost handler of the layers before routing: routes the (possibly rewritten) request,
/// then runs the application-wide layers and the handler.
pub(super) struct RouteThenStart(pub(super) Arc<Routing>);

impl Handler for RouteThenStart {
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        let (route, params, normalized) = self.0.route_of(req.path());
        req.set_route(route, params, normalized);
        self.0.start_boxed(req)
    }
}

/// Builds this worker's state ([`App::on_worker_start`](crate::App::on_worker_start)), then
/// answers `req`.
async fn init_then_start(shared: Arc<Shared>, mut req: Request) -> Response {
    match shared.worker.init().await {
        Ok(locals) => {
            req.locals = Some(locals);
            match start(&shared, req) {
                Ok(fut) => fut.into_boxed().await,
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
///
/// ```
/// use peregrine::{get, App, Request};
///
/// let client = App::new()
///     .route("/boom", get(|_r: Request| async { if true { panic!("bug") } else { "never" } }))
///     .route("/ok", get(|_r: Request| async { "fine" }))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/boom").send().await;
/// assert_eq!(res.status(), 500);
/// assert!(!res.text().contains("bug")); // logged, not sent
/// assert_eq!(client.get("/ok").send().await.text(), "fine"); // the worker carries on
/// # });
/// ```
pub struct AppFuture {
    fut: Option<FutureSlot>,
    ready: Option<Response>,
}

impl Future for AppFuture {
    type Output = Response;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        // Ready answers are routing's (404, 405, OPTIONS) or a panic's: never an upgrade.
        if let Some(r) = self.ready.take() {
            return Poll::Ready(r);
        }
        let Some(fut) = self.fut.as_mut() else {
            panic!("AppFuture polled after completion");
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(mut r)) => {
                if let Some(done) = self.fut.take() {
                    done.recycle();
                }
                settle(&mut r);
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

/// The last look at every answer before the engine sends it: a refused upgrade (an upgrade
/// answer whose status is no longer 101) becomes an ordinary response, without the switch's
/// fields. One comparison of the body's kind for every other response.
#[inline]
fn settle(r: &mut Response) {
    if crate::response::is_unswitched_upgrade(r) {
        crate::response::settle_unswitched_upgrade(r);
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
