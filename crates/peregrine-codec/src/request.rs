//! Zero-copy request-head parsing.
//!
//! API CONTRACT (fixed; the engine is written against it): `parse_request_head` takes the bytes
//! read so far, the limits, and a caller-provided fixed-capacity table of [`FieldSpan`]s. It
//! returns [`Parsed::Incomplete`] when more bytes are needed, [`Parsed::Complete`] with a
//! [`RequestHead`] whose spans index into `buf`, or a [`ParseError`] carrying the status to answer.

pub use crate::scan::Isa;
use crate::{parse, Limits, ParseError};

/// A byte range `start..start+len` inside the buffer that was parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Offset of the first byte.
    pub start: u32,
    /// Number of bytes.
    pub len: u32,
}

impl Span {
    /// The bytes this span covers in `buf` (the buffer that was parsed, or a copy that starts at
    /// the same offset).
    #[inline]
    pub fn slice<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start as usize..(self.start + self.len) as usize]
    }
    /// `true` if the span covers no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One header field: name and value (value with surrounding OWS removed), as spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldSpan {
    /// Field name exactly as received (case preserved).
    pub name: Span,
    /// Field value, leading/trailing SP/HTAB stripped, byte-exact otherwise.
    pub value: Span,
}

/// Request method. Known methods are recognised without allocation; any other valid token is
/// [`Method::Other`] (its bytes are in [`RequestHead::method`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// OPTIONS
    Options,
    /// PATCH
    Patch,
    /// CONNECT
    Connect,
    /// TRACE
    Trace,
    /// Any other token method.
    Other,
}

impl Method {
    /// The method a request line's token names ([`Method::Other`] for any other token); the
    /// token's syntax is not checked here.
    ///
    /// ```
    /// use peregrine_codec::request::Method;
    /// assert_eq!(Method::from_token(b"GET"), Method::Get);
    /// assert_eq!(Method::from_token(b"get"), Method::Other); // methods are case-sensitive
    /// ```
    #[inline(always)]
    pub fn from_token(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"PATCH" => Method::Patch,
            b"CONNECT" => Method::Connect,
            b"TRACE" => Method::Trace,
            _ => Method::Other,
        }
    }
}

/// HTTP version of the request (only 1.0 and 1.1 are accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
    /// HTTP/2: never produced by this parser; set by the engine's HTTP/2 driver so that a
    /// handler can tell (`req.version()`).
    Http2,
}

/// How the request body is delimited (RFC 9112 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the `Connection` header asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnectionDirective {
    /// `close` was listed.
    pub close: bool,
    /// `keep-alive` was listed.
    pub keep_alive: bool,
    /// `upgrade` was listed.
    pub upgrade: bool,
}

/// The `Expect` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expectation {
    /// No `Expect` header.
    None,
    /// `Expect: 100-continue` (case-insensitive).
    Continue,
    /// Any other expectation: the server answers 417.
    Unknown,
}

/// A parsed request head. All spans index into the buffer given to [`parse_request_head`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead {
    /// Length of the head including the final CRLFCRLF (and any tolerated leading empty lines):
    /// the body, or the next request, starts at this offset.
    pub head_len: usize,
    /// Method bytes.
    pub method: Span,
    /// Method, recognised.
    pub method_kind: Method,
    /// Whole request-target as received.
    pub target: Span,
    /// Path part of the target (for absolute-form, the path after the authority; `*` for
    /// asterisk-form; the authority for authority-form). Still percent-encoded.
    pub path: Span,
    /// Query after `?`, without the `?`, if any. Still percent-encoded.
    pub query: Option<Span>,
    /// Protocol version.
    pub version: Version,
    /// Number of entries of the caller's field table that were filled.
    pub field_count: usize,
    /// Effective authority: from an absolute-form target if present, else the Host value.
    pub authority: Option<Span>,
    /// Body framing decided from Content-Length / Transfer-Encoding.
    pub framing: BodyFraming,
    /// `Connection` header tokens.
    pub connection: ConnectionDirective,
    /// `Expect` header.
    pub expect: Expectation,
}

impl RequestHead {
    /// Whether the connection may stay open after this request's response, per RFC 9112 §9.3:
    /// HTTP/1.1 unless `close`; HTTP/1.0 only with `keep-alive`.
    pub fn keep_alive(&self) -> bool {
        match self.version {
            Version::Http11 | Version::Http2 => !self.connection.close,
            Version::Http10 => self.connection.keep_alive && !self.connection.close,
        }
    }
}

/// Outcome of a successful parse call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A whole head was parsed.
    Complete(RequestHead),
    /// The head is not complete yet: read more bytes and call again with the longer buffer.
    Incomplete,
}

