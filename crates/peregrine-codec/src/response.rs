// Over 600 lines: the whole response side of the wire format in one place (status, fields, framing, chunked, keep-alive); half is tests.
//! The response side of the wire format: status lines and reason phrases (one table), header
//! fields checked as they are written, the framing a response gets (RFC 9112 §6, including
//! HEAD, 1xx, 204 and 304), the chunked encoder, and the `Connection` decision with the reason a
//! connection will close ([`KeepAlive`]). Pure functions over byte buffers, like the request
//! side: the engine calls them, and they are unit-tested here without a socket.
//!
//! API CONTRACT (fixed; the engine is written against it).
//!
//! ```
//! use peregrine_codec::response::{self, DateCache};
//!
//! let mut out = Vec::with_capacity(128);
//! out.extend_from_slice(response::status_line(200));
//! DateCache::write_date_header(&mut out);
//! response::write_content_length(&mut out, 13);
//! out.extend_from_slice(response::CONNECTION_CLOSE);
//! out.extend_from_slice(b"\r\nHello, World!");
//! assert!(out.starts_with(b"HTTP/1.1 200 OK\r\nDate: "));
//! ```

use crate::Version;
use std::cell::Cell;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// `Connection: close\r\n`, sent with every error response and when either side closes.
pub const CONNECTION_CLOSE: &[u8] = b"Connection: close\r\n";
/// `Connection: keep-alive\r\n`, sent to HTTP/1.0 clients that asked to keep the connection.
pub const CONNECTION_KEEP_ALIVE: &[u8] = b"Connection: keep-alive\r\n";
/// `Transfer-Encoding: chunked\r\n`.
pub const TRANSFER_ENCODING_CHUNKED: &[u8] = b"Transfer-Encoding: chunked\r\n";
/// The complete interim response sent before reading a body announced with
/// `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

macro_rules! statuses {
    ($($code:literal $reason:literal,)*) => {
        /// The canonical reason phrase for `code` (`"OK"`, `"Not Found"`...). Codes without a
        /// registered phrase get a generic one for their class (`"Client Error"`...).
        pub fn reason_phrase(code: u16) -> &'static str {
            match code {
                $($code => $reason,)*
                _ => class_reason(code),
            }
        }

        /// The status line `HTTP/1.1 <code> <reason>\r\n` for `code`, from a static table
        /// (unknown codes get a generic reason for their class). A status code has three digits;
        /// a `code` outside `100..=999` is a programming error and gets the 500 line.
        pub fn status_line(code: u16) -> &'static [u8] {
            match code {
                $($code => concat!("HTTP/1.1 ", stringify!($code), " ", $reason, "\r\n").as_bytes(),)*
                100..=999 => other_status_line(code),
                _ => b"HTTP/1.1 500 Internal Server Error\r\n",
            }
        }
    };
}

statuses! {
    100 "Continue",
    101 "Switching Protocols",
    103 "Early Hints",
    200 "OK",
    201 "Created",
    202 "Accepted",
    203 "Non-Authoritative Information",
    204 "No Content",
    205 "Reset Content",
    206 "Partial Content",
    300 "Multiple Choices",
    301 "Moved Permanently",
    302 "Found",
    303 "See Other",
    304 "Not Modified",
    307 "Temporary Redirect",
    308 "Permanent Redirect",
    400 "Bad Request",
    401 "Unauthorized",
    402 "Payment Required",
    403 "Forbidden",
    404 "Not Found",
    405 "Method Not Allowed",
    406 "Not Acceptable",
    407 "Proxy Authentication Required",
    408 "Request Timeout",
    409 "Conflict",
    410 "Gone",
    411 "Length Required",
    412 "Precondition Failed",
    413 "Content Too Large",
    414 "URI Too Long",
    415 "Unsupported Media Type",
    416 "Range Not Satisfiable",
    417 "Expectation Failed",
    421 "Misdirected Request",
    422 "Unprocessable Content",
    425 "Too Early",
    426 "Upgrade Required",
    428 "Precondition Required",
    429 "Too Many Requests",
    431 "Request Header Fields Too Large",
    451 "Unavailable For Legal Reasons",
    500 "Internal Server Error",
    501 "Not Implemented",
    502 "Bad Gateway",
    503 "Service Unavailable",
    504 "Gateway Timeout",
    505 "HTTP Version Not Supported",
    511 "Network Authentication Required",
}

fn class_reason(code: u16) -> &'static str {
    match code / 100 {
        1 => "Informational",
        2 => "Success",
        3 => "Redirection",
        4 => "Client Error",
        5 => "Server Error",
        _ => "Unknown",
    }
}

/// Status lines for three-digit codes without a registered phrase, built once on first use and
/// kept for the life of the process (at most 900 short lines).
fn other_status_line(code: u16) -> &'static [u8] {
    static TABLE: OnceLock<Vec<Box<[u8]>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (100u16..=999)
            .map(|c| {
                format!("HTTP/1.1 {c} {}\r\n", class_reason(c))
                    .into_bytes()
                    .into_boxed_slice()
            })
            .collect()
    });
    &table[usize::from(code - 100)]
}

