//! Trailer fields: the field section after a body (RFC 9110 §6.5). A [`Response`](crate::Response)
//! may carry them ([`Response::with_trailers`](crate::Response::with_trailers), or
//! [`Response::with_trailers_later`](crate::Response::with_trailers_later) when they are known
//! only once the body ended); a request's are read with [`Body::trailers`](crate::Body::trailers).
//!
//! How each protocol sends a response's trailers: HTTP/2 as a HEADERS frame with `END_STREAM`
//! after the DATA, HTTP/3 as a HEADERS frame after the DATA, HTTP/1.1 in the last chunk of a
//! chunked body, and only when the request said `TE: trailers` (RFC 9112 §7.1.2). Elsewhere
//! (HTTP/1.1 without `TE: trailers`, a body of known length over HTTP/1.1, HEAD, a status
//! without a body) they are dropped: a recipient may discard trailers anyway (RFC 9110 §6.5.1).

use peregrine_codec::response::{check_field, FieldError};
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

/// One field: name, value.
type Field = (Cow<'static, str>, Cow<'static, [u8]>);

/// A trailer section: fields in order, each checked when it was added (a response's) or by the
/// protocol's parser (a request's).
///
/// ```
/// use peregrine_server::Trailers;
/// let t = Trailers::new().with("grpc-status", "0")?.with("grpc-message", "ok")?;
/// assert_eq!(t.get("GRPC-STATUS"), Some(&b"0"[..]));
/// assert_eq!(t.len(), 2);
/// assert!(Trailers::new().with("content-length", "3").is_err());
/// # Ok::<(), peregrine_server::TrailerError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trailers {
    fields: Vec<Field>,
}

/// Why a field cannot be a trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrailerError {
    /// A field a trailer section may not carry (RFC 9110 §6.5.1): framing, routing, request
    /// modifiers, authentication, response control, content processing, connection-specific
    /// fields, or a pseudo-header.
    Forbidden(String),
    /// Not a valid field (the name is not a token, or the value has a forbidden byte).
    Invalid(String, FieldError),
}

impl std::fmt::Display for TrailerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrailerError::Forbidden(name) => write!(
                f,
                "{name:?} may not be sent as a trailer field (RFC 9110 §6.5.1)"
            ),
            TrailerError::Invalid(name, why) => write!(f, "trailer field {name:?}: {why}"),
        }
    }
}

impl std::error::Error for TrailerError {}

/// Fields a trailer section may not carry (RFC 9110 §6.5.1 and the sections it names), and
/// connection-specific ones (RFC 9113 §8.2.2, RFC 9114 §4.2), lowercase.
const FORBIDDEN: &[&str] = &[
    // Framing.
    "content-length",
    "transfer-encoding",
    "trailer",
    // Routing.
    "host",
    // Request modifiers: controls and conditionals.
    "cache-control",
    "expect",
    "max-forwards",
    "pragma",
    "range",
    "te",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    // Authentication, and cookies.
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "authentication-info",
    "proxy-authentication-info",
    "cookie",
    "set-cookie",
    // Response control data.
    "age",
    "date",
    "expires",
    "location",
    "retry-after",
    "vary",
    "warning",
    // Content processing.
    "content-encoding",
    "content-type",
    "content-range",
    // Connection-specific.
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
];

/// Checks that `name: value` may be sent as a trailer field.
fn check_trailer(name: &str, value: &[u8]) -> Result<(), TrailerError> {
    if name.starts_with(':') || FORBIDDEN.iter().any(|f| name.eq_ignore_ascii_case(f)) {
        return Err(TrailerError::Forbidden(name.to_owned()));
    }
    check_field(name.as_bytes(), value).map_err(|why| TrailerError::Invalid(name.to_owned(), why))
}

impl Trailers {
    /// An empty section.
    pub fn new() -> Self {
        Trailers::default()
    }

    /// Adds a field after any of the same name, refusing one a trailer section may not carry
    /// ([`TrailerError`]); nothing is added then.
    pub fn append(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl crate::FieldValue,
    ) -> Result<&mut Self, TrailerError> {
        let name = name.into();
        let value = value.into_field_value();
        check_trailer(&name, &value)?;
        self.fields.push((name, value));
        Ok(self)
    }