/// Parses one request head from the start of `buf`.
///
/// `fields` is a fixed-capacity table supplied by the caller (no allocation happens here); at
/// most `min(fields.len(), limits.max_fields)` fields are accepted, more → 431.
///
/// Errors are final: the caller answers `err.status` with `Connection: close` and closes.
/// An incomplete head that already breaks a limit or a rule is reported as an error as soon as
/// that is certain, not only when the head completes.
///
/// The scanning path (AVX2, SSE or scalar) is chosen once per process from the CPU; all paths
/// give identical results.
///
/// ```
/// use peregrine_codec::{parse_request_head, BodyFraming, FieldSpan, Limits, Parsed};
///
/// let buf = b"POST /items?id=7 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\n{}";
/// let mut fields = [FieldSpan::default(); 32];
/// let Ok(Parsed::Complete(head)) = parse_request_head(buf, &Limits::default(), &mut fields) else {
///     panic!("a complete, valid head");
/// };
/// assert_eq!(head.path.slice(buf), b"/items");
/// assert_eq!(head.query.unwrap().slice(buf), b"id=7");
/// assert_eq!(head.authority.unwrap().slice(buf), b"example.com");
/// assert_eq!(head.framing, BodyFraming::Length(2));
/// assert_eq!(&buf[head.head_len..], b"{}");
/// assert_eq!(fields[1].name.slice(buf), b"Content-Length");
///
/// // Not enough bytes yet, and a head that breaks a rule:
/// assert_eq!(parse_request_head(&buf[..20], &Limits::default(), &mut fields), Ok(Parsed::Incomplete));
/// let err = parse_request_head(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", &Limits::default(), &mut fields);
/// assert_eq!(err.unwrap_err().status, 400);
/// ```
// Inlined into the caller so that the result is written in the caller's own frame, where it is
// read (see `parse::parse_fast_then`); only the dispatch is inlined, the parse is one call.
#[inline]
pub fn parse_request_head(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    let mut out = Ok(Parsed::Incomplete);
    parse_request_head_into(buf, limits, fields, &mut out);
    out
}

/// [`parse_request_head`], writing the result into `out` (whatever it held before).
///
/// The head is written field by field as it is found. A caller that keeps the result where it
/// will live (in a request object, say) and reads it there avoids copying it as a whole right
/// after the parse, a copy whose wide loads of just-written fields stall the processor.
///
/// ```
/// use peregrine_codec::{parse_request_head_into, FieldSpan, Limits, Parsed};
///
/// let mut fields = [FieldSpan::default(); 8];
/// let mut out = Ok(Parsed::Incomplete);
/// parse_request_head_into(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &Limits::default(), &mut fields, &mut out);
/// let Ok(Parsed::Complete(head)) = &out else { panic!("a complete head") };
/// assert_eq!(head.field_count, 1);
/// ```
#[inline]
pub fn parse_request_head_into(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // The usual path in one compare (the `match` below costs a few more per request).
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if Isa::best_is_avx2() {
        // SAFETY: `BEST` holds `Avx2` only once `Isa::best` found the CPU supports it.
        return unsafe { parse::parse_avx2(buf, limits, fields, out) };
    }
    match Isa::best() {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `Isa::best` only returns a path the CPU supports.
        Isa::Avx2 => unsafe { parse::parse_avx2(buf, limits, fields, out) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above.
        Isa::Sse42 => unsafe { parse::parse_sse42(buf, limits, fields, out) },
        _ => parse::parse_scalar(buf, limits, fields, out),
    }
}

/// [`parse_request_head`] on a chosen scanning path. Every path gives exactly the same result;
/// this exists so that tests, fuzzers and benchmarks can compare them. A path the CPU cannot run
/// falls back to the scalar one.
#[doc(hidden)]
#[inline]
pub fn parse_request_head_with(
    isa: Isa,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    let mut out = Ok(Parsed::Incomplete);
    match isa {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for AVX2.
        Isa::Avx2 if isa.is_available() => unsafe {
            parse::parse_avx2(buf, limits, fields, &mut out)
        },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for SSSE3 and SSE4.2.
        Isa::Sse42 if isa.is_available() => unsafe {
            parse::parse_sse42(buf, limits, fields, &mut out)
        },
        _ => parse::parse_scalar(buf, limits, fields, &mut out),
    }
    out
}

/// [`parse_request_head_with`] without the fast path: the general parser alone, which decides
/// every rule. The fast path must agree with it on every input it accepts and decline every
/// other; this exists so that tests and fuzzers can check that.
#[doc(hidden)]
pub fn parse_request_head_general_with(
    isa: Isa,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    match isa {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for AVX2.
        Isa::Avx2 if isa.is_available() => unsafe {
            parse::parse_avx2_general(buf, limits, fields)
        },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for SSSE3 and SSE4.2.
        Isa::Sse42 if isa.is_available() => unsafe {
            parse::parse_sse42_general(buf, limits, fields)
        },
        _ => parse::parse_scalar_general(buf, limits, fields),
    }
}