/// The `Connection` line a response needs, per http1-rules.md G: `close` when the connection
/// will be closed after this response (always after an error, or when the client asked); for an
/// HTTP/1.0 client that asked for `keep-alive` and will get it, `keep-alive`; otherwise nothing
/// (persistence is the HTTP/1.1 default).
///
/// ```
/// use peregrine_codec::{response::{connection_header, CONNECTION_CLOSE}, Version};
/// assert_eq!(connection_header(Version::Http11, false), Some(CONNECTION_CLOSE));
/// assert_eq!(connection_header(Version::Http11, true), None);
/// ```
pub fn connection_header(version: Version, keep_open: bool) -> Option<&'static [u8]> {
    match (keep_open, version) {
        (false, _) => Some(CONNECTION_CLOSE),
        (true, Version::Http10) => Some(CONNECTION_KEEP_ALIVE),
        (true, Version::Http11 | Version::Http2) => None,
    }
}

/// Whether a handler may answer with `status` as a final response: 200 to 999. The 1xx are the
/// engine's (it sends `100 Continue` itself, and `101` only with a protocol switch, see
/// [`wire_status`]); anything else is not a status code.
#[inline]
pub const fn is_final_status(status: u16) -> bool {
    status >= 200 && status <= 999
}

/// The reason (and, with a newline, the body) of the 500 the engine sends in place of a
/// response it refuses to encode (see [`wire_status`]).
pub const INVALID_RESPONSE_REASON: &str = "invalid response from handler";

/// The status that reaches the wire for a handler's response: its own, or 500 when the engine
/// refuses to encode it, with [`INVALID_RESPONSE_REASON`] as body. This is the rule the engine
/// applies (`is_final_status`, then each field: [`is_engine_owned`] ones are dropped, others
/// must pass [`check_field`]); observers (access logs, metrics) call it to report what was
/// sent rather than what the handler returned.
///
/// `upgrade`: the response switches protocols (a 101 with an upgrade function, on an
/// HTTP/1.1 request whose body is complete); a 101 is sent then, and only then.
///
/// ```
/// use peregrine_codec::response::wire_status;
/// let ok: [(&[u8], &[u8]); 1] = [(b"Content-Type", b"text/plain")];
/// assert_eq!(wire_status(200, ok, false), 200);
/// assert_eq!(wire_status(101, ok, false), 500);
/// assert_eq!(wire_status(101, ok, true), 101);
/// let split: [(&[u8], &[u8]); 1] = [(b"X-A", b"1\r\nX-B: 2")];
/// assert_eq!(wire_status(200, split, false), 500);
/// // Fields the engine owns are dropped, not refused.
/// let owned: [(&[u8], &[u8]); 1] = [(b"Content-Length", b"\r\n")];
/// assert_eq!(wire_status(200, owned, false), 200);
/// ```
pub fn wire_status<'a>(
    status: u16,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    upgrade: bool,
) -> u16 {
    let status_ok = is_final_status(status) || (status == 101 && upgrade);
    let fields_ok = fields
        .into_iter()
        .all(|(name, value)| is_engine_owned(name) || check_field(name, value).is_ok());
    if status_ok && fields_ok {
        status
    } else {
        500
    }
}

/// Whether a response with this status must not carry a body (1xx, 204, 304).
pub fn status_forbids_body(code: u16) -> bool {
    (100..200).contains(&code) || code == 204 || code == 304
}

/// Appends `Content-Length: <n>\r\n` to `out` without allocating a temporary string.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Length of `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n` (IMF-fixdate is always 29 bytes).
const DATE_LINE_LEN: usize = 6 + 29 + 2;

/// A per-thread cache of the `Date: <IMF-fixdate>\r\n` header line, refreshed at most once a
/// second: [`DateCache::write_date_header`] never writes a value more than one second stale.
///
/// Each call reads the wall clock (a vDSO call, tens of nanoseconds) and compares whole seconds
/// with the cached line; the line is re-formatted only when the second changed. The cache lives
/// in a thread-local, so thread-per-core workers never share or lock it.
#[derive(Debug)]
pub struct DateCache {
    _private: (),
}

thread_local! {
    /// (unix second of the cached line, the line). Second `u64::MAX` means "never formatted".
    static DATE_LINE: Cell<(u64, [u8; DATE_LINE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LINE_LEN])) };
}

impl DateCache {
    /// Appends the current `Date: ...\r\n` line to `out`.
    pub fn write_date_header(out: &mut Vec<u8>) {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        DATE_LINE.with(|cell| {
            let (cached_secs, mut line) = cell.get();
            if cached_secs != secs {
                line = format_date_line(now);
                cell.set((secs, line));
            }
            out.extend_from_slice(&line);
        });
    }
}

fn format_date_line(now: SystemTime) -> [u8; DATE_LINE_LEN] {
    let mut line = [0u8; DATE_LINE_LEN];
    let mut w = &mut line[..];
    // Writing 37 bytes into a 37-byte array cannot fail: IMF-fixdate has a fixed width.
    let _ = write!(w, "Date: {}\r\n", httpdate::HttpDate::from(now));
    line
}

/// What a handler gave as a response body, as far as framing is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// A body of known length.
    Full(u64),
    /// A body produced piece by piece, length unknown in advance.
    Stream,
    /// A body produced piece by piece (a stream, a file region) whose length is announced in
    /// advance: framed by `Content-Length` like [`BodyKind::Full`], and the sender must hold
    /// it to exactly that many bytes (see [`SizedBody`]).
    Sized(u64),
}

