//! Turning handler results into responses: the [`IntoResponse`] implementations for strings,
//! bytes, statuses, header tuples, [`Json`], [`Html`] and [`Redirect`] (the trait itself is in
//! the leaf `into_response`, which the error type implements it from).

pub(crate) mod chunks;
pub(crate) mod into_response;

pub use into_response::IntoResponse;
pub(crate) use into_response::OCTET_STREAM;
#[cfg(test)]
pub(crate) use into_response::{APPLICATION_JSON, TEXT_PLAIN};

use crate::error::Error;
use crate::header::{self, IntoHeaders};
use crate::status::StatusCode;
use bytes::Bytes;
use peregrine_server::{Response, ResponseBody};
use serde::Serialize;
use std::borrow::Cow;

pub use crate::stream_body::{BodySender, Disconnected, StreamBody};

const TEXT_HTML: &[u8] = b"text/html; charset=utf-8";

fn full(content_type: &'static [u8], body: ResponseBody) -> Response {
    // The engine's recycled field list (handed back after each head is encoded): no
    // allocation per response, where a list of its own was a `malloc` and a `free` each.
    let mut r = Response::new(200).with_header("content-type", content_type);
    r.body = body;
    r
}

impl IntoResponse for &'static str {
    #[inline]
    fn into_response(self) -> Response {
        // `Static`: the engine may send it with the memoized head in one copy. `text`: the
        // engine's own recycled `Content-Type` list, cheaper than pushing the field.
        Response::text(ResponseBody::Static(self.as_bytes()))
    }
}
impl IntoResponse for String {
    #[inline]
    fn into_response(self) -> Response {
        Response::text(ResponseBody::Full(chunks::owned(self.into_bytes())))
    }
}
impl IntoResponse for Cow<'static, str> {
    fn into_response(self) -> Response {
        match self {
            Cow::Borrowed(s) => s.into_response(),
            Cow::Owned(s) => s.into_response(),
        }
    }
}
impl IntoResponse for Bytes {
    fn into_response(self) -> Response {
        full(OCTET_STREAM, ResponseBody::Full(self))
    }
}
impl IntoResponse for Vec<u8> {
    fn into_response(self) -> Response {
        full(OCTET_STREAM, ResponseBody::Full(chunks::owned(self)))
    }
}
impl IntoResponse for &'static [u8] {
    fn into_response(self) -> Response {
        full(OCTET_STREAM, ResponseBody::Static(self))
    }
}
/// `()` is an empty `200 OK`.
impl IntoResponse for () {
    fn into_response(self) -> Response {
        Response::new(200)
    }
}

/// `Ok` and `Err` both answer as themselves: `Result<T, Error>`, `Result<T, YourError>`.
impl<T: IntoResponse, E: IntoResponse> IntoResponse for Result<T, E> {
    #[inline]
    fn into_response(self) -> Response {
        match self {
            Ok(t) => t.into_response(),
            Err(e) => e.into_response(),
        }
    }
}

/// A bare status: empty below 400, the problem document for that status from 400 on.
impl IntoResponse for StatusCode {
    fn into_response(self) -> Response {
        let code = self.as_u16();
        if code >= 400 {
            Error::new(code).into_response()
        } else {
            Response::new(code)
        }
    }
}

/// A bare status number, as [`StatusCode`] answers it: an error status (400 and up) is its
/// problem document, another an empty response; a number that is no status is a 500.
///
/// ```
/// use peregrine::IntoResponse;
/// assert_eq!(204u16.into_response().status, 204);
/// let r = 404u16.into_response();
/// assert_eq!(r.status, 404);
/// assert!(r.headers.iter().any(|(_, v)| &**v == b"application/problem+json"));
/// assert_eq!(7u16.into_response().status, 500);
/// ```
impl IntoResponse for u16 {
    fn into_response(self) -> Response {
        match StatusCode::from_u16(self) {
            Some(code) => code.into_response(),
            None => Error::internal()
                .with_detail(format!("{self} is not a status code"))
                .into_response(),
        }
    }
}

