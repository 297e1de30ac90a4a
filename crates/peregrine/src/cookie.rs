//! `Set-Cookie` values (RFC 6265), built and checked. Reading a cookie is
//! [`Request::cookie`](crate::Request::cookie).
//!
//! ```
//! use peregrine::cookie::{SameSite, SetCookie};
//! use peregrine::{get, post, App, Error, Request, Response};
//!
//! async fn login(_req: Request) -> Result<Response, Error> {
//!     let sid = SetCookie::new("sid", "s3cr3t").path("/").http_only(true).same_site(SameSite::Lax);
//!     Ok(Response::new(204).with_header("set-cookie", sid.to_header()?))
//! }
//!
//! async fn me(req: Request) -> Result<String, Error> {
//!     let sid = req.cookie("sid").ok_or_else(Error::unauthorized)?;
//!     Ok(format!("session {sid}"))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = App::new().route("/login", post(login)).route("/me", get(me)).test();
//!
//! let res = client.post("/login").send().await;
//! assert_eq!(res.header("set-cookie"), Some("sid=s3cr3t; Path=/; HttpOnly; SameSite=Lax"));
//!
//! assert_eq!(client.get("/me").header("cookie", "theme=dark; sid=s3cr3t").send().await.text(), "session s3cr3t");
//! assert_eq!(client.get("/me").send().await.status(), 401);
//! # });
//! ```

use crate::error::Error;
use std::borrow::Cow;
use std::time::{Duration, SystemTime};

/// The `SameSite` attribute.
///
/// ```
/// use peregrine::cookie::{SameSite, SetCookie};
/// // Browsers refuse `SameSite=None` without `Secure`, so it is added.
/// let embed = SetCookie::new("widget", "1").same_site(SameSite::None);
/// assert_eq!(embed.to_header().unwrap(), b"widget=1; Secure; SameSite=None");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    /// Sent only with same-site requests.
    Strict,
    /// Also sent with top-level navigations from other sites.
    Lax,
    /// Sent with every request (requires `Secure`).
    None,
}

/// A cookie to set, rendered as a `Set-Cookie` header value. Names must be tokens and values
/// cookie-octets (RFC 6265 §4.1.1); anything else is refused with a (logged) 500 rather than
/// sent, since it would let data split or inject header attributes.
///
/// ```
/// use peregrine::{Request, Response, Error};
/// use peregrine::cookie::{SameSite, SetCookie};
///
/// async fn login(_req: Request) -> Result<Response, Error> {
///     let cookie = SetCookie::new("sid", "abc123")
///         .path("/")
///         .http_only(true)
///         .secure(true)
///         .same_site(SameSite::Lax)
///         .max_age(std::time::Duration::from_secs(3600));
///     Ok(Response::new(204).with_header("set-cookie", cookie.to_header()?))
/// }
/// # let _ = login;
/// assert_eq!(
///     SetCookie::new("a", "1").path("/").http_only(true).to_header().unwrap(),
///     b"a=1; Path=/; HttpOnly".to_vec()
/// );
/// ```
#[derive(Debug, Clone)]
pub struct SetCookie {
    name: Cow<'static, str>,
    value: Cow<'static, str>,
    path: Option<Cow<'static, str>>,
    domain: Option<Cow<'static, str>>,
    max_age: Option<Duration>,
    expires: Option<SystemTime>,
    secure: bool,
    http_only: bool,
    same_site: Option<SameSite>,
}

impl SetCookie {
    /// A session cookie `name=value` (no `Max-Age` or `Expires`: the browser drops it when it
    /// closes).
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// assert_eq!(SetCookie::new("cart", "42").to_header().unwrap(), b"cart=42");
    /// // A value may be quoted; the quotes are sent as they are.
    /// assert_eq!(SetCookie::new("q", "\"v1\"").to_header().unwrap(), b"q=\"v1\"");
    /// ```
    pub fn new(name: impl Into<Cow<'static, str>>, value: impl Into<Cow<'static, str>>) -> Self {
        SetCookie {
            name: name.into(),
            value: value.into(),
            path: None,
            domain: None,
            max_age: None,
            expires: None,
            secure: false,
            http_only: false,
            same_site: None,
        }
    }
    /// A cookie that deletes `name` in the browser (empty value, `Max-Age=0`). Give it the
    /// `Path` and `Domain` the cookie was set with: a browser deletes only that exact cookie.
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// let logout = SetCookie::removal("session").path("/");
    /// assert_eq!(logout.to_header().unwrap(), b"session=; Path=/; Max-Age=0");
    /// ```
    pub fn removal(name: impl Into<Cow<'static, str>>) -> Self {
        Self::new(name, "").max_age(Duration::ZERO)
    }
    /// `Path`: the cookie is sent only for requests under it.
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// let admin = SetCookie::new("admin_sid", "x9").path("/admin");
    /// assert_eq!(admin.to_header().unwrap(), b"admin_sid=x9; Path=/admin");
    /// // A `;` would end the attribute early: refused.
    /// assert!(SetCookie::new("a", "1").path("/x; Domain=evil").to_header().is_err());
    /// ```
    pub fn path(mut self, path: impl Into<Cow<'static, str>>) -> Self {
        self.path = Some(path.into());
        self
    }
    /// `Domain`: the cookie is also sent to the subdomains of `domain`.
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// let c = SetCookie::new("lang", "en").domain("example.com").path("/");
    /// assert_eq!(c.to_header().unwrap(), b"lang=en; Path=/; Domain=example.com");
    /// ```
    pub fn domain(mut self, domain: impl Into<Cow<'static, str>>) -> Self {
        self.domain = Some(domain.into());
        self
    }
    /// `Max-Age` (whole seconds; a fraction is dropped).
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// use std::time::Duration;
    /// let remember = SetCookie::new("remember", "1").max_age(Duration::from_secs(30 * 24 * 3600));
    /// assert_eq!(remember.to_header().unwrap(), b"remember=1; Max-Age=2592000");
    /// ```
    pub fn max_age(mut self, age: Duration) -> Self {
        self.max_age = Some(age);
        self
    }
    /// `Expires`, as an HTTP date (for clients that ignore `Max-Age`).
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// use std::time::{Duration, SystemTime};
    /// let at = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
    /// let c = SetCookie::new("promo", "spring").expires(at);
    /// assert_eq!(c.to_header().unwrap(), b"promo=spring; Expires=Sun, 06 Nov 1994 08:49:37 GMT");
    /// ```
    pub fn expires(mut self, at: SystemTime) -> Self {
        self.expires = Some(at);
        self
    }
    /// `Secure`: sent over HTTPS only.
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// assert_eq!(SetCookie::new("sid", "1").secure(true).to_header().unwrap(), b"sid=1; Secure");
    /// ```
    pub fn secure(mut self, yes: bool) -> Self {
        self.secure = yes;
        self
    }
    /// `HttpOnly`: hidden from scripts (`document.cookie`).
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// assert_eq!(SetCookie::new("sid", "1").http_only(true).to_header().unwrap(), b"sid=1; HttpOnly");
    /// ```
    pub fn http_only(mut self, yes: bool) -> Self {
        self.http_only = yes;
        self
    }
    /// `SameSite`.
    ///
    /// ```
    /// use peregrine::cookie::{SameSite, SetCookie};
    /// let csrf = SetCookie::new("csrf", "t0k").same_site(SameSite::Strict);
    /// assert_eq!(csrf.to_header().unwrap(), b"csrf=t0k; SameSite=Strict");
    /// ```
    pub fn same_site(mut self, s: SameSite) -> Self {
        self.same_site = Some(s);
        self
    }

