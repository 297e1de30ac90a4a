//! Typed errors answered as RFC 9457 problem documents: the [`Error`] type, its constructors
//! and accessors here; its rendering as an `application/problem+json` response in `problem.rs`.

mod problem;

use crate::header::IntoHeaderValue;
use std::borrow::Cow;
use std::fmt;

/// An error a handler (or an extractor, or a middleware) returns; it becomes an
/// `application/problem+json` response ([RFC 9457]) with `type` (default `about:blank`),
/// `title`, `status`, and optionally `instance`; for client errors (4xx) also a `detail` and
/// extension members (such as per-field validation `errors`). For server errors (5xx) the
/// detail and extensions are logged and left out of the body, so internals never leak.
///
/// ```
/// use peregrine::{Error, IntoResponse};
/// let e = Error::new(422)
///     .with_type("https://example.com/problems/validation")
///     .with_title("Your request is not valid.")
///     .with_instance("/todos")
///     .with_field_error("title", "must not be empty")
///     .with_field_error("due", "must be a date (YYYY-MM-DD)")
///     .with_extension("request_id", "r-81");
/// let r = e.into_response();
/// let peregrine::ResponseBody::Full(body) = r.body else { unreachable!() };
/// let j: serde_json::Value = serde_json::from_slice(&body).unwrap();
/// assert_eq!(j, serde_json::json!({
///     "type": "https://example.com/problems/validation",
///     "title": "Your request is not valid.",
///     "status": 422,
///     "instance": "/todos",
///     "request_id": "r-81",
///     "errors": [
///         {"pointer": "#/title", "field": "title", "detail": "must not be empty"},
///         {"pointer": "#/due", "field": "due", "detail": "must be a date (YYYY-MM-DD)"}
///     ]
/// }));
/// ```
///
/// Your own error type can convert into `Error` (or implement
/// [`IntoResponse`](crate::IntoResponse) itself: handlers may return `Result<T, E>` for any
/// `E: IntoResponse`).
///
/// Any `std::error::Error` converts into an `Error` with `?`: it is answered as a bare
/// `500 Internal Server Error` whose body says nothing about the cause; the cause is logged
/// through `tracing` at `error` level instead, so internals never leak to clients.
///
/// [RFC 9457]: https://www.rfc-editor.org/rfc/rfc9457
///
/// ```
/// use peregrine::{Error, Request};
///
/// async fn show(req: Request) -> Result<String, Error> {
///     let id: u64 = req.param("id")?; // 400 problem if not a number
///     if id == 0 {
///         return Err(Error::not_found().with_detail("no user 0"));
///     }
///     let n: u64 = "12".parse()?; // any std error: logged, answered as a bare 500
///     Ok(format!("user {}", id + n))
/// }
/// # let _ = show;
/// ```
pub struct Error {
    status: u16,
    title: Cow<'static, str>,
    detail: Option<Cow<'static, str>>,
    /// The members most errors lack, boxed so that `Result<T, Error>` stays small on the
    /// paths that never fail.
    extra: Option<Box<Extra>>,
    headers: Vec<(Cow<'static, str>, Cow<'static, [u8]>)>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// An error with `status` and the standard reason phrase as title.
    ///
    /// ```
    /// let e = peregrine::Error::new(409);
    /// assert_eq!(e.status(), 409);
    /// assert_eq!(e.title(), "Conflict");
    /// ```
    pub fn new(status: u16) -> Self {
        let status = if (400..=599).contains(&status) {
            status
        } else {
            500
        };
        Error {
            status,
            title: Cow::Borrowed(peregrine_server::codec::response::reason_phrase(status)),
            detail: None,
            extra: None,
            headers: Vec::new(),
            source: None,
        }
    }

