//! Route tables: groups of routes with a prefix and layers; the handlers of one path by method
//! are in `method.rs`.

use crate::middleware::{Hook, Layer, Middleware};
use std::sync::Arc;

mod method;

pub use method::*;

/// A group of routes sharing a prefix (when nested) and layers.
///
/// ```
/// use peregrine::{App, Request, Router, get};
/// use peregrine::middleware::RequestIdLayer;
///
/// async fn team(req: Request) -> Result<String, peregrine::Error> {
///     let org: u32 = req.param("org")?;
///     let team: u32 = req.param("team")?;
///     Ok(format!("{org}/{team}"))
/// }
/// let api = Router::new()
///     .route("/orgs/{org}/teams/{team}", get(team))
///     .layer(RequestIdLayer::new()); // only for routes of this group
/// let app = App::new().nest("/api/v1", api); // GET /api/v1/orgs/7/teams/3
/// # let _ = app;
/// ```
#[derive(Clone, Default)]
pub struct Router {
    routes: Vec<(String, MethodRouter)>,
    nested: Vec<(String, Router)>,
    layers: Vec<Layer>,
}

impl Router {
    /// An empty group.
    ///
    /// ```
    /// use peregrine::{get, App, Request, Router};
    ///
    /// fn users() -> Router {
    ///     Router::new()
    ///         .route("/", get(|_r: Request| async { "all users" }))
    ///         .route("/{id}", get(|req: Request| async move { format!("user {}", req.param_raw("id").unwrap_or("")) }))
    /// }
    ///
    /// let client = App::new().nest("/users", users()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/users").send().await.text(), "all users");
    /// assert_eq!(client.get("/users/7").send().await.text(), "user 7");
    /// # });
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route. Path syntax (matchit): static segments, `{name}` for one segment,
    /// `{*name}` for the rest of the path (last only; `/files/{*name}` also answers `/files/`
    /// and `/files` with `name` empty, unless a route is registered for them); `{{`/`}}` for
    /// literal braces. Adding the same path twice merges the methods.
    ///
    /// # Panics
    /// If the path does not start with `/`, or a method is registered twice for one path.
    /// Conflicting patterns are reported when the application is built.
    ///
    /// ```
    /// use peregrine::{get, post, Request, Router};
    /// async fn show(req: Request) -> Result<String, peregrine::Error> {
    ///     Ok(format!("post {}", req.param::<u64>("id")?))
    /// }
    /// let posts = Router::new()
    ///     .route("/posts/{id}", get(show))
    ///     .route("/posts", post(|_req: Request| async { (201, "created") }));
    /// # let _ = posts;
    /// ```
    pub fn route(mut self, path: &str, methods: MethodRouter) -> Self {
        assert!(
            path.starts_with('/'),
            "route path {path:?} must start with '/'"
        );
        match self.routes.iter_mut().find(|(p, _)| p == path) {
            Some((_, existing)) => existing.merge(methods, path),
            None => self.routes.push((path.to_owned(), methods)),
        }
        self
    }

    /// Mounts `group` under `prefix` (`"/api"`; a group route `"/"` becomes `"/api"` itself).
    ///
    /// # Panics
    /// If `prefix` does not start with `/` or ends with `/`.
    ///
    /// ```
    /// use peregrine::{get, Request, Router};
    /// let admin = Router::new().route("/users", get(|_r: Request| async { "admin users" }));
    /// let api = Router::new().nest("/admin", admin); // /admin/users inside the api group
    /// let app = peregrine::App::new().nest("/api", api); // GET /api/admin/users
    /// # let _ = app;
    /// ```
    pub fn nest(mut self, prefix: &str, group: Router) -> Self {
        assert!(
            prefix.starts_with('/') && !prefix.ends_with('/'),
            "nest prefix {prefix:?} must start with '/' and not end with '/'"
        );
        self.nested.push((prefix.to_owned(), group));
        self
    }

    /// Adds the routes of `group` at the same level (its own layers stay its own).
    ///
    /// ```
    /// use peregrine::middleware::Timeout;
    /// use peregrine::{get, App, Request, Router};
    /// use std::time::Duration;
    ///
    /// let reports = Router::new()
    ///     .route("/reports/daily", get(|_r: Request| async { "daily" }))
    ///     .layer(Timeout::new(Duration::from_secs(30))); // only on the reports
    /// let site = Router::new()
    ///     .route("/", get(|_r: Request| async { "home" }))
    ///     .merge(reports);
    /// let client = App::new().merge(site).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/reports/daily").send().await.text(), "daily");
    /// assert_eq!(client.get("/").send().await.text(), "home");
    /// # });
    /// ```
    pub fn merge(mut self, group: Router) -> Self {
        self.nested.push((String::new(), group));
        self
    }

