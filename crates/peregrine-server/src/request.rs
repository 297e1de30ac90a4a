//! An incoming request: the parsed head kept beside a copy of its bytes, the body, the peer.

use crate::Body;
use bytes::Bytes;
use peregrine_codec::{
    BodyFraming, FieldSpan, Limits, Method, ParseError, Parsed, RequestHead, Span, Version,
};
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;

/// Everything a request carries. Boxed and recycled per thread (see [`SPARE_PARTS`]), so that
/// a [`Request`] is one pointer: it is moved into the handler's future and that future into the
/// connection's, and every move of a request carried inline (a few hundred bytes, or even the
/// 40 of its body) was a copy of data written just before, which stalls the processor
/// (store-to-load forwarding) on the hot path of every request.
struct Parts {
    /// A copy of the head's bytes (request line and fields, up to the empty line). Copying
    /// ~50-500 bytes into a buffer that keeps its capacity is cheaper than handing out a
    /// reference-counted slice of the read buffer (`BytesMut::split_to` + `freeze` + an atomic
    /// decrement on drop, measured ~70 instructions per request), and it leaves the read buffer
    /// uniquely owned, so it never needs to be reallocated while requests are alive.
    bytes: Vec<u8>,
    /// The codec's result, written here by the parse itself (see [`Pending::parse`]) and read
    /// in place: always `Ok(Parsed::Complete(_))` once the request exists.
    parsed: Result<Parsed, ParseError>,
    fields: Vec<FieldSpan>,
    peer: SocketAddr,
    body: Body,
}

/// Recycled [`Parts`] whose buffers are at most this large (bigger heads are rare; their
/// buffers are freed instead of pinned).
const SPARE_BYTES_MAX: usize = 4096;
const SPARE_FIELDS_MAX: usize = 64;

thread_local! {
    /// One emptied [`Parts`] kept for the next request on this thread. A worker answers its
    /// requests one after the other and the handler's future (holding the request) is dropped
    /// before the next one is built, so one spare serves the common case; requests kept alive
    /// longer simply allocate. A `Cell` (take/set) costs less than a pool behind a `RefCell`.
    ///
    /// In `ManuallyDrop` (as the spare field lists of `response.rs`): a thread-local without
    /// drop glue needs no destructor registration, so each of its two accesses per request is
    /// an address computation, not a check of the registration state. The price: a thread that
    /// exits leaves its spare allocated (workers exit with the server).
    static SPARE_PARTS: Cell<Option<ManuallyDrop<Box<Parts>>>> = const { Cell::new(None) };
}

impl Parts {
    fn empty() -> Box<Self> {
        Box::new(Parts {
            bytes: Vec::new(),
            parsed: Ok(Parsed::Incomplete),
            fields: Vec::new(),
            peer: SocketAddr::from(([0, 0, 0, 0], 0)),
            body: Body::empty(),
        })
    }

    /// The head. Only complete requests are built, so the other arm is never taken.
    #[inline]
    fn head(&self) -> &RequestHead {
        match &self.parsed {
            Ok(Parsed::Complete(h)) => h,
            _ => unreachable!("a request is built from a complete head"),
        }
    }

    /// Empties `self` and keeps it as this thread's spare, unless its buffers grew large.
    #[inline(always)]
    fn recycle(mut self: Box<Self>) {
        if self.bytes.capacity() > SPARE_BYTES_MAX || self.fields.capacity() > SPARE_FIELDS_MAX {
            return;
        }
        self.bytes.clear();
        self.fields.clear();
        // The body may hold the connection: it goes now, not when the spare is reused.
        self.body = Body::empty();
        // Normally the slot is empty (taken by `Pending::take`); a spare already there goes.
        SPARE_PARTS.with(|s| {
            if let Some(old) = s.replace(Some(ManuallyDrop::new(self))) {
                drop(ManuallyDrop::into_inner(old));
            }
        });
    }
}

/// A request in the making: its (recycled) box is taken before the head is parsed, so that the
/// codec writes the head where the request keeps it and nothing copies it afterwards.
pub(crate) struct Pending(Box<Parts>);

impl Pending {
    pub(crate) fn take() -> Self {
        Pending(
            SPARE_PARTS
                .with(Cell::take)
                .map(ManuallyDrop::into_inner)
                .unwrap_or_else(Parts::empty),
        )
    }

