//! HTTP status codes as named constants.

use std::fmt;

/// An HTTP status code (100-999), with named constants for the common ones.
///
/// A bare status is a response: below 400 it is an empty response with that status; 400 and
/// above it is the problem document for that status (as [`Error::new`](crate::Error::new)).
/// `(StatusCode, body)` and `(StatusCode, headers, body)` set the status of any response.
///
/// ```
/// use peregrine::{IntoResponse, Json, StatusCode};
/// assert_eq!(StatusCode::NO_CONTENT.into_response().status, 204);
/// assert_eq!(StatusCode::NOT_FOUND.into_response().status, 404); // problem+json body
/// let r = (StatusCode::CREATED, Json(serde_json::json!({"id": 1}))).into_response();
/// assert_eq!(r.status, 201);
/// assert_eq!(StatusCode::CREATED.as_u16(), 201);
/// assert_eq!(StatusCode::CREATED.canonical_reason(), Some("Created"));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatusCode(u16);

macro_rules! status_codes {
    ($($(#[$doc:meta])* $name:ident = $code:expr, $reason:expr;)*) => {
        impl StatusCode {
            $(
                $(#[$doc])*
                #[doc = concat!("`", stringify!($code), " ", $reason, "`")]
                pub const $name: StatusCode = StatusCode($code);
            )*

            /// The reason phrase registered for this code, if it is one of the named ones.
            ///
            /// ```
            /// use peregrine::StatusCode;
            /// assert_eq!(StatusCode::TOO_MANY_REQUESTS.canonical_reason(), Some("Too Many Requests"));
            /// assert_eq!(StatusCode::from_u16(599).unwrap().canonical_reason(), None);
            /// ```
            pub fn canonical_reason(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some($reason),)*
                    _ => None,
                }
            }
        }
    };
}

status_codes! {
    CONTINUE = 100, "Continue";
    SWITCHING_PROTOCOLS = 101, "Switching Protocols";
    OK = 200, "OK";
    CREATED = 201, "Created";
    ACCEPTED = 202, "Accepted";
    NON_AUTHORITATIVE_INFORMATION = 203, "Non-Authoritative Information";
    NO_CONTENT = 204, "No Content";
    RESET_CONTENT = 205, "Reset Content";
    PARTIAL_CONTENT = 206, "Partial Content";
    MULTI_STATUS = 207, "Multi-Status";
    MULTIPLE_CHOICES = 300, "Multiple Choices";
    MOVED_PERMANENTLY = 301, "Moved Permanently";
    FOUND = 302, "Found";
    SEE_OTHER = 303, "See Other";
    NOT_MODIFIED = 304, "Not Modified";
    TEMPORARY_REDIRECT = 307, "Temporary Redirect";
    PERMANENT_REDIRECT = 308, "Permanent Redirect";
    BAD_REQUEST = 400, "Bad Request";
    UNAUTHORIZED = 401, "Unauthorized";
    PAYMENT_REQUIRED = 402, "Payment Required";
    FORBIDDEN = 403, "Forbidden";
    NOT_FOUND = 404, "Not Found";
    METHOD_NOT_ALLOWED = 405, "Method Not Allowed";
    NOT_ACCEPTABLE = 406, "Not Acceptable";
    PROXY_AUTHENTICATION_REQUIRED = 407, "Proxy Authentication Required";
    REQUEST_TIMEOUT = 408, "Request Timeout";
    CONFLICT = 409, "Conflict";
    GONE = 410, "Gone";
    LENGTH_REQUIRED = 411, "Length Required";
    PRECONDITION_FAILED = 412, "Precondition Failed";
    /// (RFC 9110's name; `PAYLOAD_TOO_LARGE` is the same code.)
    CONTENT_TOO_LARGE = 413, "Content Too Large";
    URI_TOO_LONG = 414, "URI Too Long";
    UNSUPPORTED_MEDIA_TYPE = 415, "Unsupported Media Type";
    RANGE_NOT_SATISFIABLE = 416, "Range Not Satisfiable";
    EXPECTATION_FAILED = 417, "Expectation Failed";
    IM_A_TEAPOT = 418, "I'm a teapot";
    MISDIRECTED_REQUEST = 421, "Misdirected Request";
    /// (RFC 9110's name; `UNPROCESSABLE_ENTITY` is the same code.)
    UNPROCESSABLE_CONTENT = 422, "Unprocessable Content";
    LOCKED = 423, "Locked";
    TOO_EARLY = 425, "Too Early";
    UPGRADE_REQUIRED = 426, "Upgrade Required";
    PRECONDITION_REQUIRED = 428, "Precondition Required";
    TOO_MANY_REQUESTS = 429, "Too Many Requests";
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431, "Request Header Fields Too Large";
    UNAVAILABLE_FOR_LEGAL_REASONS = 451, "Unavailable For Legal Reasons";
    INTERNAL_SERVER_ERROR = 500, "Internal Server Error";
    NOT_IMPLEMENTED = 501, "Not Implemented";
    BAD_GATEWAY = 502, "Bad Gateway";
    SERVICE_UNAVAILABLE = 503, "Service Unavailable";
    GATEWAY_TIMEOUT = 504, "Gateway Timeout";
    HTTP_VERSION_NOT_SUPPORTED = 505, "HTTP Version Not Supported";
}

impl StatusCode {
    /// `413`, under its older name (as in `http::StatusCode`).
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert_eq!(StatusCode::PAYLOAD_TOO_LARGE, StatusCode::CONTENT_TOO_LARGE);
    /// assert_eq!(StatusCode::PAYLOAD_TOO_LARGE.as_u16(), 413);
    /// ```
    pub const PAYLOAD_TOO_LARGE: StatusCode = StatusCode::CONTENT_TOO_LARGE;
    /// `422`, under its older name (as in `http::StatusCode`).
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert_eq!(StatusCode::UNPROCESSABLE_ENTITY, StatusCode::UNPROCESSABLE_CONTENT);
    /// assert_eq!(StatusCode::UNPROCESSABLE_ENTITY.as_u16(), 422);
    /// ```
    pub const UNPROCESSABLE_ENTITY: StatusCode = StatusCode::UNPROCESSABLE_CONTENT;

    /// A status from its number; `None` outside 100-999.
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert_eq!(StatusCode::from_u16(404), Some(StatusCode::NOT_FOUND));
    /// assert_eq!(StatusCode::from_u16(42), None);
    /// ```
    pub const fn from_u16(code: u16) -> Option<StatusCode> {
        if code >= 100 && code <= 999 {
            Some(StatusCode(code))
        } else {
            None
        }
    }
    /// The number.
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert_eq!(StatusCode::ACCEPTED.as_u16(), 202);
    /// assert_eq!(u16::from(StatusCode::ACCEPTED), 202);
    /// ```
    pub const fn as_u16(self) -> u16 {
        self.0
    }
    /// 1xx.
    ///
    /// ```
    /// assert!(peregrine::StatusCode::CONTINUE.is_informational());
    /// ```
    pub const fn is_informational(self) -> bool {
        self.0 >= 100 && self.0 < 200
    }
    /// 2xx.
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert!(StatusCode::NO_CONTENT.is_success());
    /// assert!(!StatusCode::NOT_MODIFIED.is_success());
    /// ```
    pub const fn is_success(self) -> bool {
        self.0 >= 200 && self.0 < 300
    }
    /// 3xx.
    ///
    /// ```
    /// assert!(peregrine::StatusCode::SEE_OTHER.is_redirection());
    /// ```
    pub const fn is_redirection(self) -> bool {
        self.0 >= 300 && self.0 < 400
    }
    /// 4xx: the client's mistake (what the problem document's `detail` is shown for).
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert!(StatusCode::UNPROCESSABLE_CONTENT.is_client_error());
    /// assert!(!StatusCode::SERVICE_UNAVAILABLE.is_client_error());
    /// ```
    pub const fn is_client_error(self) -> bool {
        self.0 >= 400 && self.0 < 500
    }
    /// 5xx: the server's failure (details logged, never sent).
    ///
    /// ```
    /// use peregrine::StatusCode;
    /// assert!(StatusCode::BAD_GATEWAY.is_server_error());
    /// assert!(!StatusCode::NOT_FOUND.is_server_error());
    /// ```
    pub const fn is_server_error(self) -> bool {
        self.0 >= 500 && self.0 < 600
    }
}

impl From<StatusCode> for u16 {
    fn from(s: StatusCode) -> u16 {
        s.0
    }
}

impl PartialEq<u16> for StatusCode {
    fn eq(&self, other: &u16) -> bool {
        self.0 == *other
    }
}

impl PartialEq<StatusCode> for u16 {
    fn eq(&self, other: &StatusCode) -> bool {
        *self == other.0
    }
}

impl fmt::Debug for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.canonical_reason() {
            Some(r) => write!(f, "{} {r}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}