/// Holds a [`BodyKind::Sized`] body to its announced length: the sender reports each piece
/// before writing it and the end of the source after the last one. A source that yields more
/// or fewer bytes than announced would leave the client reading the next response from the
/// wrong place, so either is an error and the connection must close (never kept alive).
///
/// ```
/// use peregrine_codec::response::{SizedBody, SizedBodyError};
///
/// let mut body = SizedBody::new(5);
/// assert_eq!(body.piece(3), Ok(()));
/// assert_eq!(body.remaining(), 2);
/// assert_eq!(body.piece(3), Err(SizedBodyError::TooLong { announced: 5 }));
/// let mut short = SizedBody::new(5);
/// short.piece(4).unwrap();
/// assert_eq!(short.end(), Err(SizedBodyError::TooShort { announced: 5, sent: 4 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizedBody {
    announced: u64,
    sent: u64,
}

/// How a [`SizedBody`] source broke its announced length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizedBodyError {
    /// A piece would take the body past the announced length (nothing of it may be sent).
    TooLong {
        /// The announced length.
        announced: u64,
    },
    /// The source ended before the announced length.
    TooShort {
        /// The announced length.
        announced: u64,
        /// Bytes the source gave.
        sent: u64,
    },
}

impl std::fmt::Display for SizedBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizedBodyError::TooLong { announced } => {
                write!(f, "body longer than its announced {announced} bytes")
            }
            SizedBodyError::TooShort { announced, sent } => {
                write!(
                    f,
                    "body ended after {sent} of its announced {announced} bytes"
                )
            }
        }
    }
}

impl std::error::Error for SizedBodyError {}

impl SizedBody {
    /// A body announced as `len` bytes (`Content-Length: len`).
    pub fn new(len: u64) -> Self {
        SizedBody {
            announced: len,
            sent: 0,
        }
    }

    /// Bytes still owed.
    pub fn remaining(&self) -> u64 {
        self.announced - self.sent
    }

    /// Accounts a piece of `len` bytes about to be sent; refuses it whole if it would exceed
    /// the announced length.
    pub fn piece(&mut self, len: usize) -> Result<(), SizedBodyError> {
        let len = len as u64;
        if len > self.remaining() {
            return Err(SizedBodyError::TooLong {
                announced: self.announced,
            });
        }
        self.sent += len;
        Ok(())
    }

    /// The source ended: fine only if every announced byte was given.
    pub fn end(&self) -> Result<(), SizedBodyError> {
        if self.sent == self.announced {
            Ok(())
        } else {
            Err(SizedBodyError::TooShort {
                announced: self.announced,
                sent: self.sent,
            })
        }
    }
}

/// The framing line a response head carries (RFC 9112 §6.1–§6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No framing line: a status that has no body (1xx, 204, 304), or an HTTP/1.0 stream
    /// delimited by closing the connection.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked` (HTTP/1.1 only).
    Chunked,
}

impl Framing {
    /// The framing of a response with this status and body to a request of this version.
    ///
    /// A status that forbids a body gets no framing line whatever the handler gave; a stream
    /// is chunked for HTTP/1.1 and delimited by close for HTTP/1.0 (which has no chunked
    /// coding; see [`Framing::delimits_by_close`]). A response to HEAD gets the framing the
    /// same response to GET would have (RFC 9110 §9.3.2); only its body is left out (see
    /// [`sends_body`]).
    ///
    /// ```
    /// use peregrine_codec::response::{BodyKind, Framing};
    /// use peregrine_codec::Version;
    ///
    /// assert_eq!(Framing::choose(200, BodyKind::Full(5), Version::Http11), Framing::Length(5));
    /// assert_eq!(Framing::choose(200, BodyKind::Empty, Version::Http11), Framing::Length(0));
    /// assert_eq!(Framing::choose(200, BodyKind::Stream, Version::Http11), Framing::Chunked);
    /// assert_eq!(Framing::choose(200, BodyKind::Stream, Version::Http10), Framing::None);
    /// assert_eq!(Framing::choose(200, BodyKind::Sized(9), Version::Http10), Framing::Length(9));
    /// assert_eq!(Framing::choose(304, BodyKind::Full(5), Version::Http11), Framing::None);
    /// ```
    #[inline]
    pub fn choose(status: u16, body: BodyKind, version: Version) -> Framing {
        if status_forbids_body(status) {
            return Framing::None;
        }
        match body {
            BodyKind::Empty => Framing::Length(0),
            BodyKind::Full(n) | BodyKind::Sized(n) => Framing::Length(n),
            BodyKind::Stream if version == Version::Http11 => Framing::Chunked,
            BodyKind::Stream => Framing::None,
        }
    }

    /// Whether the body of such a response ends only when the connection closes (a stream to
    /// an HTTP/1.0 client), so the connection cannot be kept.
    #[inline]
    pub fn delimits_by_close(status: u16, body: BodyKind, version: Version) -> bool {
        body == BodyKind::Stream && version == Version::Http10 && !status_forbids_body(status)
    }

    /// Appends the framing line (nothing for [`Framing::None`]).
    #[inline]
    pub fn write(self, out: &mut Vec<u8>) {
        match self {
            Framing::None => {}
            Framing::Length(n) => write_content_length(out, n),
            Framing::Chunked => out.extend_from_slice(TRANSFER_ENCODING_CHUNKED),
        }
    }
}

/// Whether the body bytes of a response are sent: never for HEAD, 1xx, 204 or 304.
#[inline]
pub fn sends_body(status: u16, head_request: bool) -> bool {
    !head_request && !status_forbids_body(status)
}