/// `(status, body)`.
impl<T: IntoResponse> IntoResponse for (u16, T) {
    #[inline]
    fn into_response(self) -> Response {
        let mut r = self.1.into_response();
        r.status = self.0;
        r
    }
}

/// `(status, body)`.
impl<T: IntoResponse> IntoResponse for (StatusCode, T) {
    #[inline]
    fn into_response(self) -> Response {
        (self.0.as_u16(), self.1).into_response()
    }
}

/// `(status, headers, body)`.
impl<H: IntoHeaders, T: IntoResponse> IntoResponse for (u16, H, T) {
    fn into_response(self) -> Response {
        let mut r = self.2.into_response();
        r.status = self.0;
        add_headers(r, self.1)
    }
}

/// `(status, headers, body)`.
impl<H: IntoHeaders, T: IntoResponse> IntoResponse for (StatusCode, H, T) {
    fn into_response(self) -> Response {
        (self.0.as_u16(), self.1, self.2).into_response()
    }
}

/// `(headers, body)`.
impl<K, V, T, const N: usize> IntoResponse for ([(K, V); N], T)
where
    [(K, V); N]: IntoHeaders,
    T: IntoResponse,
{
    fn into_response(self) -> Response {
        add_headers(self.1.into_response(), self.0)
    }
}

/// `(headers, body)`.
impl<T: IntoResponse> IntoResponse for (crate::Headers, T) {
    fn into_response(self) -> Response {
        add_headers(self.1.into_response(), self.0)
    }
}

/// Appends `headers` to `r`, or answers a logged 500 if one of them is malformed (it would
/// split or corrupt the header block).
fn add_headers(mut r: Response, headers: impl IntoHeaders) -> Response {
    for (n, v) in headers.into_headers() {
        if !header::valid_name(&n) || !header::valid_value(&v) {
            return Error::internal()
                .with_detail(format!("invalid response header {n:?}"))
                .into_response();
        }
        r.headers.push((n, v));
    }
    r
}

/// A JSON response (`application/json`), serialised with `serde_json`.
///
/// ```
/// use peregrine::{IntoResponse, Json};
/// #[derive(serde::Serialize)]
/// struct User { id: u64, name: String }
/// let r = Json(User { id: 42, name: "user-42".into() }).into_response();
/// assert_eq!(r.status, 200);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    #[inline]
    fn into_response(self) -> Response {
        match chunks::json(&self.0) {
            // The engine's own recycled `Content-Type` list, as text answers get.
            Ok(body) => Response::json(ResponseBody::Full(body)),
            Err(e) => Error::internal_from(e).into_response(),
        }
    }
}

/// An HTML response (`text/html; charset=utf-8`).
///
/// ```
/// use peregrine::{Html, IntoResponse};
/// let r = Html("<h1>Hi</h1>").into_response();
/// assert_eq!(r.status, 200);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Html<T>(pub T);

impl<T: Into<Bytes>> IntoResponse for Html<T> {
    fn into_response(self) -> Response {
        full(TEXT_HTML, ResponseBody::Full(self.0.into()))
    }
}

/// A redirect with a `Location` header.
///
/// ```
/// use peregrine::{IntoResponse, Redirect};
/// let r = Redirect::see_other("/login").into_response();
/// assert_eq!(r.status, 303);
/// assert!(r.headers.iter().any(|(n, v)| n == "location" && &v[..] == b"/login"));
/// ```
#[derive(Debug, Clone)]
pub struct Redirect {
    status: u16,
    location: Cow<'static, str>,
}

