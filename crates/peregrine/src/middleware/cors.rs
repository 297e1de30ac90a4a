use super::{Middleware, Next};
use crate::handler::BoxFuture;
use crate::request::Request;
use peregrine_server::{Method, Response};
use std::borrow::Cow;
use std::sync::Arc;

/// Cross-origin resource sharing (the Fetch standard's CORS protocol).
///
/// * Preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an allowed
///   origin is answered here with `204` and the `Access-Control-Allow-*` headers, without
///   reaching the routes; from another origin it goes on to the application unchanged (the
///   browser then refuses, as it should).
/// * Other requests from an allowed origin get `Access-Control-Allow-Origin` (and
///   `-Credentials`, `-Expose-Headers` when configured) on the response.
///
/// ```
/// use peregrine::middleware::Cors;
/// let cors = Cors::new()
///     .allow_origin("https://app.example")
///     .allow_headers(["content-type", "authorization"])
///     .allow_credentials(true)
///     .max_age(600);
/// let client = peregrine::App::new()
///     .route("/api/me", peregrine::get(|_r: peregrine::Request| async { "{}" }))
///     .layer(cors)
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // The browser's preflight is answered by the layer, not the routes.
/// let pre = client.options("/api/me")
///     .header("origin", "https://app.example")
///     .header("access-control-request-method", "GET")
///     .send().await;
/// assert_eq!(pre.status(), 204);
/// assert_eq!(pre.header("access-control-allow-origin"), Some("https://app.example"));
/// assert_eq!(pre.header("access-control-allow-headers"), Some("content-type, authorization"));
/// assert_eq!(pre.header("access-control-max-age"), Some("600"));
///
/// // Another site gets no CORS headers: its scripts cannot read the answer.
/// let other = client.get("/api/me").header("origin", "https://evil.example").send().await;
/// assert_eq!(other.header("access-control-allow-origin"), None);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Cors {
    inner: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    /// `None` = any origin.
    origins: Option<Vec<String>>,
    methods: String,
    /// `None` = mirror what the preflight asks for.
    headers: Option<String>,
    expose: Option<String>,
    credentials: bool,
    max_age: Option<u32>,
}

impl Default for Cors {
    fn default() -> Self {
        Self::new()
    }
}

impl Cors {
    /// Any origin, the common methods, any request headers, no credentials.
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/data", get(|_r: Request| async { "[]" })).layer(Cors::new()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/data").header("origin", "https://anyone.example").send().await;
    /// assert_eq!(res.header("access-control-allow-origin"), Some("*"));
    /// # });
    /// ```
    pub fn new() -> Self {
        Cors {
            inner: Arc::new(Config {
                origins: None,
                methods: "GET, HEAD, POST, PUT, DELETE, PATCH".into(),
                headers: None,
                expose: None,
                credentials: false,
                max_age: None,
            }),
        }
    }

    fn cfg(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.inner)
    }

    /// Allows `origin` (exact match, e.g. `https://app.example`); call again for more. Once an
    /// origin is given, only listed origins are allowed.
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request};
    ///
    /// let cors = Cors::new().allow_origin("https://app.example").allow_origin("https://admin.example");
    /// let client = App::new().route("/data", get(|_r: Request| async { "[]" })).layer(cors).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/data").header("origin", "https://admin.example").send().await;
    /// assert_eq!(res.header("access-control-allow-origin"), Some("https://admin.example"));
    /// assert_eq!(res.header("vary"), Some("Origin"));
    /// # });
    /// ```
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.cfg()
            .origins
            .get_or_insert_with(Vec::new)
            .push(origin.into());
        self
    }
    /// The methods allowed in preflight answers (default `GET, HEAD, POST, PUT, DELETE, PATCH`).
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request};
    ///
    /// let cors = Cors::new().allow_methods(["GET", "POST"]);
    /// let client = App::new().route("/data", get(|_r: Request| async { "[]" })).layer(cors).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let pre = client.options("/data")
    ///     .header("origin", "https://app.example")
    ///     .header("access-control-request-method", "DELETE")
    ///     .send().await;
    /// // The browser compares: DELETE is not listed, so it will not send the request.
    /// assert_eq!(pre.header("access-control-allow-methods"), Some("GET, POST"));
    /// # });
    /// ```
    pub fn allow_methods<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, methods: I) -> Self {
        self.cfg().methods = join(methods);
        self
    }
    /// The request headers allowed in preflight answers (default: whatever is asked).
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{post, App, Request};
    ///
    /// let client = App::new().route("/upload", post(|_r: Request| async { "ok" })).layer(Cors::new()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let pre = client.options("/upload")
    ///     .header("origin", "https://app.example")
    ///     .header("access-control-request-method", "POST")
    ///     .header("access-control-request-headers", "x-upload-id")
    ///     .send().await;
    /// assert_eq!(pre.header("access-control-allow-headers"), Some("x-upload-id")); // mirrored
    /// # });
    /// ```
    pub fn allow_headers<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, headers: I) -> Self {
        self.cfg().headers = Some(join(headers));
        self
    }
    /// Response headers scripts may read (beyond the CORS-safelisted ones).
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request, Response};
    ///
    /// let cors = Cors::new().expose_headers(["x-total-count"]);
    /// let client = App::new()
    ///     .route("/items", get(|_r: Request| async { Response::text("[]").with_header("x-total-count", &b"0"[..]) }))
    ///     .layer(cors)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/items").header("origin", "https://app.example").send().await;
    /// assert_eq!(res.header("access-control-expose-headers"), Some("x-total-count"));
    /// # });
    /// ```
    pub fn expose_headers<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, headers: I) -> Self {
        self.cfg().expose = Some(join(headers));
        self
    }
    /// Allow cookies and credentials. Requires explicit origins: with credentials the answer
    /// names the requesting origin, and doing that for any origin would let every site act
    /// as the user.
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request};
    ///
    /// let cors = Cors::new().allow_origin("https://app.example").allow_credentials(true);
    /// let client = App::new().route("/me", get(|_r: Request| async { "{}" })).layer(cors).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/me").header("origin", "https://app.example").send().await;
    /// assert_eq!(res.header("access-control-allow-origin"), Some("https://app.example"));
    /// assert_eq!(res.header("access-control-allow-credentials"), Some("true"));
    ///
    /// // Without a list of origins, credentials allow no origin at all (never `*`).
    /// let open = App::new().route("/me", get(|_r: Request| async { "{}" }))
    ///     .layer(Cors::new().allow_credentials(true)).test();
    /// let res = open.get("/me").header("origin", "https://app.example").send().await;
    /// assert_eq!(res.header("access-control-allow-origin"), None);
    /// # });
    /// ```
    pub fn allow_credentials(mut self, yes: bool) -> Self {
        self.cfg().credentials = yes;
        self
    }
    /// How long browsers may cache a preflight answer, in seconds.
    ///
    /// ```
    /// use peregrine::middleware::Cors;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/x", get(|_r: Request| async { "x" })).layer(Cors::new().max_age(3600)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let pre = client.options("/x")
    ///     .header("origin", "https://app.example")
    ///     .header("access-control-request-method", "GET")
    ///     .send().await;
    /// assert_eq!(pre.header("access-control-max-age"), Some("3600"));
    /// # });
    /// ```
    pub fn max_age(mut self, seconds: u32) -> Self {
        self.cfg().max_age = Some(seconds);
        self
    }
}