/// Which `Connection` line a response head carries (RFC 9112 §9.3, §9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionLine {
    /// None: persistence is the HTTP/1.1 default.
    Default,
    /// `Connection: close`: this is the last response on the connection.
    Close,
    /// `Connection: keep-alive`: an HTTP/1.0 client asked to keep the connection and will.
    KeepAlive,
}

impl ConnectionLine {
    /// The line's bytes (empty for [`ConnectionLine::Default`]).
    #[inline]
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            ConnectionLine::Default => b"",
            ConnectionLine::Close => CONNECTION_CLOSE,
            ConnectionLine::KeepAlive => CONNECTION_KEEP_ALIVE,
        }
    }
}

/// Appends the `Connection` and framing lines and the empty line that ends a head.
///
/// ```
/// use peregrine_codec::response::{finish_head, ConnectionLine, Framing};
/// let mut out = Vec::new();
/// finish_head(&mut out, ConnectionLine::Close, Framing::Length(2));
/// assert_eq!(out, b"Connection: close\r\nContent-Length: 2\r\n\r\n");
/// ```
#[inline]
pub fn finish_head(out: &mut Vec<u8>, conn: ConnectionLine, framing: Framing) {
    out.extend_from_slice(conn.as_bytes());
    framing.write(out);
    out.extend_from_slice(b"\r\n");
}

/// Why a connection will close after the current response. The first reason found is kept
/// (see [`KeepAlive::disable`]); it is what logs and tests can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent `Connection: close`.
    ClientAsked,
    /// An HTTP/1.0 client that did not ask for `keep-alive`.
    Http10,
    /// The connection reached the configured number of requests.
    RequestLimit,
    /// The server is shutting down gracefully.
    ShuttingDown,
    /// The handler's own fields ask for `Connection: close`.
    ResponseAsked,
    /// The request body did not arrive intact (limit passed, malformed, timed out, cut short).
    BodyFailed,
    /// Too much of the request body is left unread to skip it, or the client waits for
    /// `100 Continue` and may never send it.
    BodyUnread,
    /// The response body is delimited by closing the connection (a stream to HTTP/1.0).
    CloseDelimited,
    /// The request was refused before the handler ran (an error status from the parser or a
    /// limit), or the handler failed (panic, invalid response).
    Error,
}

/// Whether the connection stays open after the current exchange, and if not, why: the one
/// home of the keep-alive decision (in the spirit of hyper's `proto::h1` state).
///
/// A connection is [`KeepAlive::Idle`] between requests and [`KeepAlive::Busy`] while
/// answering one; any step of the exchange that finds a reason to close calls
/// [`KeepAlive::disable`], after which the state stays [`KeepAlive::Disabled`].
///
/// ```
/// use peregrine_codec::response::{CloseReason, ConnectionLine, KeepAlive};
/// use peregrine_codec::Version;
///
/// let mut ka = KeepAlive::Idle;
/// ka.busy();
/// assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Default);
/// ka.disable(CloseReason::RequestLimit);
/// ka.disable(CloseReason::ShuttingDown); // the first reason stays
/// assert_eq!(ka.close_reason(), Some(CloseReason::RequestLimit));
/// assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Close);
/// ka.idle(); // a disabled connection does not go idle
/// assert!(!ka.is_open());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Between requests: open, nothing pending.
    Idle,
    /// Answering a request; the connection stays open afterwards unless disabled.
    Busy,
    /// The connection closes after the current response, for this reason.
    Disabled(CloseReason),
}

impl KeepAlive {
    /// The state for a request with this version and `Connection` directive: busy, or
    /// disabled when the client asked to close or is HTTP/1.0 without `keep-alive`
    /// (RFC 9112 §9.3).
    #[inline]
    pub fn for_request(version: Version, connection: crate::ConnectionDirective) -> KeepAlive {
        if connection.close {
            KeepAlive::Disabled(CloseReason::ClientAsked)
        } else if version == Version::Http10 && !connection.keep_alive {
            KeepAlive::Disabled(CloseReason::Http10)
        } else {
            KeepAlive::Busy
        }
    }

    /// The connection will close after the current response, for `reason` (unless it was
    /// already going to, for an earlier reason, which is kept).
    #[inline]
    pub fn disable(&mut self, reason: CloseReason) {
        if !matches!(self, KeepAlive::Disabled(_)) {
            *self = KeepAlive::Disabled(reason);
        }
    }

    /// Starts answering a request (no effect once disabled).
    #[inline]
    pub fn busy(&mut self) {
        if *self == KeepAlive::Idle {
            *self = KeepAlive::Busy;
        }
    }

    /// The exchange is over and the connection stays open (no effect once disabled).
    #[inline]
    pub fn idle(&mut self) {
        if *self == KeepAlive::Busy {
            *self = KeepAlive::Idle;
        }
    }

    /// Whether the connection stays open after the current response.
    #[inline]
    pub fn is_open(self) -> bool {
        !matches!(self, KeepAlive::Disabled(_))
    }

    /// Why the connection will close, if it will.
    #[inline]
    pub fn close_reason(self) -> Option<CloseReason> {
        match self {
            KeepAlive::Disabled(r) => Some(r),
            _ => None,
        }
    }

    /// The `Connection` line the current response carries (RFC 9112 §9.3, §9.6): `close` when
    /// the connection will close; `keep-alive` for an HTTP/1.0 client that keeps it; none
    /// otherwise.
    #[inline]
    pub fn connection_line(self, version: Version) -> ConnectionLine {
        match (self.is_open(), version) {
            (false, _) => ConnectionLine::Close,
            (true, Version::Http10) => ConnectionLine::KeepAlive,
            (true, Version::Http11 | Version::Http2) => ConnectionLine::Default,
        }
    }
}