    /// 400 Bad Request.
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn search(req: Request) -> Result<String, Error> {
    ///     let q = req.query_string().unwrap_or("");
    ///     if q.len() > 100 {
    ///         return Err(Error::bad_request().with_detail("query too long"));
    ///     }
    ///     Ok(format!("results for {q}"))
    /// }
    ///
    /// let client = App::new().route("/search", get(search)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get(&format!("/search?{}", "q".repeat(101))).send().await;
    /// assert_eq!(res.status(), 400);
    /// assert_eq!(res.json::<serde_json::Value>()["detail"], "query too long");
    /// # });
    /// ```
    pub fn bad_request() -> Self {
        Self::new(400)
    }
    /// 401 Unauthorized (add the `WWW-Authenticate` challenge with [`Error::with_header`]).
    ///
    /// ```
    /// let e = peregrine::Error::unauthorized().with_header("www-authenticate", "Bearer");
    /// assert_eq!((e.status(), e.title()), (401, "Unauthorized"));
    /// ```
    pub fn unauthorized() -> Self {
        Self::new(401)
    }
    /// 403 Forbidden: authenticated, but not allowed.
    ///
    /// ```
    /// use peregrine::{delete, App, Error, Request, StatusCode};
    ///
    /// async fn remove(req: Request) -> Result<StatusCode, Error> {
    ///     if req.header("x-role") != Some("admin") {
    ///         return Err(Error::forbidden().with_detail("only admins delete projects"));
    ///     }
    ///     Ok(StatusCode::NO_CONTENT)
    /// }
    ///
    /// let client = App::new().route("/projects/{id}", delete(remove)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.delete("/projects/3").send().await.status(), 403);
    /// assert_eq!(client.delete("/projects/3").header("x-role", "admin").send().await.status(), 204);
    /// # });
    /// ```
    pub fn forbidden() -> Self {
        Self::new(403)
    }
    /// 404 Not Found.
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn user(req: Request) -> Result<&'static str, Error> {
    ///     match req.param::<u64>("id")? {
    ///         1 => Ok("ada"),
    ///         _ => Err(Error::not_found().with_detail("no such user")),
    ///     }
    /// }
    ///
    /// let client = App::new().route("/users/{id}", get(user)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/users/2").send().await;
    /// assert_eq!(res.status(), 404);
    /// assert_eq!(res.header("content-type"), Some("application/problem+json"));
    /// assert_eq!(
    ///     res.json::<serde_json::Value>(),
    ///     serde_json::json!({"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no such user"})
    /// );
    /// # });
    /// ```
    pub fn not_found() -> Self {
        Self::new(404)
    }
    /// 409 Conflict: the request clashes with the resource's current state.
    ///
    /// ```
    /// let e = peregrine::Error::conflict().with_detail("the username is taken");
    /// assert_eq!((e.status(), e.detail()), (409, Some("the username is taken")));
    /// ```
    pub fn conflict() -> Self {
        Self::new(409)
    }
    /// 422 Unprocessable Content: the usual answer to a validation failure (add the fields
    /// with [`Error::with_field_error`]).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request, StatusCode};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Signup { email: String, age: u8 }
    ///
    /// async fn signup(mut req: Request) -> Result<StatusCode, Error> {
    ///     let s: Signup = req.json().await?; // 400 if it is not a Signup at all
    ///     let mut problems = Vec::new();
    ///     if !s.email.contains('@') { problems.push(("email", "must be an address")); }
    ///     if s.age < 13 { problems.push(("age", "must be 13 or more")); }
    ///     if !problems.is_empty() {
    ///         return Err(problems.into_iter().fold(Error::unprocessable(), |e, (f, d)| e.with_field_error(f, d)));
    ///     }
    ///     Ok(StatusCode::CREATED)
    /// }
    ///
    /// let client = App::new().route("/signup", post(signup)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.post("/signup").json(&serde_json::json!({"email": "ada", "age": 9})).send().await;
    /// assert_eq!(res.status(), 422);
    /// let body: serde_json::Value = res.json();
    /// assert_eq!(body["errors"][0]["field"], "email");
    /// assert_eq!(body["errors"][1]["pointer"], "#/age");
    /// let ok = client.post("/signup").json(&serde_json::json!({"email": "a@b.c", "age": 30})).send().await;
    /// assert_eq!(ok.status(), 201);
    /// # });
    /// ```
    pub fn unprocessable() -> Self {
        Self::new(422)
    }
    /// 500 Internal Server Error. A detail given to it is logged, never sent.
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn report(_req: Request) -> Result<String, Error> {
    ///     Err(Error::internal().with_detail("template cache corrupt at slot 7"))
    /// }
    ///
    /// let client = App::new().route("/report", get(report)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/report").send().await;
    /// assert_eq!(res.status(), 500);
    /// assert!(!res.text().contains("slot 7"));
    /// # });
    /// ```
    pub fn internal() -> Self {
        Self::new(500)
    }

    /// A 500 carrying `source` for the log only; the client sees the bare 500.
    ///
    /// ```
    /// let io = std::io::Error::other("db password wrong");
    /// let e = peregrine::Error::internal_from(io);
    /// assert_eq!(e.status(), 500);
    /// assert_eq!(e.detail(), None); // never shown
    /// ```
    pub fn internal_from(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        let mut e = Self::new(500);
        e.source = Some(source.into());
        e
    }

    /// Sets the human-readable `detail` member. It is shown to the client for 4xx errors only;
    /// for 5xx it is logged and left out of the body.
    ///
    /// ```
    /// let e = peregrine::Error::bad_request().with_detail("limit must be positive");
    /// assert_eq!(e.detail(), Some("limit must be positive"));
    /// ```
    pub fn with_detail(mut self, detail: impl Into<Cow<'static, str>>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Replaces the title (defaults to the reason phrase).
    ///
    /// ```
    /// let e = peregrine::Error::new(402).with_title("Your trial has ended.");
    /// assert_eq!(e.title(), "Your trial has ended.");
    /// ```
    pub fn with_title(mut self, title: impl Into<Cow<'static, str>>) -> Self {
        self.title = title.into();
        self
    }

    /// Sets the `type` member: a URI identifying the problem type (default `about:blank`).
    ///
    /// ```
    /// use peregrine::Error;
    /// assert_eq!(Error::forbidden().type_uri(), "about:blank");
    /// let e = Error::forbidden().with_type("https://example.com/problems/out-of-credit");
    /// assert_eq!(e.type_uri(), "https://example.com/problems/out-of-credit");
    /// ```
    pub fn with_type(mut self, uri: impl Into<Cow<'static, str>>) -> Self {
        self.extra().type_uri = Some(uri.into());
        self
    }

    /// Sets the `instance` member: a URI identifying this occurrence (for example the request
    /// path, or a link to a log entry).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn account(req: Request) -> Result<String, Error> {
    ///     Err(Error::forbidden().with_instance(req.path().to_owned()))
    /// }
    ///
    /// let client = App::new().route("/accounts/{id}", get(account)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/accounts/12345").send().await;
    /// assert_eq!(res.json::<serde_json::Value>()["instance"], "/accounts/12345");
    /// # });
    /// ```
    pub fn with_instance(mut self, uri: impl Into<Cow<'static, str>>) -> Self {
        self.extra().instance = Some(uri.into());
        self
    }

    /// Adds an extension member `name` (any serialisable value). Shown for 4xx only. The
    /// standard member names (`type`, `title`, `status`, `detail`, `instance`) and `errors`
    /// (see [`Error::with_field_error`]) are refused: such a member is dropped and logged.
    ///
    /// ```
    /// let e = peregrine::Error::new(429).with_extension("retry_after_s", 30);
    /// # let _ = e;
    /// ```
    pub fn with_extension(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl serde::Serialize,
    ) -> Self {
        let name = name.into();
        if matches!(
            &*name,
            "type" | "title" | "status" | "detail" | "instance" | "errors"
        ) {
            tracing::warn!(member = %name, "problem extension uses a reserved name; dropped");
            return self;
        }
        match serde_json::to_value(value) {
            Ok(v) => {
                let ext = &mut self.extra().extensions;
                match ext.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = v,
                    None => ext.push((name, v)),
                }
            }
            Err(e) => {
                tracing::warn!(member = %name, error = %e, "problem extension not serialisable; dropped")
            }
        }
        self
    }

    /// Adds a per-field error to the `errors` member: `{"pointer": "#/<field>", "field":
    /// <field>, "detail": <detail>}` (the pointer as in RFC 9457's example; a `field` given
    /// with `/` is taken as a path, `a/b` → `#/a/b`). Shown for 4xx only.
    ///
    /// ```
    /// use peregrine::{Error, IntoResponse, ResponseBody};
    ///
    /// let e = Error::unprocessable().with_field_error("address/zip", "must be 5 digits");
    /// let ResponseBody::Full(body) = e.into_response().body else { unreachable!() };
    /// let j: serde_json::Value = serde_json::from_slice(&body).unwrap();
    /// assert_eq!(j["errors"], serde_json::json!([
    ///     {"pointer": "#/address/zip", "field": "address/zip", "detail": "must be 5 digits"}
    /// ]));
    /// ```
    pub fn with_field_error(
        mut self,
        field: impl Into<Cow<'static, str>>,
        detail: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.extra()
            .field_errors
            .push((field.into(), detail.into()));
        self
    }

    /// Adds a response header (for example `Allow` on a 405, `WWW-Authenticate` on a 401).
    /// A name or value that is not a valid header is dropped (and logged).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// async fn export(_req: Request) -> Result<String, Error> {
    ///     Err(Error::new(429).with_detail("one export per minute").with_header("retry-after", "60"))
    /// }
    ///
    /// let client = App::new().route("/export", get(export)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/export").send().await;
    /// assert_eq!((res.status(), res.header("retry-after")), (429, Some("60")));
    /// # });
    /// ```
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl IntoHeaderValue,
    ) -> Self {
        let (name, value) = (name.into(), value.into_header_value());
        if crate::header::valid_name(&name) && crate::header::valid_value(&value) {
            self.headers.push((name, value));
        } else {
            tracing::error!(header = %name, "invalid header on an error response; dropped");
        }
        self
    }

    /// The status code (a status outside 400–599 given to [`Error::new`] becomes 500).
    ///
    /// ```
    /// use peregrine::Error;
    /// assert_eq!(Error::new(418).status(), 418);
    /// assert_eq!(Error::new(302).status(), 500); // an error is never a redirect
    /// ```
    pub fn status(&self) -> u16 {
        self.status
    }
    /// The title.
    ///
    /// ```
    /// assert_eq!(peregrine::Error::new(429).title(), "Too Many Requests");
    /// ```
    pub fn title(&self) -> &str {
        &self.title
    }
    /// The detail, if any (kept even for 5xx, where it is logged rather than sent).
    ///
    /// ```
    /// use peregrine::Error;
    /// assert_eq!(Error::not_found().detail(), None);
    /// assert_eq!(Error::internal().with_detail("pool exhausted").detail(), Some("pool exhausted"));
    /// ```
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
    /// The `type` URI (`about:blank` unless set).
    ///
    /// ```
    /// use peregrine::Error;
    /// let e = Error::new(403).with_type("https://example.com/problems/quota");
    /// assert_eq!(e.type_uri(), "https://example.com/problems/quota");
    /// assert_eq!(Error::new(403).type_uri(), "about:blank");
    /// ```
    pub fn type_uri(&self) -> &str {
        self.extra
            .as_ref()
            .and_then(|x| x.type_uri.as_deref())
            .unwrap_or("about:blank")
    }

    fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }
}