fn join<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> String {
    items
        .into_iter()
        .map(|s| s.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

fn owned(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

impl Config {
    /// The `Access-Control-Allow-Origin` value for `origin`, if allowed.
    fn allow_origin_value(&self, origin: &str) -> Option<Cow<'static, [u8]>> {
        match &self.origins {
            Some(list) if list.iter().any(|o| o.eq_ignore_ascii_case(origin)) => {
                Some(owned(origin))
            }
            Some(_) => None,
            // Credentials are never combined with the wildcard (the Fetch standard forbids it),
            // and without a list we refuse rather than reflect arbitrary origins.
            None if self.credentials => None,
            None => Some(Cow::Borrowed(b"*")),
        }
    }
}

fn push(res: &mut Response, name: &'static str, value: Cow<'static, [u8]>) {
    res.headers.push((Cow::Borrowed(name), value));
}

impl Middleware for Cors {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let cfg = &*self.inner;
        let vary_origin = cfg.origins.is_some();
        let Some(origin) = req.header("origin") else {
            let fut = next.run(req);
            return Box::pin(async move {
                let mut res = fut.await;
                if vary_origin {
                    push(&mut res, "vary", Cow::Borrowed(b"Origin"));
                }
                res
            });
        };
        let Some(allow) = cfg.allow_origin_value(origin) else {
            let fut = next.run(req);
            return Box::pin(async move {
                let mut res = fut.await;
                push(&mut res, "vary", Cow::Borrowed(b"Origin"));
                res
            });
        };
        let preflight = req.method_kind() == Method::Options
            && req.header_bytes("access-control-request-method").is_some();
        if preflight {
            let mut res = Response::new(204);
            push(&mut res, "access-control-allow-origin", allow);
            push(
                &mut res,
                "access-control-allow-methods",
                owned(&cfg.methods),
            );
            let headers = match (&cfg.headers, req.header("access-control-request-headers")) {
                (Some(h), _) => Some(owned(h)),
                (None, Some(asked)) => Some(owned(asked)),
                (None, None) => None,
            };
            if let Some(h) = headers {
                push(&mut res, "access-control-allow-headers", h);
            }
            if cfg.credentials {
                push(
                    &mut res,
                    "access-control-allow-credentials",
                    Cow::Borrowed(b"true"),
                );
            }
            if let Some(age) = cfg.max_age {
                push(&mut res, "access-control-max-age", owned(&age.to_string()));
            }
            push(
                &mut res,
                "vary",
                Cow::Borrowed(
                    b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
                ),
            );
            return Box::pin(std::future::ready(res));
        }
        let credentials = cfg.credentials;
        let expose = cfg.expose.as_deref().map(owned);
        let fut = next.run(req);
        Box::pin(async move {
            let mut res = fut.await;
            push(&mut res, "access-control-allow-origin", allow);
            if credentials {
                push(
                    &mut res,
                    "access-control-allow-credentials",
                    Cow::Borrowed(b"true"),
                );
            }
            if let Some(e) = expose {
                push(&mut res, "access-control-expose-headers", e);
            }
            if vary_origin {
                push(&mut res, "vary", Cow::Borrowed(b"Origin"));
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_rules() {
        let any = Cors::new();
        assert_eq!(
            any.inner.allow_origin_value("https://x").as_deref(),
            Some(&b"*"[..])
        );
        let listed = Cors::new().allow_origin("https://a.example");
        assert_eq!(
            listed
                .inner
                .allow_origin_value("https://a.example")
                .as_deref(),
            Some(&b"https://a.example"[..])
        );
        assert!(listed
            .inner
            .allow_origin_value("https://b.example")
            .is_none());
        let creds_any = Cors::new().allow_credentials(true);
        assert!(creds_any.inner.allow_origin_value("https://x").is_none());
    }
}