    /// Parses the head at the start of `buf` into this request (see
    /// [`peregrine_codec::parse_request_head_into`]).
    #[inline]
    pub(crate) fn parse(
        &mut self,
        buf: &[u8],
        limits: &Limits,
        table: &mut [FieldSpan],
    ) -> &Result<Parsed, ParseError> {
        peregrine_codec::parse_request_head_into(buf, limits, table, &mut self.0.parsed);
        &self.0.parsed
    }

    /// The request, once [`Pending::parse`] found a complete head in `buf`: its bytes and its
    /// `fields` (from the parse's table) are copied in. Its body is empty: the box already
    /// holds an empty one (every box starts with one, and [`Parts::recycle`] puts one back), so
    /// nothing is written for a request without a body (a 40-byte copy and the drop check of
    /// the old body, per request); one with a body gets it through [`Request::body_mut`]. (Passed
    /// in here as an `Option<Body>`, the `None` went through the stack and was read back in a
    /// wider load than it was written with: a store-forwarding stall per request.)
    pub(crate) fn finish(mut self, buf: &[u8], fields: &[FieldSpan], peer: SocketAddr) -> Request {
        let p = &mut *self.0;
        let head_len = p.head().head_len;
        p.bytes.extend_from_slice(&buf[..head_len]);
        p.fields.extend_from_slice(fields);
        p.peer = peer;
        debug_assert!(
            p.body.is_empty_kind(),
            "a recycled request box kept its body"
        );
        Request {
            parts: ManuallyDrop::new(self.0),
        }
    }

    /// Gives the box back unused (no complete head).
    pub(crate) fn give_back(self) {
        self.0.recycle();
    }
}

/// What [`Request::from_parts`] needs besides the head's text.
#[cfg_attr(not(feature = "http2"), allow(dead_code))]
pub(crate) struct PartsInfo {
    pub(crate) version: Version,
    /// `Length(n)` with a declared length, `Chunked` for "unknown length, more to come".
    pub(crate) framing: BodyFraming,
    pub(crate) peer: SocketAddr,
    pub(crate) body: Body,
}

/// A request as handed to a [`crate::Service`]. The head is parsed and validated already; the
/// body is read on demand through [`Request::body_mut`].
///
/// Every accessor returns a slice of the head's bytes (no per-field copies or allocations). A
/// `Request` is not `Send`: its body reads from a connection owned by one worker thread.
pub struct Request {
    /// Taken only in `drop`.
    parts: ManuallyDrop<Box<Parts>>,
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: `parts` is never used again: this is the request's destructor, and no other
        // code takes it out.
        let parts = unsafe { ManuallyDrop::take(&mut self.parts) };
        parts.recycle();
    }
}

impl Request {
    /// A request in the making (see [`Pending`]).
    pub(crate) fn pending() -> Pending {
        Pending::take()
    }

    /// Parses a complete request from `raw` without a connection: the head must be complete
    /// and the body, if any, present in full after it (Content-Length or chunked). Meant for
    /// tests of services and frameworks.
    ///
    /// ```
    /// use peregrine_server::Request;
    /// let req = Request::from_bytes(
    ///     b"POST /echo?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi",
    ///     "127.0.0.1:1234".parse().unwrap(),
    /// )
    /// .unwrap();
    /// assert_eq!(req.path(), "/echo");
    /// assert_eq!(req.query(), Some("x=1"));
    /// assert_eq!(req.content_length(), Some(2));
    /// ```
    pub fn from_bytes(raw: &[u8], peer: SocketAddr) -> Result<Request, ParseError> {
        let limits = peregrine_codec::Limits::default();
        let mut table = vec![FieldSpan::default(); limits.max_fields];
        let head = match peregrine_codec::parse_request_head(raw, &limits, &mut table)? {
            peregrine_codec::Parsed::Complete(h) => h,
            peregrine_codec::Parsed::Incomplete => {
                return Err(ParseError::new(400, "incomplete request head"))
            }
        };
        let rest = &raw[head.head_len..];
        let body = match head.framing {
            BodyFraming::None => Body::empty(),
            BodyFraming::Length(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if rest.len() < n {
                    return Err(ParseError::new(400, "body shorter than Content-Length"));
                }
                Body::from_bytes(Bytes::copy_from_slice(&rest[..n]))
            }
            BodyFraming::Chunked => {
                let mut dec = peregrine_codec::ChunkedDecoder::new();
                let mut input = rest;
                let mut data = Vec::new();
                loop {
                    match dec.decode(input, &limits)? {
                        peregrine_codec::ChunkedStep::Data {
                            consumed,
                            data_start,
                            data_len,
                        } => {
                            data.extend_from_slice(&input[data_start..data_start + data_len]);
                            input = &input[consumed..];
                        }
                        peregrine_codec::ChunkedStep::Done { .. } => break,
                        peregrine_codec::ChunkedStep::NeedMore { .. } => {
                            return Err(ParseError::new(400, "incomplete chunked body"))
                        }
                    }
                }
                Body::from_bytes(Bytes::from(data))
            }
        };
        let mut pending = Pending::take();
        pending.0.parsed = Ok(Parsed::Complete(head));
        let mut req = pending.finish(raw, &table[..head.field_count], peer);
        *req.body_mut() = body;
        Ok(req)
    }