/// A header field a handler may not set, because the engine writes it from what it actually
/// does: `Date`, `Connection`, `Content-Length`, `Transfer-Encoding`. A handler's value could
/// contradict the body actually sent (RFC 9112 §6.3 request smuggling in reverse).
///
/// ```
/// use peregrine_codec::response::is_engine_owned;
/// assert!(is_engine_owned(b"content-length") && is_engine_owned(b"Connection"));
/// assert!(!is_engine_owned(b"Content-Type"));
/// ```
#[inline]
pub fn is_engine_owned(name: &[u8]) -> bool {
    // Length first: most fields are none of these.
    match name.len() {
        4 => name.eq_ignore_ascii_case(b"date"),
        10 => name.eq_ignore_ascii_case(b"connection"),
        14 => name.eq_ignore_ascii_case(b"content-length"),
        17 => name.eq_ignore_ascii_case(b"transfer-encoding"),
        _ => false,
    }
}

/// Whether `name` is `Server` (a handler's own `Server` field replaces the configured one).
#[inline]
pub fn is_server_field(name: &[u8]) -> bool {
    name.len() == 6 && name.eq_ignore_ascii_case(b"server")
}

/// Whether a response field `name: value` asks to close the connection (`Connection` with a
/// `close` token).
///
/// ```
/// use peregrine_codec::response::asks_close;
/// assert!(asks_close(b"Connection", b"upgrade, Close"));
/// assert!(!asks_close(b"Connection", b"keep-alive"));
/// assert!(!asks_close(b"X-Connection", b"close"));
/// ```
#[inline]
pub fn asks_close(name: &[u8], value: &[u8]) -> bool {
    name.len() == 10
        && name.eq_ignore_ascii_case(b"connection")
        && value
            .split(|&b| b == b',')
            .any(|t| crate::grammar::trim_ows(t).eq_ignore_ascii_case(b"close"))
}

/// A response field that cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldError {
    /// The name is empty or has a byte that is not a `tchar`.
    Name,
    /// The value has CR, LF or NUL (it would split or truncate the message).
    Value,
}

impl core::fmt::Display for FieldError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FieldError::Name => "invalid header field name",
            FieldError::Value => "CR, LF or NUL in a header field value",
        })
    }
}

impl std::error::Error for FieldError {}

/// Checks a response field: the name a token, the value free of CR, LF and NUL (other bytes
/// are passed on as given; they cannot change the message's structure).
#[inline]
pub fn check_field(name: &[u8], value: &[u8]) -> Result<(), FieldError> {
    if !crate::grammar::is_token(name) {
        return Err(FieldError::Name);
    }
    if crate::grammar::has_line_break_or_nul(value) {
        return Err(FieldError::Value);
    }
    Ok(())
}

