// Over 600 lines: one accessor per thing a handler reads (path, params, query, headers, cookies, bodies, state), each small; rewriting for middleware sits beside them.
//! The request handlers receive, with typed accessors.

use crate::app::Shared;
use crate::error::Error;
use bytes::Bytes;
use peregrine_server::{BodyError, Method, Version};
use serde::de::{Deserialize, DeserializeOwned};
use smallvec::SmallVec;
use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::net::SocketAddr;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::Arc;

/// Route index meaning "no route matched".
pub(crate) const NO_ROUTE: u32 = u32::MAX;
/// Route index while middleware that runs before routing has the request.
pub(crate) const PRE_ROUTING: u32 = u32::MAX - 2;
/// Route index meaning "the path was refused by [`crate::path::normalize`]" (answered 400).
pub(crate) const BAD_PATH: u32 = u32::MAX - 1;

/// Per-request values by type; a short list beats a hash map for the one or two entries
/// requests carry, and nothing is allocated until the first insert.
type Extensions = Vec<(TypeId, Box<dyn Any>)>;

/// An incoming request: the engine's parsed request plus what routing found (the route and
/// its parameters), the application's state and per-request extensions.
///
/// Every accessor that can fail returns [`Error`] with the status a client should see, so a
/// handler uses `?` throughout:
///
/// ```
/// use peregrine::{Error, Json, Request};
/// #[derive(serde::Deserialize)]
/// struct Page { limit: Option<u32> }
///
/// async fn list(req: Request) -> Result<Json<Vec<u32>>, Error> {
///     let org: u32 = req.param("org")?;            // 400 if not a number
///     let page: Page = req.query()?;               // 400 if malformed
///     let _agent = req.header("user-agent");       // case-insensitive
///     let _sid = req.cookie("sid");
///     Ok(Json(vec![org, page.limit.unwrap_or(10)]))
/// }
/// # let _ = list;
/// ```
pub struct Request {
    pub(crate) inner: peregrine_server::Request,
    pub(crate) shared: Arc<Shared>,
    pub(crate) route: u32,
    /// Parameter values as byte ranges into the (still encoded) path, in pattern order. Ranges
    /// rather than strings: matching allocates nothing.
    pub(crate) params: SmallVec<[(u32, u32); 4]>,
    extensions: Option<Box<Extensions>>,
    /// The normalised path when it differs from the one sent (see [`crate::path`]); routing
    /// and the parameter ranges refer to it.
    normalized_path: Option<Box<str>>,
    /// This worker's values from [`App::on_worker_start`](crate::App::on_worker_start), set
    /// before middleware and handler run when the app has any.
    pub(crate) locals: Option<Rc<crate::state::Locals>>,
    /// Method and headers as rewritten by middleware; `None` (the usual case) reads the
    /// engine's parsed request.
    rewrites: Option<Box<Rewrites>>,
}

/// A request's own body limit ([`Request::set_body_limit`]) and what its raw stream has read,
/// kept among the extensions: most requests never touch either, and the request (moved into
/// every future) stays as small as before.
#[derive(Default)]
struct BodyBudget {
    limit: Option<u64>,
    read: u64,
}

/// The request's [`BodyBudget`], created on first use.
fn budget_mut(extensions: &mut Option<Box<Extensions>>) -> &mut BodyBudget {
    let ext = extensions.get_or_insert_with(Default::default);
    let id = TypeId::of::<BodyBudget>();
    let i = match ext.iter().position(|(t, _)| *t == id) {
        Some(i) => i,
        None => {
            ext.push((id, Box::new(BodyBudget::default())));
            ext.len() - 1
        }
    };
    match ext[i].1.downcast_mut::<BodyBudget>() {
        Some(b) => b,
        None => unreachable!("stored under its own type id"),
    }
}

/// What middleware changed in a request. Headers are copied out of the engine's request on
/// the first change, then edited here.
#[derive(Default)]
struct Rewrites {
    method: Option<(Box<str>, Method)>,
    headers: Option<Vec<OwnedField>>,
}

/// A header field owned by the request (after a rewrite).
type OwnedField = (Box<str>, Box<[u8]>);

