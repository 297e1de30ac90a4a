//! What routing found and the typed values a handler reads from the URL: the matched route's
//! pattern, the path parameters (raw, decoded, parsed) and the query string deserialised with
//! serde. Also where the app records the route found after pre-routing middleware.

use super::Request;
use crate::error::Error;
use serde::de::Deserialize;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::str::FromStr;

impl Request {
    /// The pattern of the matched route, e.g. `"/users/{id}"`; `None` when no route matched
    /// (seen by application-wide middleware on a 404).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/users/{id}", get(|req: Request| async move { req.route().unwrap_or("-").to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/users/7").send().await.text(), "/users/{id}");
    /// # });
    /// ```
    pub fn route(&self) -> Option<&str> {
        self.ctx.route(self.route).map(|r| &*r.pattern)
    }

    /// The raw (still percent-encoded) value of path parameter `name`.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/tags/{tag}", get(|req: Request| async move { req.param_raw("tag").unwrap_or("-").to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/tags/caf%C3%A9").send().await.text(), "caf%C3%A9");
    /// # });
    /// ```
    pub fn param_raw(&self, name: &str) -> Option<&str> {
        let route = self.ctx.route(self.route)?;
        let i = route.param_names.iter().position(|n| &**n == name)?;
        let (s, e) = *self.params.get(i)?;
        self.path().get(s as usize..e as usize)
    }

    /// Path parameter `name`, percent-decoded, as text. Allocates only if the segment
    /// contains `%` escapes.
    ///
    /// Fails with 400 if the decoded bytes are not UTF-8, and with 500 if the route has no such
    /// parameter (a programming error, logged).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn tag(req: Request) -> Result<String, Error> {
    ///     Ok(req.param_str("tag")?.into_owned())
    /// }
    /// let client = App::new().route("/tags/{tag}", get(tag)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/tags/caf%C3%A9").send().await.text(), "café");
    /// assert_eq!(client.get("/tags/%FF").send().await.status(), 400); // not UTF-8
    /// # });
    /// ```
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
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// async fn list(req: Request) -> String {
    ///     req.params().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join(",")
    /// }
    /// let client = App::new().route("/orgs/{org}/repos/{repo}", get(list)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/orgs/acme/repos/web").send().await.text(), "org=acme,repo=web");
    /// # });
    /// ```
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let names: &[Box<str>] = self
            .ctx
            .route(self.route)
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
}

fn missing_param(name: &str) -> Error {
    Error::internal().with_detail(format!("route has no path parameter `{name}`"))
}