/// Appends `name: value\r\n` after [`check_field`]; nothing is written when it fails.
///
/// ```
/// use peregrine_codec::response::{write_field, FieldError};
/// let mut out = Vec::new();
/// write_field(&mut out, b"Content-Type", b"text/plain").unwrap();
/// assert_eq!(out, b"Content-Type: text/plain\r\n");
/// assert_eq!(write_field(&mut out, b"X", b"a\r\nb"), Err(FieldError::Value));
/// assert_eq!(write_field(&mut out, b"X Y", b"a"), Err(FieldError::Name));
/// ```
#[inline]
pub fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) -> Result<(), FieldError> {
    check_field(name, value)?;
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// The last chunk and the empty trailer section that end a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Encoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1): each piece of data becomes
/// a chunk; [`ChunkedEncoder::end`] (or [`ChunkedEncoder::end_with_trailers`]) writes the last
/// chunk. Empty pieces are skipped, since an empty chunk would end the body.
///
/// The data may be written by the caller itself (from its own buffer, without a copy) between
/// [`ChunkedEncoder::chunk_head`] and [`ChunkedEncoder::chunk_tail`].
///
/// ```
/// use peregrine_codec::response::ChunkedEncoder;
/// let mut out = Vec::new();
/// let mut enc = ChunkedEncoder::new();
/// enc.chunk(&mut out, b"Hello, ");
/// enc.chunk(&mut out, b"");
/// enc.chunk(&mut out, b"World!");
/// enc.end_with_trailers(&mut out, &[(b"X-Checksum".as_slice(), b"42".as_slice())]).unwrap();
/// assert_eq!(out, b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\nX-Checksum: 42\r\n\r\n");
/// ```
#[derive(Debug, Default)]
pub struct ChunkedEncoder {
    ended: bool,
}

impl ChunkedEncoder {
    /// An encoder at the start of a body.
    pub fn new() -> Self {
        ChunkedEncoder { ended: false }
    }

    /// Appends a whole chunk holding `data` (nothing when `data` is empty).
    #[inline]
    pub fn chunk(&mut self, out: &mut Vec<u8>, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.chunk_head(out, data.len());
        out.extend_from_slice(data);
        self.chunk_tail(out);
    }

    /// Appends the size line of a chunk of `len` bytes (`len > 0`), in lowercase hex.
    #[inline]
    pub fn chunk_head(&mut self, out: &mut Vec<u8>, len: usize) {
        debug_assert!(len > 0 && !self.ended, "an empty chunk would end the body");
        let mut buf = [0u8; 16];
        let mut i = buf.len();
        let mut n = len;
        loop {
            i -= 1;
            buf[i] = b"0123456789abcdef"[n & 15];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[i..]);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the CRLF that follows a chunk's data.
    #[inline]
    pub fn chunk_tail(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\r\n");
    }

    /// Ends the body: the last chunk and an empty trailer section.
    #[inline]
    pub fn end(&mut self, out: &mut Vec<u8>) {
        debug_assert!(!self.ended, "a chunked body ends once");
        self.ended = true;
        out.extend_from_slice(LAST_CHUNK);
    }

    /// Ends the body with trailer fields (RFC 9112 §7.1.2). Each field is checked as by
    /// [`check_field`]; fields that frame or route a message (and may not be trailers, RFC 9110
    /// §6.5.1) are refused as [`FieldError::Name`]. On an error nothing is written and the body
    /// is not ended.
    pub fn end_with_trailers(
        &mut self,
        out: &mut Vec<u8>,
        trailers: &[(&[u8], &[u8])],
    ) -> Result<(), FieldError> {
        for (name, value) in trailers {
            check_field(name, value)?;
            if is_engine_owned(name)
                || name.eq_ignore_ascii_case(b"host")
                || name.eq_ignore_ascii_case(b"trailer")
            {
                return Err(FieldError::Name);
            }
        }
        debug_assert!(!self.ended, "a chunked body ends once");
        self.ended = true;
        out.extend_from_slice(b"0\r\n");
        for (name, value) in trailers {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Whether the last chunk was written.
    pub fn is_ended(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_status_lines() {
        assert_eq!(status_line(200), b"HTTP/1.1 200 OK\r\n");
        assert_eq!(status_line(404), b"HTTP/1.1 404 Not Found\r\n");
        assert_eq!(
            status_line(431),
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        );
        assert_eq!(status_line(299), b"HTTP/1.1 299 Success\r\n");
        assert_eq!(status_line(499), b"HTTP/1.1 499 Client Error\r\n");
        assert_eq!(status_line(42), b"HTTP/1.1 500 Internal Server Error\r\n");
        assert_eq!(reason_phrase(505), "HTTP Version Not Supported");
        assert_eq!(reason_phrase(599), "Server Error");
        for code in 100..=999u16 {
            let line = status_line(code);
            let expect = format!("HTTP/1.1 {code} {}\r\n", reason_phrase(code));
            assert_eq!(line, expect.as_bytes());
        }
    }

    #[test]
    fn content_length_formatting() {
        let mut out = Vec::new();
        write_content_length(&mut out, 0);
        write_content_length(&mut out, u64::MAX);
        assert_eq!(
            out,
            b"Content-Length: 0\r\nContent-Length: 18446744073709551615\r\n"
        );
    }

    #[test]
    fn connection_lines() {
        assert_eq!(
            connection_header(Version::Http10, true),
            Some(CONNECTION_KEEP_ALIVE)
        );
        assert_eq!(
            connection_header(Version::Http10, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(
            connection_header(Version::Http11, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(connection_header(Version::Http11, true), None);
    }

    #[test]
    fn body_forbidden_statuses() {
        assert!(status_forbids_body(100) && status_forbids_body(204) && status_forbids_body(304));
        assert!(!status_forbids_body(200) && !status_forbids_body(404));
    }

    #[test]
    fn date_line_is_refreshed_when_the_second_changes() {
        let read = || {
            let mut out = Vec::new();
            DateCache::write_date_header(&mut out);
            httpdate::parse_http_date(std::str::from_utf8(&out[6..out.len() - 2]).unwrap()).unwrap()
        };
        let first = read();
        // Sleeping past the next whole second must give a later Date (the cache is keyed by the
        // second, not refreshed on a timer).
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(read() > first);
        // Each thread has its own cache, and a fresh thread formats its own line.
        let other = std::thread::spawn(read).join().unwrap();
        assert!(other > first);
    }

    #[test]
    fn date_line_is_well_formed_and_current() {
        let mut out = Vec::new();
        DateCache::write_date_header(&mut out);
        assert_eq!(out.len(), DATE_LINE_LEN);
        assert!(out.starts_with(b"Date: ") && out.ends_with(b" GMT\r\n"));
        let text = std::str::from_utf8(&out[6..out.len() - 2]).unwrap();
        let when = httpdate::parse_http_date(text).unwrap();
        let now = SystemTime::now();
        // The cached line is at most one second behind the clock, and never ahead of it.
        let behind = now.duration_since(when).unwrap();
        assert!(behind.as_secs() <= 1, "date is {behind:?} behind");
        // A second call in the same thread gives the same or a later second.
        let mut again = Vec::new();
        DateCache::write_date_header(&mut again);
        let text2 = std::str::from_utf8(&again[6..again.len() - 2]).unwrap();
        assert!(httpdate::parse_http_date(text2).unwrap() >= when);
    }

    #[test]
    fn every_status_gets_its_framing_for_every_body_and_version() {
        let bodies = [
            BodyKind::Empty,
            BodyKind::Full(7),
            BodyKind::Stream,
            BodyKind::Sized(9),
        ];
        for code in 100..=999u16 {
            let bodiless = (100..200).contains(&code) || code == 204 || code == 304;
            assert_eq!(status_forbids_body(code), bodiless, "{code}");
            for version in [Version::Http10, Version::Http11] {
                for body in bodies {
                    let f = Framing::choose(code, body, version);
                    let want = match body {
                        _ if bodiless => Framing::None,
                        BodyKind::Empty => Framing::Length(0),
                        BodyKind::Full(n) | BodyKind::Sized(n) => Framing::Length(n),
                        BodyKind::Stream if version == Version::Http11 => Framing::Chunked,
                        BodyKind::Stream => Framing::None,
                    };
                    assert_eq!(f, want, "{code} {body:?} {version:?}");
                    let by_close = Framing::delimits_by_close(code, body, version);
                    assert_eq!(
                        by_close,
                        !bodiless && body == BodyKind::Stream && version == Version::Http10
                    );
                }
                for head in [false, true] {
                    assert_eq!(sends_body(code, head), !head && !bodiless);
                }
            }
        }
    }

    #[test]
    fn sized_body_is_framed_by_length_even_for_http10_and_head() {
        for version in [Version::Http10, Version::Http11] {
            let f = Framing::choose(200, BodyKind::Sized(20 << 20), version);
            assert_eq!(f, Framing::Length(20 << 20));
            // Never delimited by close: an HTTP/1.0 keep-alive client can keep the connection.
            assert!(!Framing::delimits_by_close(
                200,
                BodyKind::Sized(5),
                version
            ));
            let mut out = status_line(200).to_vec();
            finish_head(&mut out, ConnectionLine::Default, f);
            assert!(out.ends_with(b"Content-Length: 20971520\r\n\r\n"));
        }
        assert_eq!(
            Framing::choose(304, BodyKind::Sized(5), Version::Http11),
            Framing::None
        );
    }

    #[test]
    fn sized_body_accepts_exactly_its_length() {
        let mut b = SizedBody::new(10);
        assert_eq!(
            b.end(),
            Err(SizedBodyError::TooShort {
                announced: 10,
                sent: 0
            })
        );
        b.piece(0).unwrap();
        b.piece(4).unwrap();
        b.piece(6).unwrap();
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.end(), Ok(()));
        // One byte more is refused, and the refused piece is not counted.
        assert_eq!(b.piece(1), Err(SizedBodyError::TooLong { announced: 10 }));
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.end(), Ok(()));
        // A piece crossing the end is refused whole.
        let mut b = SizedBody::new(10);
        b.piece(8).unwrap();
        assert!(b.piece(3).is_err());
        assert_eq!(b.remaining(), 2);
        assert_eq!(
            b.end(),
            Err(SizedBodyError::TooShort {
                announced: 10,
                sent: 8
            })
        );
        // An empty body is complete at once.
        assert_eq!(SizedBody::new(0).end(), Ok(()));
        assert!(SizedBody::new(0).piece(1).is_err());
        assert!(b
            .end()
            .unwrap_err()
            .to_string()
            .contains("8 of its announced 10"));
    }

    #[test]
    fn head_204_and_304_heads_are_encoded_without_a_body() {
        // HEAD: the framing GET would get, no body bytes.
        let mut out = status_line(200).to_vec();
        let f = Framing::choose(200, BodyKind::Full(13), Version::Http11);
        finish_head(&mut out, ConnectionLine::Default, f);
        assert!(!sends_body(200, true));
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n");
        for code in [204, 304] {
            let mut out = status_line(code).to_vec();
            let f = Framing::choose(code, BodyKind::Full(13), Version::Http11);
            finish_head(&mut out, ConnectionLine::Close, f);
            assert!(!sends_body(code, false));
            let want = format!(
                "HTTP/1.1 {code} {}\r\nConnection: close\r\n\r\n",
                reason_phrase(code)
            );
            assert_eq!(out, want.as_bytes());
        }
        let mut out = Vec::new();
        finish_head(&mut out, ConnectionLine::KeepAlive, Framing::Chunked);
        assert_eq!(
            out,
            b"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
    }

    #[test]
    fn keep_alive_records_the_first_close_reason() {
        use crate::ConnectionDirective;
        let d = |close, keep_alive| ConnectionDirective {
            close,
            keep_alive,
            upgrade: false,
        };
        assert_eq!(
            KeepAlive::for_request(Version::Http11, d(false, false)),
            KeepAlive::Busy
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http11, d(true, true)),
            KeepAlive::Disabled(CloseReason::ClientAsked)
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http10, d(false, false)),
            KeepAlive::Disabled(CloseReason::Http10)
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http10, d(false, true)),
            KeepAlive::Busy
        );
        let reasons = [
            CloseReason::ClientAsked,
            CloseReason::Http10,
            CloseReason::RequestLimit,
            CloseReason::ShuttingDown,
            CloseReason::ResponseAsked,
            CloseReason::BodyFailed,
            CloseReason::BodyUnread,
            CloseReason::CloseDelimited,
            CloseReason::Error,
        ];
        for first in reasons {
            for second in reasons {
                let mut ka = KeepAlive::Busy;
                assert!(ka.is_open() && ka.close_reason().is_none());
                ka.disable(first);
                ka.disable(second);
                ka.idle();
                ka.busy();
                assert_eq!(ka, KeepAlive::Disabled(first));
                assert_eq!(ka.close_reason(), Some(first));
                for v in [Version::Http10, Version::Http11] {
                    assert_eq!(ka.connection_line(v), ConnectionLine::Close);
                }
            }
        }
        let mut ka = KeepAlive::Idle;
        ka.busy();
        assert_eq!(ka, KeepAlive::Busy);
        assert_eq!(
            ka.connection_line(Version::Http10),
            ConnectionLine::KeepAlive
        );
        assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Default);
        ka.idle();
        assert_eq!(ka, KeepAlive::Idle);
        // The codec's older helper agrees with the state.
        for open in [false, true] {
            for v in [Version::Http10, Version::Http11] {
                let ka = if open {
                    KeepAlive::Busy
                } else {
                    KeepAlive::Disabled(CloseReason::Error)
                };
                assert_eq!(
                    connection_header(v, open).unwrap_or(b""),
                    ka.connection_line(v).as_bytes()
                );
            }
        }
    }

    #[test]
    fn fields_are_checked_before_they_are_written() {
        let mut out = Vec::new();
        assert_eq!(write_field(&mut out, b"", b"x"), Err(FieldError::Name));
        assert_eq!(write_field(&mut out, b"a:b", b"x"), Err(FieldError::Name));
        for bad in [&b"a\rb"[..], b"a\nb", b"a\0b", b"\r\n"] {
            assert_eq!(write_field(&mut out, b"X", bad), Err(FieldError::Value));
        }
        assert!(out.is_empty());
        write_field(&mut out, b"X-Obs", b"caf\xc3\xa9 \t\x01").unwrap();
        assert_eq!(out, b"X-Obs: caf\xc3\xa9 \t\x01\r\n");
        for name in ["Date", "connection", "CONTENT-LENGTH", "Transfer-Encoding"] {
            assert!(is_engine_owned(name.as_bytes()), "{name}");
        }
        for name in ["Dates", "Server", "Content-Type", "Keep-Alive"] {
            assert!(!is_engine_owned(name.as_bytes()), "{name}");
        }
        assert!(is_server_field(b"SERVER") && !is_server_field(b"Servers"));
        assert!(asks_close(b"connection", b" close "));
        assert!(!asks_close(b"connection", b"closed"));
    }

    #[test]
    fn chunk_sizes_are_lowercase_hex_and_trailers_are_checked() {
        for n in [1usize, 9, 10, 15, 16, 255, 4096, 0xdead_beef, usize::MAX] {
            let mut out = Vec::new();
            ChunkedEncoder::new().chunk_head(&mut out, n);
            assert_eq!(out, format!("{n:x}\r\n").as_bytes());
        }
        let mut enc = ChunkedEncoder::new();
        let mut out = Vec::new();
        enc.chunk(&mut out, b"abc");
        assert!(!enc.is_ended());
        for bad in [
            (&b"Content-Length"[..], &b"3"[..]),
            (b"Transfer-Encoding", b"chunked"),
            (b"Host", b"x"),
            (b"Trailer", b"x"),
            (b"X Y", b"1"),
            (b"X", b"1\r\n"),
        ] {
            assert!(enc.end_with_trailers(&mut out, &[bad]).is_err(), "{bad:?}");
            assert!(!enc.is_ended());
        }
        assert_eq!(out, b"3\r\nabc\r\n");
        enc.end(&mut out);
        assert!(enc.is_ended());
        assert_eq!(out, b"3\r\nabc\r\n0\r\n\r\n");
        // Decoded by the codec's own decoder, the encoder's output is the data it was given.
        let mut enc = ChunkedEncoder::new();
        let mut wire = Vec::new();
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(777) {
            enc.chunk(&mut wire, piece);
        }
        enc.end_with_trailers(&mut wire, &[(b"X-Sum", b"1")])
            .unwrap();
        let mut dec = crate::ChunkedDecoder::new();
        let limits = crate::Limits::default();
        let (mut at, mut got) = (0, Vec::new());
        loop {
            match dec.decode(&wire[at..], &limits).unwrap() {
                crate::ChunkedStep::Data {
                    consumed,
                    data_start,
                    data_len,
                } => {
                    got.extend_from_slice(&wire[at + data_start..at + data_start + data_len]);
                    at += consumed;
                }
                crate::ChunkedStep::Done { consumed } => {
                    at += consumed;
                    break;
                }
                crate::ChunkedStep::NeedMore { .. } => panic!("complete body"),
            }
        }
        assert_eq!((got, at), (data, wire.len()));
    }

    #[test]
    fn the_wire_status_is_the_engines_rule() {
        let none: [(&[u8], &[u8]); 0] = [];
        for (status, upgrade, wire) in [
            (200, false, 200),
            (204, false, 204),
            (999, false, 999),
            (100, false, 500),
            (101, false, 500),
            (199, false, 500),
            (101, true, 101),
            (102, true, 500),
            (0, false, 500),
            (1000, false, 500),
        ] {
            assert_eq!(
                wire_status(status, none, upgrade),
                wire,
                "{status} {upgrade}"
            );
        }
        let fields = |n: &'static [u8], v: &'static [u8]| [(n, v)];
        assert_eq!(wire_status(200, fields(b"x a", b"1"), false), 500);
        assert_eq!(wire_status(200, fields(b"", b"1"), false), 500);
        assert_eq!(wire_status(200, fields(b"x-a", b"1\0"), false), 500);
        assert_eq!(wire_status(101, fields(b"x-a", b"1\n"), true), 500);
        assert_eq!(
            wire_status(200, fields(b"Transfer-Encoding", b"\n"), false),
            200
        );
        assert_eq!(wire_status(200, fields(b"x-a", b"caf\xc3\xa9"), false), 200);
    }
}