impl Request {
    pub(crate) fn new(
        inner: peregrine_server::Request,
        shared: Arc<Shared>,
        route: u32,
        params: SmallVec<[(u32, u32); 4]>,
    ) -> Self {
        Request {
            inner,
            shared,
            route,
            params,
            extensions: None,
            normalized_path: None,
            locals: None,
            rewrites: None,
        }
    }

    /// Records the normalised path that was routed (only when it differs from the one sent).
    pub(crate) fn set_normalized_path(&mut self, path: Box<str>) {
        self.normalized_path = Some(path);
    }

    /// The method as sent, e.g. `"GET"`.
    #[inline]
    pub fn method(&self) -> &str {
        match self.rewrites.as_deref().and_then(|r| r.method.as_ref()) {
            Some((m, _)) => m,
            None => self.inner.method(),
        }
    }
    /// The method, recognised.
    #[inline]
    pub fn method_kind(&self) -> Method {
        match self.rewrites.as_deref().and_then(|r| r.method.as_ref()) {
            Some((_, k)) => *k,
            None => self.inner.method_kind(),
        }
    }
    /// The path as routed: normalised by the rules of [`crate::path`] (unreserved escapes
    /// decoded, `//` merged), otherwise still percent-encoded (use [`Request::param`] for
    /// decoded segments). [`Request::target`] has the request-target exactly as sent.
    #[inline]
    pub fn path(&self) -> &str {
        match &self.normalized_path {
            Some(p) => p,
            None => self.inner.path(),
        }
    }
    /// The whole request-target as sent.
    pub fn target(&self) -> &str {
        self.inner.target()
    }
    /// The raw query string without `?`, still encoded.
    pub fn query_string(&self) -> Option<&str> {
        self.inner.query()
    }
    /// The protocol version.
    pub fn version(&self) -> Version {
        self.inner.version()
    }
    /// The remote address of the connection.
    ///
    /// ```
    /// async fn whoami(req: peregrine::Request) -> String {
    ///     req.peer_addr().ip().to_string()
    /// }
    /// # let _ = whoami;
    /// ```
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer_addr()
    }
    /// The client's address: the peer's, or, when the application has a
    /// [`TrustedProxies`](crate::proxy::TrustedProxies) state and the peer is one of those
    /// proxies, the address they forwarded (`Forwarded`, else `X-Forwarded-For`). Headers from
    /// any other peer are ignored. See [`crate::proxy`].
    pub fn client_addr(&self) -> std::net::IpAddr {
        crate::proxy::client_info(self).addr
    }
    /// The effective authority (absolute-form target, else `Host`).
    pub fn authority(&self) -> Option<&str> {
        self.inner.authority()
    }

    /// The pattern of the matched route, e.g. `"/users/{id}"`; `None` when no route matched
    /// (seen by application-wide middleware on a 404).
    pub fn route(&self) -> Option<&str> {
        self.shared
            .routes
            .get(self.route as usize)
            .map(|r| &*r.pattern)
    }

    /// The raw (still percent-encoded) value of path parameter `name`.
    pub fn param_raw(&self, name: &str) -> Option<&str> {
        let route = self.shared.routes.get(self.route as usize)?;
        let i = route.param_names.iter().position(|n| &**n == name)?;
        let (s, e) = *self.params.get(i)?;
        self.path().get(s as usize..e as usize)
    }

    /// Path parameter `name`, percent-decoded, as text. Allocates only if the segment
    /// contains `%` escapes.
    ///
    /// Fails with 400 if the decoded bytes are not UTF-8, and with 500 if the route has no such
    /// parameter (a programming error, logged).
    pub fn param_str(&self, name: &str) -> Result<Cow<'_, str>, Error> {
        let raw = self.param_raw(name).ok_or_else(|| missing_param(name))?;
        if !raw.contains('%') {
            // Nothing to decode (the usual case): the raw text is the value.
            return Ok(Cow::Borrowed(raw));
        }
        percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| {
                Error::bad_request()
                    .with_detail(format!("path parameter `{name}` is not valid UTF-8"))
            })
    }

    /// Path parameter `name`, percent-decoded and parsed with [`FromStr`].
    ///
    /// ```
    /// # use peregrine::{Error, Request};
    /// async fn user(req: Request) -> Result<String, Error> {
    ///     let id: u64 = req.param("id")?; // "/users/abc" -> 400 problem
    ///     Ok(format!("user-{id}"))
    /// }
    /// # let _ = user;
    /// ```
    pub fn param<T>(&self, name: &str) -> Result<T, Error>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let s = self.param_str(name)?;
        s.parse::<T>()
            .map_err(|e| Error::bad_request().with_detail(format!("path parameter `{name}`: {e}")))
    }

    /// All path parameters as `(name, raw value)` pairs in pattern order.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let names: &[Box<str>] = self
            .shared
            .routes
            .get(self.route as usize)
            .map_or(&[], |r| &r.param_names[..]);
        let path = self.path();
        names
            .iter()
            .zip(self.params.iter())
            .map(move |(n, &(s, e))| (&**n, &path[s as usize..e as usize]))
    }

    /// The query string deserialised into `T` (serde, `application/x-www-form-urlencoded`
    /// rules: `+` and `%20` are spaces). A missing query string deserialises like an empty one.
    /// Fails with 400 and a detail naming the problem.
    ///
    /// ```
    /// # use peregrine::{Error, Json, Request};
    /// #[derive(serde::Deserialize, serde::Serialize)]
    /// struct Search { q: String, limit: u32 }
    /// async fn search(req: Request) -> Result<Json<Search>, Error> {
    ///     Ok(Json(req.query::<Search>()?))
    /// }
    /// # let _ = search;
    /// ```
    pub fn query<'a, T: Deserialize<'a>>(&'a self) -> Result<T, Error> {
        serde_urlencoded::from_str(self.inner.query().unwrap_or(""))
            .map_err(|e| Error::bad_request().with_detail(format!("invalid query string: {e}")))
    }

    /// First value of header `name` (case-insensitive) as text; `None` if absent or not UTF-8
    /// (use [`Request::header_bytes`] for opaque bytes).
    ///
    /// ```
    /// async fn agent(req: peregrine::Request) -> String {
    ///     req.header("User-Agent").unwrap_or("unknown").to_owned()
    /// }
    /// # let _ = agent;
    /// ```
    #[inline]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }
    /// First value of header `name` (case-insensitive), byte-exact.
    #[inline]
    pub fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        match self.rewritten_headers() {
            None => self.inner.header(name),
            Some(h) => h
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| &v[..]),
        }
    }
    /// All header fields in the order received (with middleware's changes, if any).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        let (engine, rewritten) = match self.rewritten_headers() {
            None => (Some(self.inner.headers()), None),
            Some(h) => (None, Some(h.iter().map(|(n, v)| (&**n, &v[..])))),
        };
        engine
            .into_iter()
            .flatten()
            .chain(rewritten.into_iter().flatten())
    }

    #[inline]
    fn rewritten_headers(&self) -> Option<&Vec<OwnedField>> {
        self.rewrites.as_deref()?.headers.as_ref()
    }

    /// The headers, copied out of the engine's request on the first change.
    fn headers_mut(&mut self) -> &mut Vec<OwnedField> {
        let inner = &self.inner;
        let rw = self.rewrites.get_or_insert_with(Default::default);
        rw.headers.get_or_insert_with(|| {
            inner
                .headers()
                .map(|(n, v)| (Box::from(n), Box::from(v)))
                .collect()
        })
    }

    /// Replaces every field named `name` with one `name: value` (middleware rewriting the
    /// request; handlers and inner layers see the change). Fails with 500 if the name is not a
    /// token or the value has control characters (a header block must stay well-formed).
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{Request, Response};
    /// /// Trusts a proxy's forwarded tenant, under the header name handlers expect.
    /// struct Tenant;
    /// impl Hook for Tenant {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         use peregrine::IntoResponse;
    ///         let t = req.header("x-forwarded-tenant").unwrap_or("public").to_owned();
    ///         req.remove_header("x-forwarded-tenant");
    ///         req.set_header("x-tenant", t).map_err(|e| e.into_response())
    ///     }
    /// }
    /// # let _ = Tenant;
    /// ```
    pub fn set_header(
        &mut self,
        name: &str,
        value: impl crate::header::IntoHeaderValue,
    ) -> Result<(), Error> {
        let value = checked_header(name, value)?;
        let h = self.headers_mut();
        h.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        h.push((name.into(), value));
        Ok(())
    }

    /// Adds a field `name: value`, keeping the ones already there (checked like
    /// [`Request::set_header`]).
    pub fn append_header(
        &mut self,
        name: &str,
        value: impl crate::header::IntoHeaderValue,
    ) -> Result<(), Error> {
        let value = checked_header(name, value)?;
        self.headers_mut().push((name.into(), value));
        Ok(())
    }

    /// Replaces all header fields (a tower layer's view of the request coming back).
    #[cfg(feature = "tower")]
    pub(crate) fn replace_headers<'a>(
        &mut self,
        fields: impl Iterator<Item = (&'a str, &'a [u8])>,
    ) {
        let h = self.headers_mut();
        h.clear();
        h.extend(fields.map(|(n, v)| (Box::from(n), Box::from(v))));
    }

    /// Removes every field named `name` (case-insensitive); returns whether there was one.
    pub fn remove_header(&mut self, name: &str) -> bool {
        if self.header_bytes(name).is_none() {
            return false;
        }
        self.headers_mut()
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        true
    }

    /// Rewrites the method (method-override middleware: `POST` + `X-HTTP-Method-Override:
    /// DELETE`). To change which handler runs, do it before routing
    /// ([`App::layer_before_routing`](crate::App::layer_before_routing)). 500 if `method` is
    /// not a token.
    pub fn set_method(&mut self, method: &str) -> Result<(), Error> {
        if !crate::header::valid_name(method) {
            return Err(Error::internal().with_detail(format!("invalid method {method:?}")));
        }
        let kind = method_kind_of(method);
        self.rewrites.get_or_insert_with(Default::default).method = Some((method.into(), kind));
        Ok(())
    }

    /// Rewrites the path, before routing only
    /// ([`App::layer_before_routing`](crate::App::layer_before_routing) /
    /// [`App::hook_before_routing`](crate::App::hook_before_routing)): the new path is then
    /// normalised and routed like one sent by the client (a path that normalisation refuses is
    /// answered 400). After routing it fails with a (logged) 500, because the route and its
    /// parameters were found on the old path. `path` must start with `/` and contain no `?`,
    /// `#` or whitespace; the query string is kept.
    pub fn set_path(&mut self, path: &str) -> Result<(), Error> {
        if self.route != PRE_ROUTING {
            return Err(Error::internal()
                .with_detail("Request::set_path after routing; rewrite before routing instead"));
        }
        let ok = path.starts_with('/')
            && path
                .bytes()
                .all(|b| b > 0x20 && b != 0x7f && b != b'?' && b != b'#');
        if !ok {
            return Err(Error::internal().with_detail(format!("invalid rewritten path {path:?}")));
        }
        self.normalized_path = Some(path.into());
        Ok(())
    }

    /// Routing after pre-routing middleware: the (possibly rewritten) path is normalised and
    /// matched like one sent by the client.
    pub(crate) fn set_route(
        &mut self,
        route: u32,
        params: SmallVec<[(u32, u32); 4]>,
        normalized: Option<Box<str>>,
    ) {
        self.route = route;
        self.params = params;
        if let Some(p) = normalized {
            self.normalized_path = Some(p);
        }
    }

    /// The value of cookie `name` from the `Cookie` header(s), surrounding quotes removed.
    ///
    /// ```
    /// async fn session(req: peregrine::Request) -> String {
    ///     req.cookie("sid").unwrap_or("none").to_owned()
    /// }
    /// # let _ = session;
    /// ```
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .find_map(|v| find_cookie(v, name))
    }

    /// Declared body length, `None` for a chunked body.
    pub fn content_length(&self) -> Option<u64> {
        self.inner.content_length()
    }

    /// Shared application state of type `T`, registered with
    /// [`App::with_state`](crate::App::with_state). Fails with a (logged) 500 if no state of
    /// that type was registered.
    ///
    /// ```
    /// use peregrine::{App, Error, Request, get};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// struct Hits(AtomicU64);
    ///
    /// async fn hit(req: Request) -> Result<String, Error> {
    ///     let hits = req.state::<Hits>()?;
    ///     Ok(hits.0.fetch_add(1, Ordering::Relaxed).to_string())
    /// }
    /// let app = App::new().with_state(Hits(AtomicU64::new(0))).route("/", get(hit));
    /// # let _ = app;
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, Error> {
        self.shared.state::<T>().ok_or_else(|| {
            Error::internal().with_detail(format!(
                "no application state of type {} registered",
                std::any::type_name::<T>()
            ))
        })
    }

    /// Shared state of type `T` as an owned handle (what [`State<T>`](crate::State) holds).
    pub fn state_arc<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, Error> {
        crate::state::find_shared::<T>(self.shared.states_map())
            .ok_or_else(|| missing_state("application", std::any::type_name::<T>()))
    }

    /// This worker's value of type `T`, built by
    /// [`App::on_worker_start`](crate::App::on_worker_start) (or
    /// [`App::worker_local`](crate::App::worker_local)). Fails with a (logged) 500 if no
    /// initialiser builds a `T`; prefer a [`Local<T>`](crate::Local) handler argument, which
    /// is checked when the app is built.
    ///
    /// ```
    /// use peregrine::{App, Error, Request, get};
    /// use std::cell::Cell;
    /// struct Served(Cell<u64>);
    /// async fn count(req: Request) -> Result<String, Error> {
    ///     let served = req.local::<Served>()?;
    ///     served.0.set(served.0.get() + 1);
    ///     Ok(served.0.get().to_string())
    /// }
    /// let app = App::new().worker_local(|_w| Served(Cell::new(0))).route("/", get(count));
    /// # let _ = app;
    /// ```
    pub fn local<T: 'static>(&self) -> Result<&T, Error> {
        self.locals
            .as_ref()
            .and_then(|l| l.get_ref::<T>())
            .ok_or_else(|| missing_state("per-worker", std::any::type_name::<T>()))
    }

    /// This worker's value of type `T` as an owned handle (what [`Local<T>`](crate::Local)
    /// holds).
    pub fn local_rc<T: 'static>(&self) -> Result<Rc<T>, Error> {
        self.locals
            .as_ref()
            .and_then(|l| l.get::<T>())
            .ok_or_else(|| missing_state("per-worker", std::any::type_name::<T>()))
    }

    /// Stores a per-request value (middleware passing data to handlers, e.g. the request id).
    /// Replaces a previous value of the same type.
    pub fn insert_extension<T: 'static>(&mut self, value: T) {
        let ext = self.extensions.get_or_insert_with(Default::default);
        let id = TypeId::of::<T>();
        match ext.iter_mut().find(|(t, _)| *t == id) {
            Some(slot) => slot.1 = Box::new(value),
            None => ext.push((id, Box::new(value))),
        }
    }
    /// A per-request value stored by [`Request::insert_extension`].
    ///
    /// ```
    /// use peregrine::middleware::RequestId;
    /// async fn show(req: peregrine::Request) -> String {
    ///     req.extension::<RequestId>().map(|id| id.as_str().to_owned()).unwrap_or_default()
    /// }
    /// # let _ = show;
    /// ```
    pub fn extension<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.extensions
            .as_ref()?
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// The whole body, up to the request's body limit ([`Request::body_limit`]: the route's
    /// or the application's, default 1 MiB). 413 past the limit, 400
    /// for broken framing, 408 if the client stalls. A body sent with `Content-Encoding: gzip`,
    /// `deflate` or `br` is decoded, the decoded size held to the same limit (see
    /// [`App::decode_request_bodies`](crate::App::decode_request_bodies)).
    pub async fn bytes(&mut self) -> Result<Bytes, Error> {
        // What the raw stream already handed out counts against the same limit.
        let read = self.extension::<BodyBudget>().map_or(0, |b| b.read);
        let left = self.body_limit().saturating_sub(read);
        self.bytes_limited(usize::try_from(left).unwrap_or(usize::MAX))
            .await
    }

    /// The body limit for this request, in bytes: the one [`Request::bytes`], `json`, `form`,
    /// `multipart` and the raw [`Request::body_mut`] stream are held to. It is the route's
    /// ([`MethodRouter::body_limit`](crate::MethodRouter::body_limit)) if it has one, else the
    /// application's ([`App::body_limit`](crate::App::body_limit)).
    pub fn body_limit(&self) -> u64 {
        self.extension::<BodyBudget>()
            .and_then(|b| b.limit)
            .unwrap_or(self.shared.body_limit as u64)
    }

    /// Sets this request's body limit (for middleware that decides it per request, such as a
    /// larger limit for authenticated uploaders); `u64::MAX` lifts it. Set it before the body
    /// is read.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{Request, Response};
    /// struct TrustedUploads;
    /// impl Hook for TrustedUploads {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if req.header("x-uploader-token").is_some() {
    ///             req.set_body_limit(1 << 30);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn set_body_limit(&mut self, bytes: u64) {
        budget_mut(&mut self.extensions).limit = Some(bytes);
    }

    /// The whole body, failing with 413 past `limit` bytes.
    ///
    /// ```
    /// # use peregrine::{Error, Request};
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let data = req.bytes_limited(64 * 1024).await?;
    ///     Ok(format!("{} bytes", data.len()))
    /// }
    /// # let _ = upload;
    /// ```
    pub async fn bytes_limited(&mut self, limit: usize) -> Result<Bytes, Error> {
        let coding = if self.shared.decode_bodies {
            crate::decode::coding_of(self.header_bytes("content-encoding"))?
        } else {
            None
        };
        // The compressed form is held to the limit too (it is in memory at once).
        let raw = self
            .inner
            .body_mut()
            .to_bytes(limit)
            .await
            .map_err(body_error)?;
        match coding {
            None => Ok(raw),
            Some(c) => crate::decode::decode(c, &raw, limit),
        }
    }

    /// The body as UTF-8 text (400 if it is not UTF-8).
    pub async fn text(&mut self) -> Result<String, Error> {
        let b = self.bytes().await?;
        String::from_utf8(b.into())
            .map_err(|_| Error::bad_request().with_detail("request body is not valid UTF-8"))
    }

    /// The body parsed as JSON into `T`. 415 unless the content type is `application/json` or
    /// `application/*+json`; 400 for malformed JSON or JSON of the wrong shape; 413 past the
    /// body limit.
    ///
    /// ```
    /// # use peregrine::{Error, Json, Request};
    /// #[derive(serde::Deserialize, serde::Serialize)]
    /// struct NewUser { name: String, age: u8 }
    /// async fn create(mut req: Request) -> Result<(u16, Json<NewUser>), Error> {
    ///     let user: NewUser = req.json().await?;
    ///     Ok((201, Json(user)))
    /// }
    /// # let _ = create;
    /// ```
    pub async fn json<T: DeserializeOwned>(&mut self) -> Result<T, Error> {
        if !is_json_content_type(self.header_bytes("content-type")) {
            return Err(Error::new(415).with_detail("expected content type application/json"));
        }
        let body = self.bytes().await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::bad_request().with_detail(format!("invalid JSON body: {e}")))
    }

    /// The body parsed as `application/x-www-form-urlencoded` into `T`. 415 for another
    /// content type, 400 if malformed, 413 past the body limit.
    ///
    /// ```
    /// # use peregrine::{Error, Request};
    /// #[derive(serde::Deserialize)]
    /// struct Login { user: String, password: String }
    /// async fn login(mut req: Request) -> Result<String, Error> {
    ///     let form: Login = req.form().await?;
    ///     Ok(format!("hello {}", form.user))
    /// }
    /// # let _ = login;
    /// ```
    pub async fn form<T: DeserializeOwned>(&mut self) -> Result<T, Error> {
        if !media_type_is(
            self.header_bytes("content-type"),
            "application/x-www-form-urlencoded",
        ) {
            return Err(Error::new(415)
                .with_detail("expected content type application/x-www-form-urlencoded"));
        }
        let body = self.bytes().await?;
        serde_urlencoded::from_bytes(&body)
            .map_err(|e| Error::bad_request().with_detail(format!("invalid form body: {e}")))
    }

    /// The raw body, to read piece by piece (streaming uploads): as sent (not decoded), held
    /// to the request's [body limit](Request::body_limit) like every other way of reading the
    /// body (413 problem document past it; see [`BodyStream`](crate::BodyStream)). A route
    /// taking larger uploads raises its own limit with
    /// [`MethodRouter::body_limit`](crate::MethodRouter::body_limit) or
    /// [`MethodRouter::no_body_limit`](crate::MethodRouter::no_body_limit).
    pub fn body_mut(&mut self) -> crate::body::BodyStream<'_> {
        let declared = self.inner.content_length();
        let limit = self.body_limit();
        crate::body::BodyStream {
            body: self.inner.body_mut(),
            limit,
            read: &mut budget_mut(&mut self.extensions).read,
            declared,
        }
    }

    /// The engine's request underneath.
    pub fn as_server_request(&self) -> &peregrine_server::Request {
        &self.inner
    }
}

