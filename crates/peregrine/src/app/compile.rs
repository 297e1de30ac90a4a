//! Compiling an [`App`] into its [`AppService`]: the route table, the layer stacks, and the
//! check that every handler's state needs are met.

use super::last_param::{LastParamRoutes, Pattern};
use super::service::{
    AutoAnswer, Dispatch, Route, RouteThenStart, Routing, Shared, Table, BARE_PREFIX,
};
use super::statics::{canonical_as_written, StaticRoutes};
use super::{App, AppService};
use crate::middleware;
use crate::request::context::{AppContext, RouteInfo};
use crate::router::{self, MethodRouter};
use crate::state::{Need, StateMapHolder, WorkerInit, WorkerInits};
use std::any::{Any, TypeId};
use std::sync::Arc;

impl App {
    /// Compiles the route table into an engine [`Service`](crate::server::Service).
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
    /// calling [`Request::state`](crate::Request::state) in its body is only checked when it runs (a logged 500).
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
        let mut statics = StaticRoutes::default();
        let mut routes = Vec::new();
        let mut infos = Vec::new();
        let mut allows = Vec::new();
        // The automatic answers' layers, by route, wrapped once every route's `Allow` is known.
        let mut auto_stacks = Vec::new();
        let mut all_methods: Vec<String> = Vec::new();
        let mut needs = Vec::new();
        let mut bare = Vec::new();
        // Every pattern the matcher holds, for the last-parameter table.
        let mut inserted: Vec<(String, u32)> = Vec::new();
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
            statics.add(&path, routes.len() as u32, self.encoded_slashes);
            inserted.push((path.clone(), routes.len() as u32));
            if let Some(prefix) = path.strip_suffix('}').and_then(|p| p.rsplit_once("/{*")) {
                bare.push((prefix.0.to_owned(), routes.len() as u32));
            }
            let mut methods = methods.build();
            let auto_layers = std::mem::take(&mut methods.auto_layers);
            // Without layers the automatic answers stay ready responses (nothing boxed).
            // (A path with an `any` handler has no automatic answers.)
            auto_stacks
                .push((!auto_layers.is_empty() && methods.any.is_none()).then_some(auto_layers));
            let allow = methods.allow();
            for m in String::from_utf8_lossy(&allow).split(", ") {
                if !all_methods.iter().any(|x| x == m) {
                    all_methods.push(m.to_owned());
                }
            }
            allows.push(allow);
            infos.push(RouteInfo {
                param_names: router::param_names(&path).into_boxed_slice(),
                pattern: path.into_boxed_str(),
            });
            routes.push(methods);
        }
        let allows: Arc<[Vec<u8>]> = allows.into();
        let auto_answer = || {
            Arc::new(AutoAnswer {
                allows: allows.clone(),
                method_not_allowed: self.method_not_allowed.clone(),
            })
        };
        let routes = routes
            .into_iter()
            .zip(auto_stacks)
            .map(|(methods, layers)| Route {
                methods,
                auto: layers.map(|l| middleware::wrap(auto_answer(), &l)),
            })
            .collect();
        // A catch-all `/p/{*rest}` also answers `/p/` and `/p` (with `rest` empty), so a hook
        // on it covers the directory itself; a route registered for either path wins (its
        // insert came first, this one conflicts and is skipped).
        for (prefix, route) in bare {
            let slash = format!("{prefix}/");
            for p in [slash.as_str(), prefix.as_str()]
                .into_iter()
                .filter(|p| !p.is_empty())
            {
                if matcher.insert(p, route | BARE_PREFIX).is_ok() {
                    inserted.push((p.to_owned(), route | BARE_PREFIX));
                }
            }
        }
        let patterns: Vec<Pattern<'_>> = inserted
            .iter()
            .map(|(text, route)| Pattern {
                text,
                route: *route,
                exact: statics.get(text) == Some(*route),
            })
            .collect();
        let slashes = self.encoded_slashes;
        let last_param =
            LastParamRoutes::build(&patterns, |prefix| canonical_as_written(prefix, slashes));
        for (what, h) in [
            ("fallback", &self.fallback),
            ("method_not_allowed", &self.method_not_allowed),
        ] {
            let Some(f) = h else { continue };
            needs.clear();
            f.needs(&mut needs);
            if let Some(n) = needs
                .iter()
                .find(|n| !n.met(&self.states, &self.worker_inits))
            {
                return Err(format!("{what} handler needs {n}"));
            }
        }
        let states = Arc::new(StateMapHolder(self.states));
        let table = Arc::new(Table {
            routes,
            auto_answer: auto_answer(),
            allows,
            fallback: self.fallback,
            method_not_allowed: self.method_not_allowed,
            all_allow: all_methods.join(", ").into_bytes(),
        });
        let chain = (!self.layers.is_empty())
            .then(|| middleware::wrap(Arc::new(Dispatch(table.clone())), &self.layers));
        let routing = Arc::new(Routing {
            matcher,
            statics,
            last_param,
            encoded_slashes: self.encoded_slashes,
            chain,
            table,
        });
        let pre_routing = (!self.pre_routing.is_empty()).then(|| {
            middleware::wrap(Arc::new(RouteThenStart(routing.clone())), &self.pre_routing)
        });
        Ok(AppService {
            shared: Arc::new(Shared {
                routing,
                has_worker_inits: !self.worker_inits.is_empty(),
                worker: Arc::new(WorkerInits::new(self.worker_inits, states.clone())),
                body_limit: self.body_limit,
                pre_routing,
                ctx: Arc::new(AppContext {
                    routes: infos.into_boxed_slice(),
                    states,
                    decode_bodies: self.decode_bodies,
                }),
            }),
        })
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
