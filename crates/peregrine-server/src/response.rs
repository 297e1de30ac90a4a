//! Outgoing responses. The engine adds `Date`, `Server`, `Content-Length` or
//! `Transfer-Encoding: chunked`, and `Connection` itself; handlers set status, headers and body.

use bytes::Bytes;
use futures_core::Stream;
use std::borrow::Cow;
use std::cell::Cell;
use std::pin::Pin;

/// A streamed body: chunks are written as they come (chunked encoding), with backpressure.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + 'static>>;

/// One response header field: name, value.
type Field = (Cow<'static, str>, Cow<'static, [u8]>);

/// The field [`Response::text`] adds. A constant, so the push copies it from read-only data:
/// built on the stack word by word and copied at once, it stalled the processor (store-to-load
/// forwarding), measured as a fifth of the engine's own time per pipelined request.
const CONTENT_TYPE_TEXT: Field = (
    Cow::Borrowed("Content-Type"),
    Cow::Borrowed(b"text/plain; charset=utf-8".as_slice()),
);

/// Field lists of this capacity or less are recycled (see [`spare_fields`]).
const SPARE_FIELDS_MAX_CAP: usize = 8;

thread_local! {
    /// An emptied field list kept for the next response on this thread: with it, a handler
    /// that answers with [`Response::text`] or [`Response::with_header`] does not allocate
    /// once per request. One is enough: the engine hands the list back after each response,
    /// before the next handler runs.
    static SPARE_FIELDS: Cell<Vec<Field>> = const { Cell::new(Vec::new()) };
}

/// An empty field list, with capacity if one was recycled on this thread.
fn spare_fields() -> Vec<Field> {
    SPARE_FIELDS.with(Cell::take)
}

/// Hands a response's field list back for reuse once the head is encoded. Lists that grew
/// large are freed instead, so the spare never pins much memory.
pub(crate) fn recycle_fields(mut fields: Vec<Field>) {
    let cap = fields.capacity();
    if cap != 0 && cap <= SPARE_FIELDS_MAX_CAP {
        fields.clear();
        SPARE_FIELDS.with(|s| s.set(fields));
    }
}

/// Response body.
pub enum ResponseBody {
    /// No body (`Content-Length: 0` unless the status forbids it).
    Empty,
    /// A body of known length.
    Full(Bytes),
    /// A streamed body of unknown length, sent chunked.
    Stream(BodyStream),
}

/// A response.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Extra header fields, in order (names are sent as given).
    pub headers: Vec<(Cow<'static, str>, Cow<'static, [u8]>)>,
    /// Body.
    pub body: ResponseBody,
}

impl Response {
    /// A response with `status` and no body.
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: ResponseBody::Empty,
        }
    }
    /// 200 `text/plain; charset=utf-8`.
    ///
    /// ```
    /// use peregrine_server::{Response, ResponseBody};
    /// let r = Response::text("Hello, World!");
    /// assert_eq!(r.status, 200);
    /// assert!(matches!(r.body, ResponseBody::Full(ref b) if b.as_ref() == b"Hello, World!"));
    /// ```
    pub fn text(body: impl Into<Bytes>) -> Self {
        // Built in place, then the field pushed: a field list built apart and moved in was
        // copied right after being written (the same stall as above).
        let mut r = Response {
            status: 200,
            headers: spare_fields(),
            body: ResponseBody::Full(body.into()),
        };
        r.headers.push(CONTENT_TYPE_TEXT);
        r
    }
    /// Adds a header field (builder style).
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, [u8]>>,
    ) -> Self {
        if self.headers.capacity() == 0 {
            self.headers = spare_fields();
        }
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Sets the status (builder style).
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
    /// Sets the body (builder style).
    pub fn with_body(mut self, body: ResponseBody) -> Self {
        self.body = body;
        self
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseBody::Empty => f.write_str("Empty"),
            ResponseBody::Full(b) => f.debug_tuple("Full").field(&b.len()).finish(),
            ResponseBody::Stream(_) => f.write_str("Stream"),
        }
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers.len())
            .field("body", &self.body)
            .finish()
    }
}