fn checked_header(
    name: &str,
    value: impl crate::header::IntoHeaderValue,
) -> Result<Box<[u8]>, Error> {
    let value = value.into_header_value();
    if !crate::header::valid_name(name) || !crate::header::valid_value(&value) {
        return Err(Error::internal().with_detail(format!("invalid request header {name:?}")));
    }
    Ok(value.into_owned().into_boxed_slice())
}

fn method_kind_of(m: &str) -> Method {
    match m {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "OPTIONS" => Method::Options,
        "PATCH" => Method::Patch,
        "CONNECT" => Method::Connect,
        "TRACE" => Method::Trace,
        _ => Method::Other,
    }
}

fn missing_state(kind: &str, type_name: &str) -> Error {
    Error::internal().with_detail(format!("no {kind} state of type {type_name} registered"))
}

fn missing_param(name: &str) -> Error {
    Error::internal().with_detail(format!("route has no path parameter `{name}`"))
}

pub(crate) fn body_error(e: BodyError) -> Error {
    let err = Error::new(e.status());
    match e {
        BodyError::TooLarge => err.with_detail("request body exceeds the size limit"),
        BodyError::Timeout => err.with_detail("timed out waiting for the request body"),
        BodyError::Incomplete => err.with_detail("request body incomplete"),
        BodyError::Invalid(r) => err.with_detail(format!("invalid request body: {r}")),
    }
}

