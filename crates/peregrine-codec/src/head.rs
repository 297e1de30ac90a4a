//! The types of a parsed request head ([`RequestHead`], its [`Span`]s and [`FieldSpan`]s, the
//! method, version and body framing), apart from the parser that fills them in, so that the
//! parser and the public entry points (`request.rs`) both import them and not each other.

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
    /// HTTP/3: never produced by this parser; set by the engine's HTTP/3 driver.
    Http3,
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

/// A parsed request head. All spans index into the buffer given to
/// [`parse_request_head`](crate::request::parse_request_head).
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
    /// `TE` lists `trailers` (HTTP/1.1 only): the client accepts a trailer section after a
    /// chunked response body (RFC 9110 §10.1.4, RFC 9112 §7.1.2).
    pub te_trailers: bool,
}

impl RequestHead {
    /// Whether the connection may stay open after this request's response, per RFC 9112 §9.3:
    /// HTTP/1.1 unless `close`; HTTP/1.0 only with `keep-alive`.
    pub fn keep_alive(&self) -> bool {
        match self.version {
            Version::Http11 | Version::Http2 | Version::Http3 => !self.connection.close,
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