    /// [`Trailers::append`], builder style.
    pub fn with(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl crate::FieldValue,
    ) -> Result<Self, TrailerError> {
        self.append(name, value)?;
        Ok(self)
    }

    /// A received section: its fields were checked by the protocol's parser.
    pub(crate) fn received(fields: Vec<Field>) -> Self {
        Trailers { fields }
    }

    /// The first value of `name` (compared without case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| &**v)
    }

    /// The fields, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields.iter().map(|(n, v)| (&**n, &**v))
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The section as HTTP/2 and HTTP/3 fields (names lowercased by `http`).
    #[cfg(feature = "http2")]
    pub(crate) fn to_header_map(&self) -> http::HeaderMap {
        let mut map = http::HeaderMap::with_capacity(self.fields.len());
        for (name, value) in &self.fields {
            // Checked as tokens and field values when added: these conversions hold.
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_bytes(value),
            ) {
                map.append(n, v);
            }
        }
        map
    }

    /// A received HTTP/2 or HTTP/3 section (h2 and h3 have refused pseudo-headers in it).
    #[cfg(feature = "http2")]
    pub(crate) fn from_header_map(map: &http::HeaderMap) -> Self {
        let fields = map
            .iter()
            .map(|(n, v)| {
                (
                    Cow::Owned(n.as_str().to_owned()),
                    Cow::Owned(v.as_bytes().to_vec()),
                )
            })
            .collect();
        Trailers { fields }
    }
}

/// A response's trailers: given, or to be had once the body ended.
pub(crate) enum PendingTrailers {
    /// Known when the response was made.
    Ready(Trailers),
    /// Known at the end of the body: awaited after its last byte was handed on.
    Later(Pin<Box<dyn Future<Output = Trailers> + 'static>>),
}

impl PendingTrailers {
    /// The trailers, awaited if they were not known yet; `None` if the future panicked (then
    /// the response must not look complete: the caller cuts it short).
    pub(crate) async fn resolve(self) -> Option<Trailers> {
        match self {
            PendingTrailers::Ready(t) => Some(t),
            PendingTrailers::Later(mut fut) => {
                let polled = std::future::poll_fn(|cx| {
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        fut.as_mut().poll(cx)
                    })) {
                        Ok(p) => p.map(Some),
                        Err(_) => std::task::Poll::Ready(None),
                    }
                })
                .await;
                if polled.is_none() {
                    tracing::error!("the response's trailers future panicked");
                }
                polled
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_and_malformed_fields_are_refused_and_nothing_is_added() {
        let mut t = Trailers::new();
        for name in [
            "Content-Length",
            "transfer-encoding",
            "Host",
            "Authorization",
            "Set-Cookie",
            "TE",
            "Trailer",
            "Connection",
            "content-type",
            ":status",
        ] {
            assert_eq!(
                t.append(name, "1").err(),
                Some(TrailerError::Forbidden(name.to_owned())),
                "{name}"
            );
        }
        assert!(matches!(
            t.append("x y", "1"),
            Err(TrailerError::Invalid(_, FieldError::Name))
        ));
        assert!(matches!(
            t.append("x-ok", "a\r\nb"),
            Err(TrailerError::Invalid(_, FieldError::Value))
        ));
        assert!(t.is_empty());
        t.append("grpc-status", "0").unwrap();
        t.append("x-checksum", String::from("abc")).unwrap();
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [("grpc-status", &b"0"[..]), ("x-checksum", b"abc")]
        );
        let err = TrailerError::Forbidden("Host".into()).to_string();
        assert!(err.contains("Host") && err.contains("6.5.1"), "{err}");
    }

    #[test]
    fn later_trailers_are_awaited_and_a_panic_is_no_trailers() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let later = PendingTrailers::Later(Box::pin(async {
            Trailers::new().with("x-done", "1").unwrap()
        }));
        let got = rt.block_on(later.resolve()).unwrap();
        assert_eq!(got.get("X-Done"), Some(&b"1"[..]));
        let panics = PendingTrailers::Later(Box::pin(async { panic!("no trailers") }));
        assert!(rt.block_on(panics.resolve()).is_none());
    }
}