    /// Wraps every route of this group (including nested groups) in `layer`; the layer added
    /// last is the outermost. The automatic `OPTIONS` and 405 answers of the group's paths go
    /// through it too, so a CORS layer here answers their preflights.
    ///
    /// ```
    /// use peregrine::{get, Request, Router};
    /// use peregrine::middleware::{Cors, RequestIdLayer};
    /// let public = Router::new()
    ///     .route("/feed", get(|_r: Request| async { "[]" }))
    ///     .layer(RequestIdLayer::new())
    ///     .layer(Cors::new()); // outermost
    /// # let _ = public;
    /// ```
    pub fn layer<M: Middleware>(mut self, layer: M) -> Self {
        self.layers.push(Layer::Async(Arc::new(layer)));
        self
    }

    /// Wraps every route of this group in a synchronous [`Hook`]; layers and hooks nest in
    /// the order they are added. The automatic `OPTIONS` and 405 answers of the group's paths
    /// go through it too: an auth hook keeps their method lists private.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, Error, IntoResponse, Request, Response, Router};
    ///
    /// /// Admin routes only for the internal network's header (set by the gateway).
    /// struct InternalOnly;
    /// impl Hook for InternalOnly {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         match req.header("x-internal") {
    ///             Some("1") => Ok(()),
    ///             _ => Err(Error::not_found().into_response()), // do not reveal the route
    ///         }
    ///     }
    /// }
    ///
    /// let admin = Router::new().route("/stats", get(|_r: Request| async { "42 users" })).hook(InternalOnly);
    /// let client = App::new().nest("/admin", admin).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/admin/stats").send().await.status(), 404);
    /// assert_eq!(client.get("/admin/stats").header("x-internal", "1").send().await.text(), "42 users");
    /// # });
    /// ```
    pub fn hook<H: Hook>(mut self, hook: H) -> Self {
        self.layers.push(Layer::Hook(Arc::new(hook)));
        self
    }

    /// Flattens into `(full path, methods)` with the group layers applied, inner groups first.
    /// Each group is flattened and layered on its own before merging, so a group's layers
    /// wrap exactly its own handlers even when another group shares a path.
    pub(crate) fn flatten(self, prefix: &str) -> Vec<(String, MethodRouter)> {
        let mut out: Vec<(String, MethodRouter)> = Vec::new();
        for (path, methods) in self.routes {
            push_merged(&mut out, join(prefix, &path), methods);
        }
        for (sub, group) in self.nested {
            for (p, m) in group.flatten(&format!("{prefix}{sub}")) {
                push_merged(&mut out, p, m);
            }
        }
        if !self.layers.is_empty() {
            for (_, m) in out.iter_mut() {
                let mut mr = std::mem::take(m);
                for l in &self.layers {
                    mr = mr.push_layer(l.clone());
                }
                *m = mr;
            }
        }
        out
    }
}

fn push_merged(out: &mut Vec<(String, MethodRouter)>, path: String, m: MethodRouter) {
    match out.iter_mut().find(|(p, _)| *p == path) {
        Some((_, existing)) => existing.merge(m, &path),
        None => out.push((path, m)),
    }
}

fn join(prefix: &str, path: &str) -> String {
    if prefix.is_empty() {
        path.to_owned()
    } else if path == "/" {
        prefix.to_owned()
    } else {
        format!("{prefix}{path}")
    }
}

/// Parameter names of a pattern, in order (`/a/{x}/b/{*rest}` → `["x", "rest"]`).
pub(crate) fn param_names(pattern: &str) -> Vec<Box<str>> {
    let b = pattern.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => i += 2,
            b'}' if b.get(i + 1) == Some(&b'}') => i += 2,
            b'{' => {
                let end = pattern[i..].find('}').map_or(b.len(), |e| i + e);
                let name = pattern[i + 1..end].trim_start_matches('*');
                names.push(name.into());
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    async fn h(_: Request) -> &'static str {
        "x"
    }

    #[test]
    fn names() {
        assert_eq!(
            param_names("/users/{id}"),
            vec!["id".into()] as Vec<Box<str>>
        );
        assert_eq!(
            param_names("/a/{org}/b/{*rest}"),
            vec!["org".into(), "rest".into()] as Vec<Box<str>>
        );
        assert!(param_names("/lit/{{x}}").is_empty());
    }

    #[test]
    fn allow_lists_methods() {
        assert_eq!(get(h).post(h).allow(), b"GET, HEAD, POST, OPTIONS".to_vec());
        assert_eq!(
            delete(h).on("PROPFIND", h).allow(),
            b"DELETE, OPTIONS, PROPFIND".to_vec()
        );
    }

    #[test]
    fn flatten_prefixes_and_merges() {
        let inner = Router::new().route("/", get(h)).route("/x/{id}", post(h));
        let r = Router::new()
            .route("/api", post(h))
            .nest("/api", inner)
            .nest(
                "/deep",
                Router::new().nest("/er", Router::new().route("/y", get(h))),
            );
        let out = r.flatten("");
        let paths: Vec<_> = out.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["/api", "/api/x/{id}", "/deep/er/y"]);
        let api = &out[0].1;
        assert!(api.slots[0].is_some() && api.slots[2].is_some());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_method_panics() {
        let _ = Router::new().route("/a", get(h)).route("/a", get(h));
    }

    #[test]
    #[should_panic(expected = "must start with '/'")]
    fn relative_path_panics() {
        let _ = Router::new().route("a", get(h));
    }
}