    /// A request from already-separated parts (HTTP/2: pseudo-header fields and a field list
    /// validated by the h2 crate), stored in the same layout as a parsed HTTP/1.1 head, so
    /// every accessor works unchanged. `target` is the path and query (`:path`). `None` when
    /// the method or the target is not ASCII, which an HTTP/1.1 request line cannot carry
    /// either (the accessors rely on it; the caller answers 400).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(crate) fn from_parts<'a>(
        method: &[u8],
        target: &[u8],
        authority: Option<&[u8]>,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        parts: PartsInfo,
    ) -> Option<Request> {
        if !method.is_ascii() || !target.is_ascii() {
            return None;
        }
        let mut pending = Pending::take();
        let p = &mut *pending.0;
        let push = |bytes: &mut Vec<u8>, data: &[u8]| -> Span {
            let start = bytes.len() as u32;
            bytes.extend_from_slice(data);
            Span {
                start,
                len: data.len() as u32,
            }
        };
        let method_span = push(&mut p.bytes, method);
        p.bytes.push(b' ');
        let target_span = push(&mut p.bytes, target);
        let (path, query) = match target.iter().position(|&b| b == b'?') {
            Some(q) => (
                Span {
                    start: target_span.start,
                    len: q as u32,
                },
                Some(Span {
                    start: target_span.start + q as u32 + 1,
                    len: target_span.len - q as u32 - 1,
                }),
            ),
            None => (target_span, None),
        };
        p.bytes.extend_from_slice(b"\r\n");
        let mut authority_span = authority.map(|a| {
            let s = push(&mut p.bytes, a);
            p.bytes.extend_from_slice(b"\r\n");
            s
        });
        for (name, value) in fields {
            let name = push(&mut p.bytes, name);
            p.bytes.extend_from_slice(b": ");
            let value = push(&mut p.bytes, value);
            p.bytes.extend_from_slice(b"\r\n");
            if authority_span.is_none() && name.slice(&p.bytes).eq_ignore_ascii_case(b"host") {
                authority_span = Some(value);
            }
            p.fields.push(FieldSpan { name, value });
        }
        let head = RequestHead {
            head_len: p.bytes.len(),
            method: method_span,
            method_kind: Method::from_token(method),
            target: target_span,
            path,
            query,
            version: parts.version,
            field_count: p.fields.len(),
            authority: authority_span,
            framing: parts.framing,
            connection: Default::default(),
            expect: peregrine_codec::Expectation::None,
            te_trailers: false,
        };
        p.parsed = Ok(Parsed::Complete(head));
        p.peer = parts.peer;
        p.body = parts.body;
        Some(Request {
            parts: ManuallyDrop::new(pending.0),
        })
    }

    /// Field names and the authority as text (checked: over HTTP/2 a Host value may carry
    /// obs-text).
    #[inline]
    fn ascii(&self, span: Span) -> &str {
        // The codec only accepts ASCII in field names and Host, so this never falls back for
        // HTTP/1.1. `is_ascii` (a word at a time) is several times cheaper than `from_utf8` on
        // these short strings, and it is the only check the conversion needs.
        let b = span.slice(&self.parts.bytes);
        if b.is_ascii() {
            // SAFETY: every ASCII byte sequence is valid UTF-8, and `b` was just checked to be
            // ASCII.
            unsafe { std::str::from_utf8_unchecked(b) }
        } else {
            ""
        }
    }

    /// A part of the request line (method, target, path, query) as text, without a check:
    /// both constructors store only ASCII there. The codec accepts only `tchar` methods and
    /// visible-ASCII targets (its property tests check it); [`Request::from_parts`] refuses
    /// anything else. The check this saves was about 20 instructions per `path()` call.
    #[inline]
    fn line_text(&self, span: Span) -> &str {
        let b = span.slice(&self.parts.bytes);
        debug_assert!(b.is_ascii(), "a request line part is not ASCII");
        // SAFETY: ASCII (see above) is valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(b) }
    }

    /// Method as sent (`"GET"`).
    pub fn method(&self) -> &str {
        self.line_text(self.parts.head().method)
    }
    /// Method, recognised.
    pub fn method_kind(&self) -> Method {
        self.parts.head().method_kind
    }
    /// The whole request-target as sent.
    pub fn target(&self) -> &str {
        self.line_text(self.parts.head().target)
    }
    /// Path part of the target, still percent-encoded (validated ASCII).
    pub fn path(&self) -> &str {
        self.line_text(self.parts.head().path)
    }
    /// Query string without `?`, still percent-encoded, if any.
    pub fn query(&self) -> Option<&str> {
        self.parts.head().query.map(|q| self.line_text(q))
    }
    /// Protocol version.
    pub fn version(&self) -> Version {
        self.parts.head().version
    }
    /// First value of header `name` (ASCII case-insensitive), byte-exact.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.parts
            .fields
            .iter()
            .find(|f| {
                f.name
                    .slice(&self.parts.bytes)
                    .eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|f| f.value.slice(&self.parts.bytes))
    }
    /// All header fields in order received: (name as sent, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.parts
            .fields
            .iter()
            .map(move |f| (self.ascii(f.name), f.value.slice(&self.parts.bytes)))
    }
    /// Effective authority (absolute-form target, else Host), if any.
    pub fn authority(&self) -> Option<&str> {
        // Host values may carry obs-text in theory; the codec rejects those for Host, so this
        // is ASCII. An empty Host is reported as no authority.
        self.parts
            .head()
            .authority
            .filter(|a| !a.is_empty())
            .map(|a| self.ascii(a))
    }
    /// Remote address of the connection.
    pub fn peer_addr(&self) -> SocketAddr {
        self.parts.peer
    }
    /// Declared body length (`Content-Length`), `None` for chunked; `Some(0)` without body.
    pub fn content_length(&self) -> Option<u64> {
        match self.parts.head().framing {
            BodyFraming::None => Some(0),
            BodyFraming::Length(n) => Some(n),
            BodyFraming::Chunked => None,
        }
    }
    /// The body (its size limit: [`Body::limit`]).
    pub fn body(&self) -> &Body {
        &self.parts.body
    }
    /// The body, to read from.
    pub fn body_mut(&mut self) -> &mut Body {
        &mut self.parts.body
    }
    /// Takes the body out, leaving an empty one.
    pub fn take_body(&mut self) -> Body {
        std::mem::replace(&mut self.parts.body, Body::empty())
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version())
            .field("peer", &self.parts.peer)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> PartsInfo {
        PartsInfo {
            version: Version::Http2,
            framing: BodyFraming::None,
            peer: "127.0.0.1:1".parse().unwrap(),
            body: Body::empty(),
        }
    }

    #[test]
    fn from_parts_builds_the_request_line_accessors() {
        let fields = [(&b"host"[..], &b"example.com"[..])];
        let req = Request::from_parts(b"GET", b"/a/b?x=1", None, fields.into_iter(), parts())
            .expect("ASCII parts");
        assert_eq!(req.method(), "GET");
        assert_eq!(req.target(), "/a/b?x=1");
        assert_eq!(req.path(), "/a/b");
        assert_eq!(req.query(), Some("x=1"));
        assert_eq!(req.authority(), Some("example.com"));
    }

    #[test]
    fn from_parts_refuses_a_non_ascii_method_or_target() {
        // What the accessors hand out unchecked must be ASCII, as over HTTP/1.1.
        let none = std::iter::empty();
        assert!(
            Request::from_parts(b"GET", "/caf\u{e9}".as_bytes(), None, none, parts()).is_none()
        );
        let none = std::iter::empty();
        assert!(Request::from_parts("G\u{c9}T".as_bytes(), b"/", None, none, parts()).is_none());
    }
}