/// The media type of a Content-Type value (before parameters), trimmed.
fn essence(ct: &[u8]) -> &[u8] {
    let end = ct.iter().position(|&b| b == b';').unwrap_or(ct.len());
    ct[..end].trim_ascii()
}

fn media_type_is(ct: Option<&[u8]>, want: &str) -> bool {
    ct.is_some_and(|ct| essence(ct).eq_ignore_ascii_case(want.as_bytes()))
}

pub(crate) fn is_json_content_type(ct: Option<&[u8]>) -> bool {
    let Some(ct) = ct else { return false };
    let e = essence(ct);
    if e.eq_ignore_ascii_case(b"application/json") {
        return true;
    }
    // application/problem+json, application/vnd.api+json, ...
    e.len() > 17
        && e[..12].eq_ignore_ascii_case(b"application/")
        && e[e.len() - 5..].eq_ignore_ascii_case(b"+json")
}

/// Finds `name` in a `Cookie` header value (`a=1; b="2"`, RFC 6265 §4.2.1).
pub(crate) fn find_cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        if k.trim() != name {
            return None;
        }
        let v = v.trim();
        Some(
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies() {
        let h = "a=1; sid=\"abc\";b=2 ; empty=";
        assert_eq!(find_cookie(h, "a"), Some("1"));
        assert_eq!(find_cookie(h, "sid"), Some("abc"));
        assert_eq!(find_cookie(h, "b"), Some("2"));
        assert_eq!(find_cookie(h, "empty"), Some(""));
        assert_eq!(find_cookie(h, "c"), None);
        assert_eq!(find_cookie("noequals", "noequals"), None);
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type(Some(b"application/json")));
        assert!(is_json_content_type(Some(
            b"Application/JSON; charset=utf-8"
        )));
        assert!(is_json_content_type(Some(b"application/vnd.api+json")));
        assert!(!is_json_content_type(Some(b"text/json+")));
        assert!(!is_json_content_type(Some(b"application/+json")));
        assert!(!is_json_content_type(Some(b"text/plain")));
        assert!(!is_json_content_type(None));
    }

    #[test]
    fn form_content_type() {
        assert!(media_type_is(
            Some(b" application/x-www-form-urlencoded ; charset=UTF-8"),
            "application/x-www-form-urlencoded"
        ));
        assert!(!media_type_is(
            Some(b"multipart/form-data"),
            "application/x-www-form-urlencoded"
        ));
    }

    #[test]
    fn body_errors_map_to_statuses() {
        assert_eq!(body_error(BodyError::TooLarge).status(), 413);
        assert_eq!(body_error(BodyError::Invalid("x")).status(), 400);
        assert_eq!(body_error(BodyError::Timeout).status(), 408);
        assert_eq!(body_error(BodyError::Incomplete).status(), 400);
    }
}