impl Redirect {
    /// 307 Temporary Redirect: same method, same body.
    ///
    /// ```
    /// use peregrine::{IntoResponse, Redirect};
    ///
    /// let r = Redirect::temporary("/maintenance").into_response();
    /// assert_eq!(r.status, 307);
    /// let (name, value) = &r.headers[0];
    /// assert_eq!((&name[..], &value[..]), ("location", &b"/maintenance"[..]));
    /// ```
    pub fn temporary(to: impl Into<Cow<'static, str>>) -> Self {
        Redirect {
            status: 307,
            location: to.into(),
        }
    }
    /// 308 Permanent Redirect: same method, same body.
    ///
    /// ```
    /// use peregrine::{IntoResponse, Redirect};
    ///
    /// let r = Redirect::permanent("/new").into_response();
    /// assert_eq!(r.status, 308);
    /// let (name, value) = &r.headers[0];
    /// assert_eq!((&name[..], &value[..]), ("location", &b"/new"[..]));
    /// ```
    pub fn permanent(to: impl Into<Cow<'static, str>>) -> Self {
        Redirect {
            status: 308,
            location: to.into(),
        }
    }
    /// 303 See Other: the client follows with GET (after a form POST).
    ///
    /// ```
    /// use peregrine::{IntoResponse, Redirect};
    ///
    /// let r = Redirect::see_other("/todos/1").into_response();
    /// assert_eq!(r.status, 303);
    /// let (name, value) = &r.headers[0];
    /// assert_eq!((&name[..], &value[..]), ("location", &b"/todos/1"[..]));
    /// ```
    pub fn see_other(to: impl Into<Cow<'static, str>>) -> Self {
        Redirect {
            status: 303,
            location: to.into(),
        }
    }
    /// 302 Found / 301 Moved Permanently and other codes, for legacy clients.
    ///
    /// ```
    /// use peregrine::{IntoResponse, Redirect};
    ///
    /// let r = Redirect::with_status(301, "https://example.com/").into_response();
    /// assert_eq!(r.status, 301);
    /// let (name, value) = &r.headers[0];
    /// assert_eq!((&name[..], &value[..]), ("location", &b"https://example.com/"[..]));
    /// ```
    pub fn with_status(status: u16, to: impl Into<Cow<'static, str>>) -> Self {
        Redirect {
            status,
            location: to.into(),
        }
    }
}

impl IntoResponse for Redirect {
    fn into_response(self) -> Response {
        // A Location with CR/LF would split the header; refuse rather than emit it.
        if self.location.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Error::internal()
                .with_detail("redirect target contains control characters")
                .into_response();
        }
        let loc: Cow<'static, [u8]> = match self.location {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
        Response::new(self.status).with_header("location", loc)
    }
}

/// Whether `r` carries an upgrade the engine will not perform: an upgrade function with a
/// status other than 101 (a handler or middleware refused the switch after accepting it).
#[inline]
pub(crate) fn is_unswitched_upgrade(r: &Response) -> bool {
    matches!(r.body, ResponseBody::Upgrade(_)) && r.status != 101
}

/// Makes an unswitched upgrade ([`is_unswitched_upgrade`]) the ordinary response it is: the
/// upgrade function goes (the engine would drop it unrun), and so do the fields that accept
/// a switch, which belong to a 101 (RFC 9110 §7.8, RFC 6455 §4.2.2): `Upgrade` (kept on a 426,
/// which must name what it asks for), the `upgrade` token of `Connection`, and the
/// `Sec-WebSocket-Accept` / `-Protocol` / `-Extensions` answers.
#[cold]
#[inline(never)]
pub(crate) fn settle_unswitched_upgrade(r: &mut Response) {
    r.body = ResponseBody::Empty;
    let keep_upgrade = r.status == 426;
    r.headers.retain_mut(|(name, value)| {
        if name.eq_ignore_ascii_case("upgrade") {
            return keep_upgrade;
        }
        if name.eq_ignore_ascii_case("connection") {
            let rest: Vec<&[u8]> = value
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case(b"upgrade"))
                .collect();
            if rest.is_empty() {
                return false;
            }
            *value = Cow::Owned(rest.join(&b", "[..]));
            return true;
        }
        ![
            "sec-websocket-accept",
            "sec-websocket-protocol",
            "sec-websocket-extensions",
        ]
        .iter()
        .any(|f| name.eq_ignore_ascii_case(f))
    });
}

