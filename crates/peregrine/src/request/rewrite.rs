//! Middleware rewriting a request before the handler (and inner layers) see it: header fields
//! set, appended, replaced or removed, the method overridden, the path changed before
//! routing. The engine's parsed request is never edited: changes live in `Extras` (in
//! `parts.rs`), the headers copied out of the engine's request on the first change.

use super::parts::{OwnedField, Request, PRE_ROUTING};
use crate::error::Error;
use peregrine_server::Method;

impl Request {
    /// The headers, copied out of the engine's request on the first change.
    fn headers_mut(&mut self) -> &mut Vec<OwnedField> {
        let inner = &self.inner;
        let rw = self.extras.get_or_insert_with(Default::default);
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
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, IntoResponse, Request, Response};
    ///
    /// struct Via;
    /// impl Hook for Via {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         req.append_header("via", "1.1 gateway").map_err(|e| e.into_response())
    ///     }
    /// }
    /// async fn vias(req: Request) -> String {
    ///     let v: Vec<&[u8]> = req.headers().filter(|(n, _)| *n == "via").map(|(_, v)| v).collect();
    ///     String::from_utf8_lossy(&v.join(&b"; "[..])).into_owned()
    /// }
    /// let client = App::new().route("/", get(vias)).hook(Via).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("via", "1.1 cdn").send().await;
    /// assert_eq!(res.text(), "1.1 cdn; 1.1 gateway"); // the field sent is kept
    /// # });
    /// ```
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
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, Request, Response};
    ///
    /// /// Handlers must not trust a client-sent `x-internal-user`.
    /// struct StripInternal;
    /// impl Hook for StripInternal {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         req.remove_header("x-internal-user");
    ///         Ok(())
    ///     }
    /// }
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { req.header("x-internal-user").unwrap_or("none").to_owned() }))
    ///     .hook(StripInternal)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").header("X-Internal-User", "root").send().await.text(), "none");
    /// # });
    /// ```
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
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{delete, App, IntoResponse, Request, Response};
    ///
    /// /// HTML forms can only POST: honour `X-HTTP-Method-Override`.
    /// struct MethodOverride;
    /// impl Hook for MethodOverride {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if let Some(m) = req.header("x-http-method-override").map(str::to_owned) {
    ///             req.set_method(&m).map_err(|e| e.into_response())?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// let client = App::new()
    ///     .route("/todos/{id}", delete(|req: Request| async move { format!("{} done", req.method()) }))
    ///     .hook_before_routing(MethodOverride)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.post("/todos/1").header("x-http-method-override", "DELETE").send().await;
    /// assert_eq!(res.text(), "DELETE done");
    /// assert_eq!(client.post("/todos/1").send().await.status(), 405);
    /// # });
    /// ```
    pub fn set_method(&mut self, method: &str) -> Result<(), Error> {
        if !crate::header::valid_name(method) {
            return Err(Error::internal().with_detail(format!("invalid method {method:?}")));
        }
        let kind = Method::from_token(method.as_bytes());
        self.extras.get_or_insert_with(Default::default).method = Some((method.into(), kind));
        Ok(())
    }

    /// Rewrites the path, before routing only
    /// ([`App::layer_before_routing`](crate::App::layer_before_routing) /
    /// [`App::hook_before_routing`](crate::App::hook_before_routing)): the new path is then
    /// normalised and routed like one sent by the client (a path that normalisation refuses is
    /// answered 400). After routing it fails with a (logged) 500, because the route and its
    /// parameters were found on the old path. `path` must start with `/` and contain no `?`,
    /// `#` or whitespace; the query string is kept.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, IntoResponse, Request, Response};
    ///
    /// /// Old clients call `/v1/...`; the routes live under `/api/v1/`.
    /// struct Prefix;
    /// impl Hook for Prefix {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if let Some(rest) = req.path().strip_prefix("/v1/") {
    ///             let new = format!("/api/v1/{rest}");
    ///             req.set_path(&new).map_err(|e| e.into_response())?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// let client = App::new()
    ///     .route("/api/v1/ping", get(|req: Request| async move { format!("pong {}", req.target()) }))
    ///     .hook_before_routing(Prefix)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/v1/ping?x=1").send().await.text(), "pong /v1/ping?x=1");
    /// # });
    /// ```
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
