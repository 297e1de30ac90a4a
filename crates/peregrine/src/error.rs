//! Typed errors answered as RFC 9457 problem documents.

use crate::response::IntoResponse;
use bytes::Bytes;
use peregrine_server::{Response, ResponseBody};
use std::borrow::Cow;
use std::fmt;

/// Content type of every error answer.
pub(crate) const PROBLEM_JSON: &[u8] = b"application/problem+json";

/// An error a handler (or an extractor, or a middleware) returns; it becomes an
/// `application/problem+json` response ([RFC 9457]) with `type`, `title`, `status` and, for
/// client errors only, a `detail` that is safe to show.
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
            headers: Vec::new(),
            source: None,
        }
    }

    /// 400 Bad Request.
    pub fn bad_request() -> Self {
        Self::new(400)
    }
    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401)
    }
    /// 403 Forbidden.
    pub fn forbidden() -> Self {
        Self::new(403)
    }
    /// 404 Not Found.
    pub fn not_found() -> Self {
        Self::new(404)
    }
    /// 500 Internal Server Error.
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
    pub fn with_title(mut self, title: impl Into<Cow<'static, str>>) -> Self {
        self.title = title.into();
        self
    }

    /// Adds a response header (for example `Allow` on a 405, `WWW-Authenticate` on a 401).
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, [u8]>>,
    ) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }
    /// The title.
    pub fn title(&self) -> &str {
        &self.title
    }
    /// The detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Renders the problem document. Built by hand rather than through a serde struct so the
    /// members come out in the RFC's order with no intermediate allocation besides the buffer.
    fn body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.detail.as_ref().map_or(0, |d| d.len()));
        out.extend_from_slice(b"{\"type\":\"about:blank\",\"title\":");
        write_json_str(&mut out, &self.title);
        out.extend_from_slice(b",\"status\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.status).as_bytes());
        if self.status < 500 {
            if let Some(d) = &self.detail {
                out.extend_from_slice(b",\"detail\":");
                write_json_str(&mut out, d);
            }
        }
        out.push(b'}');
        out
    }
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json's string escaper, writing into our buffer; cannot fail on a Vec.
    let _ = serde_json::to_writer(&mut *out, s);
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

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.status >= 500 {
            match (&self.source, &self.detail) {
                (Some(src), _) => {
                    tracing::error!(status = self.status, error = %src, "handler failed")
                }
                (None, Some(d)) => {
                    tracing::error!(status = self.status, detail = %d, "handler failed")
                }
                (None, None) => tracing::debug!(status = self.status, "handler failed"),
            }
        }
        let body = self.body();
        let mut headers = self.headers;
        headers.push((Cow::Borrowed("content-type"), Cow::Borrowed(PROBLEM_JSON)));
        Response {
            status: self.status,
            headers,
            body: ResponseBody::Full(Bytes::from(body)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_json(r: &Response) -> serde_json::Value {
        match &r.body {
            ResponseBody::Full(b) => serde_json::from_slice(b).unwrap(),
            _ => panic!("expected full body"),
        }
    }

    #[test]
    fn internal_error_body_is_exactly_the_contract() {
        let r = Error::from(std::io::Error::other("secret path /etc/x")).into_response();
        assert_eq!(r.status, 500);
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Internal Server Error","status":500})
        );
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| n == "content-type" && &v[..] == PROBLEM_JSON));
    }

    #[test]
    fn client_error_shows_detail_server_error_hides_it() {
        let r = Error::bad_request()
            .with_detail("bad \"id\"")
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Bad Request","status":400,"detail":"bad \"id\""})
        );
        let r = Error::new(503)
            .with_detail("pool exhausted at 10.0.0.3")
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Service Unavailable","status":503})
        );
    }

    #[test]
    fn out_of_range_status_becomes_500() {
        assert_eq!(Error::new(200).status(), 500);
        assert_eq!(Error::new(404).title(), "Not Found");
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
