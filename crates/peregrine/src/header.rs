//! Response header values from strings, bytes and typed values, checked before they are sent.

use bytes::Bytes;
use std::borrow::Cow;
use std::time::SystemTime;

/// A response header value: `&'static str`, `String`, bytes (`&'static [u8]`, `Vec<u8>`,
/// `Cow<'static, [u8]>`, `Bytes`), integers, or a `SystemTime` (sent as an HTTP date).
///
/// Values are checked when the response is built: a value containing CR, LF, NUL or another
/// control character (except tab) would split or corrupt the header block, so the response is
/// replaced by a logged 500 instead of being sent.
///
/// ```
/// use peregrine::{IntoResponse, StatusCode};
/// let id = 42u64;
/// let location = format!("/users/{id}");
/// let r = (StatusCode::CREATED, [("location", location)], "made").into_response();
/// assert_eq!(r.status, 201);
/// let r = (200, [("x-count", 3u32)], "ok").into_response();
/// assert!(r.headers.iter().any(|(n, v)| n == "x-count" && &v[..] == b"3"));
/// ```
pub trait IntoHeaderValue {
    /// The value's bytes (not yet checked).
    fn into_header_value(self) -> Cow<'static, [u8]>;
}

impl IntoHeaderValue for &'static str {
    #[inline]
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }
}
impl IntoHeaderValue for String {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self.into_bytes())
    }
}
impl IntoHeaderValue for &'static [u8] {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(self)
    }
}
impl<const N: usize> IntoHeaderValue for &'static [u8; N] {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(&self[..])
    }
}
impl IntoHeaderValue for Vec<u8> {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self)
    }
}
impl IntoHeaderValue for Cow<'static, [u8]> {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        self
    }
}
impl IntoHeaderValue for Bytes {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self.to_vec())
    }
}
/// An HTTP date (IMF-fixdate), as `Last-Modified`, `Expires` or `Date` want.
impl IntoHeaderValue for SystemTime {
    fn into_header_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(httpdate::fmt_http_date(self).into_bytes())
    }
}

macro_rules! integer_values {
    ($($t:ty),*) => {$(
        impl IntoHeaderValue for $t {
            fn into_header_value(self) -> Cow<'static, [u8]> {
                Cow::Owned(itoa::Buffer::new().format(self).as_bytes().to_vec())
            }
        }
    )*};
}
integer_values!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

/// A header name: a token (RFC 9110 §5.1), so it cannot carry a separator or a line break
/// (the codec's rule, the one the engine applies on HTTP/1.1 and HTTP/2).
pub(crate) fn valid_name(name: &str) -> bool {
    peregrine_server::codec::grammar::is_token(name.as_bytes())
}

/// A field value (RFC 9110 §5.5): visible characters, obs-text, spaces and tabs; no CR, LF,
/// NUL or other controls (the codec's rule, the one the engine applies).
pub(crate) fn valid_value(v: &[u8]) -> bool {
    peregrine_server::codec::grammar::is_field_value(v)
}

/// Response headers of mixed value types, for the middle of a response tuple
/// (an array needs one value type for every entry).
///
/// ```
/// use peregrine::{Headers, IntoResponse, StatusCode};
/// let r = (
///     StatusCode::CREATED,
///     Headers::new().add("location", format!("/todos/{}", 7)).add("x-version", 3u64),
///     "made",
/// )
///     .into_response();
/// assert_eq!(r.status, 201);
/// ```
#[derive(Default, Debug, Clone)]
pub struct Headers(pub(crate) Vec<(Cow<'static, str>, Cow<'static, [u8]>)>);

impl Headers {
    /// No headers.
    ///
    /// ```
    /// use peregrine::{Headers, IntoResponse};
    ///
    /// let r = (Headers::new(), "no extra headers").into_response();
    /// assert_eq!(r.headers.len(), 1); // only the body's content-type
    /// ```
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds `name: value` (checked when the response is built: a malformed one, which would
    /// split or corrupt the header block, turns the answer into a logged 500).
    ///
    /// ```
    /// use peregrine::{get, App, Headers, Request, StatusCode};
    /// use std::time::{Duration, SystemTime};
    ///
    /// async fn report(_req: Request) -> (StatusCode, Headers, &'static str) {
    ///     let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
    ///     let headers = Headers::new()
    ///         .add("last-modified", modified) // an HTTP date
    ///         .add("x-rows", 3u32);
    ///     (StatusCode::OK, headers, "a,b\n1,2\n3,4\n")
    /// }
    ///
    /// let client = App::new()
    ///     .route("/report.csv", get(report))
    ///     .route("/bad", get(|_r: Request| async { (Headers::new().add("x-bad", "line\r\nbreak"), "x") }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/report.csv").send().await;
    /// assert_eq!(res.header("last-modified"), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
    /// assert_eq!(res.header("x-rows"), Some("3"));
    /// assert_eq!(client.get("/bad").send().await.status(), 500);
    /// # });
    /// ```
    pub fn add(mut self, name: impl Into<Cow<'static, str>>, value: impl IntoHeaderValue) -> Self {
        self.0.push((name.into(), value.into_header_value()));
        self
    }
}

/// Headers as response tuples accept them: an array or a `Vec` of `(name, value)` pairs, or
/// [`Headers`].
///
/// ```
/// use peregrine::{get, App, Request, StatusCode};
///
/// let client = App::new()
///     .route("/a", get(|_r: Request| async { ([("cache-control", "no-store")], "array") }))
///     .route("/v", get(|_r: Request| async {
///         let links: Vec<(&'static str, String)> = (1..=2).map(|p| ("link", format!("</page/{p}>"))).collect();
///         (StatusCode::OK, links, "vec")
///     }))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/a").send().await.header("cache-control"), Some("no-store"));
/// assert_eq!(client.get("/v").send().await.header_all("link"), ["</page/1>", "</page/2>"]);
/// # });
/// ```
pub trait IntoHeaders {
    /// The pairs, not yet checked.
    fn into_headers(self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, [u8]>)>;
}

impl<K, V, const N: usize> IntoHeaders for [(K, V); N]
where
    K: Into<Cow<'static, str>>,
    V: IntoHeaderValue,
{
    fn into_headers(self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, [u8]>)> {
        self.into_iter()
            .map(|(k, v)| (k.into(), v.into_header_value()))
    }
}

impl<K, V> IntoHeaders for Vec<(K, V)>
where
    K: Into<Cow<'static, str>>,
    V: IntoHeaderValue,
{
    fn into_headers(self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, [u8]>)> {
        self.into_iter()
            .map(|(k, v)| (k.into(), v.into_header_value()))
    }
}

impl IntoHeaders for Headers {
    fn into_headers(self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, [u8]>)> {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_checked() {
        assert!(valid_name("x-request-id"));
        assert!(!valid_name("bad name"));
        assert!(!valid_name("a:b"));
        assert!(!valid_name(""));
        assert!(valid_value(b"text/plain; charset=utf-8\t\xff"));
        assert!(!valid_value(b"a\r\nset-cookie: x=1"));
        assert!(!valid_value(b"a\0b"));
        assert!(!valid_value(b"a\x7fb"));
    }

    #[test]
    fn typed_values() {
        assert_eq!(&*42u16.into_header_value(), b"42");
        assert_eq!(&*(-7i64).into_header_value(), b"-7");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(784111777);
        assert_eq!(
            &*t.into_header_value(),
            b"Sun, 06 Nov 1994 08:49:37 GMT".as_slice()
        );
    }
}