    /// The header value, or a 500 error if a part is not allowed in a cookie (a value with `;`,
    /// a space, a comma or a line break would split the cookie or inject attributes).
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// let user_input = "x; Domain=evil.example";
    /// let err = SetCookie::new("name", user_input).to_header().unwrap_err();
    /// assert_eq!(err.status(), 500);
    /// assert!(SetCookie::new("bad name", "1").to_header().is_err());
    /// ```
    pub fn to_header(&self) -> Result<Vec<u8>, Error> {
        let bad = |what: &str| {
            Err(Error::internal()
                .with_detail(format!("refusing to send a cookie with an invalid {what}")))
        };
        if self.name.is_empty() || !self.name.bytes().all(is_token) {
            return bad("name");
        }
        let value = self
            .value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(&self.value);
        if !value.bytes().all(is_cookie_octet) {
            return bad("value");
        }
        let attr_ok = |s: &str| s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b';');
        if !self.path.as_deref().is_none_or(attr_ok) {
            return bad("path");
        }
        if !self.domain.as_deref().is_none_or(attr_ok) {
            return bad("domain");
        }
        let mut out = format!("{}={}", self.name, self.value);
        if let Some(p) = &self.path {
            out.push_str("; Path=");
            out.push_str(p);
        }
        if let Some(d) = &self.domain {
            out.push_str("; Domain=");
            out.push_str(d);
        }
        if let Some(a) = self.max_age {
            out.push_str("; Max-Age=");
            out.push_str(itoa::Buffer::new().format(a.as_secs()));
        }
        if let Some(e) = self.expires {
            out.push_str("; Expires=");
            out.push_str(&httpdate::fmt_http_date(e));
        }
        if self.secure || self.same_site == Some(SameSite::None) {
            // Browsers reject SameSite=None without Secure.
            out.push_str("; Secure");
        }
        if self.http_only {
            out.push_str("; HttpOnly");
        }
        match self.same_site {
            Some(SameSite::Strict) => out.push_str("; SameSite=Strict"),
            Some(SameSite::Lax) => out.push_str("; SameSite=Lax"),
            Some(SameSite::None) => out.push_str("; SameSite=None"),
            None => {}
        }
        Ok(out.into_bytes())
    }
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// cookie-octet: %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E
fn is_cookie_octet(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_attributes() {
        let c = SetCookie::new("sid", "x1")
            .domain("example.com")
            .max_age(Duration::from_secs(60))
            .expires(SystemTime::UNIX_EPOCH + Duration::from_secs(784111777))
            .same_site(SameSite::None);
        assert_eq!(
            String::from_utf8(c.to_header().unwrap()).unwrap(),
            "sid=x1; Domain=example.com; Max-Age=60; Expires=Sun, 06 Nov 1994 08:49:37 GMT; Secure; SameSite=None"
        );
        assert_eq!(
            SetCookie::removal("sid").to_header().unwrap(),
            b"sid=; Max-Age=0".to_vec()
        );
        assert_eq!(
            SetCookie::new("q", "\"quoted\"").to_header().unwrap(),
            b"q=\"quoted\"".to_vec()
        );
    }

    #[test]
    fn refuses_injection() {
        assert_eq!(
            SetCookie::new("a", "1; Domain=evil")
                .to_header()
                .unwrap_err()
                .status(),
            500
        );
        assert!(SetCookie::new("a b", "1").to_header().is_err());
        assert!(SetCookie::new("", "1").to_header().is_err());
        assert!(SetCookie::new("a", "x\r\nset-cookie: b=2")
            .to_header()
            .is_err());
        assert!(SetCookie::new("a", "1").path("/;x").to_header().is_err());
    }
}
