//! An incoming request: the parsed head kept beside its bytes (zero-copy), the body, the peer.

use crate::Body;
use bytes::Bytes;
use peregrine_codec::{BodyFraming, FieldSpan, Method, ParseError, RequestHead, Span, Version};
use smallvec::SmallVec;
use std::net::SocketAddr;

/// Header fields kept inline in the request; more spill to the heap. Eight covers load
/// generators, curl and most API clients without an allocation while keeping the request small
/// (it is moved into the handler's future).
pub(crate) type FieldTable = SmallVec<[FieldSpan; 8]>;

/// A request as handed to a [`crate::Service`]. The head is parsed and validated already; the
/// body is read on demand through [`Request::body_mut`].
///
/// The head bytes are shared with the connection's read buffer (no copy); every accessor
/// returns a slice of them. A `Request` is not `Send`: its body reads from a connection owned by
/// one worker thread.
pub struct Request {
    bytes: Bytes,
    head: RequestHead,
    fields: FieldTable,
    peer: SocketAddr,
    body: Body,
}

impl Request {
    pub(crate) fn from_parts(
        bytes: Bytes,
        head: RequestHead,
        fields: FieldTable,
        peer: SocketAddr,
        body: Body,
    ) -> Self {
        Request {
            bytes,
            head,
            fields,
            peer,
            body,
        }
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
        let fields: FieldTable = table[..head.field_count].iter().copied().collect();
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
        Ok(Request {
            bytes: Bytes::copy_from_slice(&raw[..head.head_len]),
            head,
            fields,
            peer,
            body,
        })
    }

    #[inline]
    fn ascii(&self, span: Span) -> &str {
        // The codec only accepts ASCII in methods, targets and field names, so this never falls
        // back. `is_ascii` (a word at a time) is several times cheaper than `from_utf8` on
        // these short strings, and it is the only check the conversion needs.
        let b = span.slice(&self.bytes);
        if b.is_ascii() {
            // SAFETY: every ASCII byte sequence is valid UTF-8, and `b` was just checked to be
            // ASCII.
            unsafe { std::str::from_utf8_unchecked(b) }
        } else {
            ""
        }
    }

    /// Method as sent (`"GET"`).
    pub fn method(&self) -> &str {
        self.ascii(self.head.method)
    }
    /// Method, recognised.
    pub fn method_kind(&self) -> Method {
        self.head.method_kind
    }
    /// The whole request-target as sent.
    pub fn target(&self) -> &str {
        self.ascii(self.head.target)
    }
    /// Path part of the target, still percent-encoded (validated ASCII).
    pub fn path(&self) -> &str {
        self.ascii(self.head.path)
    }
    /// Query string without `?`, still percent-encoded, if any.
    pub fn query(&self) -> Option<&str> {
        self.head.query.map(|q| self.ascii(q))
    }
    /// Protocol version.
    pub fn version(&self) -> Version {
        self.head.version
    }
    /// First value of header `name` (ASCII case-insensitive), byte-exact.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| {
                f.name
                    .slice(&self.bytes)
                    .eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|f| f.value.slice(&self.bytes))
    }
    /// All header fields in order received: (name as sent, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.fields
            .iter()
            .map(move |f| (self.ascii(f.name), f.value.slice(&self.bytes)))
    }
    /// Effective authority (absolute-form target, else Host), if any.
    pub fn authority(&self) -> Option<&str> {
        // Host values may carry obs-text in theory; the codec rejects those for Host, so this
        // is ASCII. An empty Host is reported as no authority.
        self.head
            .authority
            .filter(|a| !a.is_empty())
            .map(|a| self.ascii(a))
    }
    /// Remote address of the connection.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }
    /// Declared body length (`Content-Length`), `None` for chunked; `Some(0)` without body.
    pub fn content_length(&self) -> Option<u64> {
        match self.head.framing {
            BodyFraming::None => Some(0),
            BodyFraming::Length(n) => Some(n),
            BodyFraming::Chunked => None,
        }
    }
    /// The body, to read from.
    pub fn body_mut(&mut self) -> &mut Body {
        &mut self.body
    }
    /// Takes the body out, leaving an empty one.
    pub fn take_body(&mut self) -> Body {
        std::mem::replace(&mut self.body, Body::empty())
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version())
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}