// Used by the compression layer and by tests.
#[cfg_attr(not(feature = "compression"), allow(dead_code))]
pub(crate) fn header_value<'a>(r: &'a Response, name: &str) -> Option<&'a [u8]> {
    r.headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| &v[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unswitched_upgrade_loses_the_switch_fields_only() {
        let upgrade = || ResponseBody::Upgrade(Box::new(|_io| Box::pin(async {})));
        let mut r = Response::new(403)
            .with_header("Upgrade", b"websocket".as_slice())
            .with_header("Connection", b"Upgrade, close".as_slice())
            .with_header("Sec-WebSocket-Accept", b"x".as_slice())
            .with_header("Sec-WebSocket-Protocol", b"chat".as_slice())
            .with_header("X-Reason", b"not yours".as_slice())
            .with_body(upgrade());
        assert!(is_unswitched_upgrade(&r));
        settle_unswitched_upgrade(&mut r);
        assert!(matches!(r.body, ResponseBody::Empty));
        let fields: Vec<(&str, &[u8])> = r.headers.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            fields,
            [
                ("Connection", &b"close"[..]),
                ("X-Reason", &b"not yours"[..])
            ]
        );
        // A 426 must say what it asks for: its Upgrade stays.
        let mut r = Response::new(426)
            .with_header("Upgrade", b"websocket".as_slice())
            .with_header("Connection", b"upgrade".as_slice())
            .with_body(upgrade());
        settle_unswitched_upgrade(&mut r);
        assert_eq!(header_value(&r, "upgrade"), Some(&b"websocket"[..]));
        assert_eq!(header_value(&r, "connection"), None);
        // A real switch is left alone.
        let r = Response::new(101).with_body(upgrade());
        assert!(!is_unswitched_upgrade(&r));
    }

    #[test]
    fn static_text_and_bytes_stay_static_with_one_lower_case_content_type() {
        let r = "Hello, World!".into_response();
        assert!(matches!(r.body, ResponseBody::Static(b) if b == b"Hello, World!"));
        let fields: Vec<(&str, &[u8])> = r.headers.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(fields, [("content-type", TEXT_PLAIN)]);
        let r = b"\x00\x01".as_slice().into_response();
        assert!(matches!(r.body, ResponseBody::Static(b) if b == b"\x00\x01"));
        assert_eq!(header_value(&r, "content-type"), Some(OCTET_STREAM));
        // Owned text is still a counted body.
        let r = String::from("owned").into_response();
        assert!(matches!(r.body, ResponseBody::Full(ref b) if &b[..] == b"owned"));
        assert_eq!(r.headers.len(), 1);
    }

    #[test]
    fn json_sets_type_and_body() {
        let r = Json(serde_json::json!({"message": "Hello, World!"})).into_response();
        assert_eq!(header_value(&r, "Content-Type"), Some(APPLICATION_JSON));
        match r.body {
            ResponseBody::Full(b) => assert_eq!(&b[..], br#"{"message":"Hello, World!"}"#),
            _ => panic!("not full"),
        }
    }

    #[test]
    fn result_err_becomes_problem() {
        let r: Result<&'static str, Error> = Err(Error::new(418));
        let r = r.into_response();
        assert_eq!(r.status, 418);
        assert_eq!(
            header_value(&r, "content-type"),
            Some(&b"application/problem+json"[..])
        );
    }

    #[test]
    fn redirect_refuses_header_injection() {
        let r = Redirect::temporary("/a\r\nset-cookie: x=1").into_response();
        assert_eq!(r.status, 500);
        assert!(header_value(&r, "location").is_none());
    }

    #[test]
    fn tuple_with_headers() {
        let r = (201, [("x-a", "1"), ("x-b", "2")], "made").into_response();
        assert_eq!(r.status, 201);
        assert_eq!(header_value(&r, "x-b"), Some(&b"2"[..]));
        assert_eq!(header_value(&r, "content-type"), Some(TEXT_PLAIN));
    }
}