/// RFC 9457 members beyond `type`-less basics: rare, so kept out of line.
#[derive(Default)]
struct Extra {
    type_uri: Option<Cow<'static, str>>,
    instance: Option<Cow<'static, str>>,
    /// Extension members in insertion order (rendered for 4xx only).
    extensions: Vec<(Cow<'static, str>, serde_json::Value)>,
    /// Per-field errors, rendered as the `errors` member (4xx only).
    field_errors: Vec<(Cow<'static, str>, Cow<'static, str>)>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("status", &self.status).field("title", &self.title);
        if let Some(x) = &self.detail {
            d.field("detail", x);
        }
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.title)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        if let Some(s) = &self.source {
            write!(f, " ({s})")?;
        }
        Ok(())
    }
}

/// `?` on any standard error gives a 500 whose cause goes to the log, not to the client.
/// (`Error` itself deliberately does not implement `std::error::Error`, as with `anyhow`, so that
/// this blanket conversion is possible.)
impl<E> From<E> for Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(e: E) -> Self {
        Error::internal_from(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::into_response::IntoResponse;

    #[test]
    fn out_of_range_status_becomes_500() {
        assert_eq!(Error::new(200).status(), 500);
        assert_eq!(Error::new(404).title(), "Not Found");
    }

    #[test]
    fn invalid_error_headers_are_dropped() {
        let r = Error::unauthorized()
            .with_header("www-authenticate", "Bearer\r\nx: y")
            .with_header("www-authenticate", String::from("Bearer realm=\"api\""))
            .into_response();
        let v: Vec<_> = r
            .headers
            .iter()
            .filter(|(n, _)| n == "www-authenticate")
            .collect();
        assert_eq!(v.len(), 1);
        assert_eq!(&v[0].1[..], b"Bearer realm=\"api\"");
    }

    #[test]
    fn extra_headers_are_kept() {
        let r = Error::new(405)
            .with_header("allow", &b"GET, HEAD"[..])
            .into_response();
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| n == "allow" && &v[..] == b"GET, HEAD"));
    }
}
