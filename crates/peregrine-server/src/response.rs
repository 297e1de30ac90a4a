//! Outgoing responses. The engine adds `Date`, `Server`, `Content-Length` or
//! `Transfer-Encoding: chunked`, and `Connection` itself; handlers set status, headers and body.

pub use crate::field_value::FieldValue;
use crate::trailers::{PendingTrailers, Trailers};
use bytes::Bytes;
use futures_core::Stream;
use std::borrow::Cow;
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::pin::Pin;

/// A streamed body: chunks are written as they come (chunked encoding), with backpressure.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + 'static>>;

/// One response header field: name, value.
type Field = (Cow<'static, str>, Cow<'static, [u8]>);

/// The field [`Response::text`] adds. Statics, so that a recycled list holding exactly this
/// field can be recognised by address (see [`recycle_fields`]). Lower case, as HTTP/2 sends
/// it and as the framework names its fields: its text answers use this very list.
static CONTENT_TYPE_NAME: &str = "content-type";
static CONTENT_TYPE_TEXT_VALUE: &[u8] = b"text/plain; charset=utf-8";
/// The value [`Response::json`] sets, recognised by address as the text one is.
static CONTENT_TYPE_JSON_VALUE: &[u8] = b"application/json";

#[cfg(test)]
fn content_type_text() -> Field {
    content_type(CONTENT_TYPE_TEXT_VALUE)
}

fn content_type(value: &'static [u8]) -> Field {
    (Cow::Borrowed(CONTENT_TYPE_NAME), Cow::Borrowed(value))
}

#[inline(always)]
fn is_content_type(f: &Field, value: &'static [u8]) -> bool {
    matches!(f, (Cow::Borrowed(n), Cow::Borrowed(v))
        if std::ptr::eq(*n, CONTENT_TYPE_NAME) && std::ptr::eq(*v, value))
}

#[inline(always)]
fn is_content_type_text(f: &Field) -> bool {
    is_content_type(f, CONTENT_TYPE_TEXT_VALUE)
}

/// Field lists of this capacity or less are recycled (see [`spare_fields`]).
const SPARE_FIELDS_MAX_CAP: usize = 8;

thread_local! {
    /// An emptied field list kept for the next response on this thread: with it, a handler
    /// that answers with [`Response::with_header`] does not allocate once per request. One is
    /// enough: the engine hands the list back after each response, before the next handler
    /// runs.
    ///
    /// In `ManuallyDrop`: a thread-local without drop glue needs no destructor registration,
    /// so each access is a plain address computation instead of a check of the registration
    /// state (two accesses per response). The price: a thread that exits leaves its two lists
    /// allocated (at most `SPARE_FIELDS_MAX_CAP` fields each; workers exit with the server).
    static SPARE_FIELDS: Cell<ManuallyDrop<Vec<Field>>> =
        const { Cell::new(ManuallyDrop::new(Vec::new())) };
    /// The same for [`Response::text`], kept with its one field in place: the response is then
    /// built from a list that is not written to at all. Writing the field (or only the length)
    /// just before the response is copied out of the handler stalled that copy (store-to-load
    /// forwarding), measured as a fifth of the engine's own time per pipelined request.
    static SPARE_TEXT_FIELDS: Cell<ManuallyDrop<Vec<Field>>> =
        const { Cell::new(ManuallyDrop::new(Vec::new())) };
    /// The same for [`Response::json`].
    static SPARE_JSON_FIELDS: Cell<ManuallyDrop<Vec<Field>>> =
        const { Cell::new(ManuallyDrop::new(Vec::new())) };
}

/// One of the thread's one-field lists ([`SPARE_TEXT_FIELDS`], [`SPARE_JSON_FIELDS`]).
type ListCell = std::thread::LocalKey<Cell<ManuallyDrop<Vec<Field>>>>;

/// Takes the list out of `cell`, leaving an empty one (no allocation).
#[inline(always)]
fn take_list(cell: &'static std::thread::LocalKey<Cell<ManuallyDrop<Vec<Field>>>>) -> Vec<Field> {
    ManuallyDrop::into_inner(cell.with(Cell::take))
}

/// Puts `fields` in `cell`, dropping what was there (normally the empty list `take_list` left,
/// which owns nothing: it is not dropped at all, which saved an out-of-line drop call per
/// response).
#[inline(always)]
fn put_list(
    cell: &'static std::thread::LocalKey<Cell<ManuallyDrop<Vec<Field>>>>,
    fields: Vec<Field>,
) {
    // The old list is looked at inside the closure: returned out of `with`, it was checked
    // for `with`'s error case too.
    cell.with(|s| {
        let old = s.replace(ManuallyDrop::new(fields));
        if old.capacity() != 0 {
            drop_list(ManuallyDrop::into_inner(old));
        }
    });
}

/// Drops a field list that owns memory (rare on the hot path: see [`put_list`]).
#[cold]
#[inline(never)]
fn drop_list(fields: Vec<Field>) {
    drop(fields);
}

/// An empty field list, with capacity if one was recycled on this thread.
fn spare_fields() -> Vec<Field> {
    take_list(&SPARE_FIELDS)
}

/// `[Content-Type: text/plain; charset=utf-8]`, recycled if possible. Inlined (with
/// [`recycle_fields`]): as calls, their prologues and epilogues were half their cost per request
/// (cachegrind, docs/performance.md).
///
/// The list is made ready in place first (cold) and then taken on one path: taken first and
/// replaced on a second path, it was merged through the stack in 8-byte moves and read back
/// in 16-byte ones, a store-forwarding stall per response (`perf annotate`, docs/performance.md).
#[inline(always)]
fn text_fields() -> Vec<Field> {
    one_field_list(&SPARE_TEXT_FIELDS, CONTENT_TYPE_TEXT_VALUE)
}

/// `[Content-Type: application/json]`, recycled as [`text_fields`] is.
#[inline(always)]
fn json_fields() -> Vec<Field> {
    one_field_list(&SPARE_JSON_FIELDS, CONTENT_TYPE_JSON_VALUE)
}

/// The list kept in `cell` with its one field `Content-Type: value` in place.
#[inline(always)]
fn one_field_list(cell: &'static ListCell, value: &'static [u8]) -> Vec<Field> {
    // SAFETY: a `Cell`'s value is never borrowed elsewhere, and this thread is the only one
    // with access to its thread-local; the length is read and no reference outlives the read.
    if cell.with(|c| unsafe { (*c.as_ptr()).len() }) != 1 {
        refill_one_field(cell, value);
    }
    take_list(cell)
}

/// Puts a list holding `Content-Type: value` in `cell` when it holds none (the first response
/// on a thread, or after a list grew).
#[cold]
#[inline(never)]
fn refill_one_field(cell: &'static ListCell, value: &'static [u8]) {
    drop(take_list(cell));
    let mut fields = spare_fields();
    fields.push(content_type(value));
    put_list(cell, fields);
}

/// Bodies up to this size are copied by [`detach_small`] when they share their allocation.
#[cfg(any(feature = "http2", feature = "http3"))]
const DETACH_MAX: usize = 16 * 1024;

/// `body` in an allocation of its own when it is small and shares its allocation with other
/// data (a slice of a larger buffer, such as the framework's per-worker chunk of small bodies),
/// else as it is. The HTTP/2 and HTTP/3 drivers hand bodies to their protocol crates, which hold
/// them while the client's flow-control window or socket is closed: a held slice would keep its
/// whole buffer alive, so a client stalling many streams could pin a buffer per small answer.
/// (HTTP/1.1 copies bodies of this size into the connection's output buffer at once.) A larger
/// body keeps its allocation: what it pins is about its own size.
#[cfg(any(feature = "http2", feature = "http3"))]
pub(crate) fn detach_small(body: Bytes) -> Bytes {
    if body.len() <= DETACH_MAX && !body.is_unique() {
        Bytes::copy_from_slice(&body)
    } else {
        body
    }
}

/// Whether `fields` is exactly [`Response::text`]'s list: its one field, the engine's statics.
pub(crate) fn is_text_fields(fields: &[Field]) -> bool {
    fields.len() == 1 && is_content_type_text(&fields[0])
}

/// [`recycle_fields`] for a list known to be exactly [`Response::text`]'s (see
/// [`is_text_fields`]): the memoized head it matched already compared its field by identity.
#[inline(always)]
pub(crate) fn recycle_text_fields(fields: Vec<Field>) {
    let cap = fields.capacity();
    if cap != 0 && cap <= SPARE_FIELDS_MAX_CAP {
        put_list(&SPARE_TEXT_FIELDS, fields);
    }
}

/// Hands a response's field list back for reuse once the head is encoded. Lists that grew
/// large are freed instead, so the spare never pins much memory.
#[inline(always)]
pub(crate) fn recycle_fields(mut fields: Vec<Field>) {
    let cap = fields.capacity();
    if cap != 0 && cap <= SPARE_FIELDS_MAX_CAP {
        if fields.len() == 1 && is_content_type_text(&fields[0]) {
            put_list(&SPARE_TEXT_FIELDS, fields);
        } else if fields.len() == 1 && is_content_type(&fields[0], CONTENT_TYPE_JSON_VALUE) {
            put_list(&SPARE_JSON_FIELDS, fields);
        } else {
            fields.clear();
            put_list(&SPARE_FIELDS, fields);
        }
    }
}

/// Response body.
pub enum ResponseBody {
    /// No body (`Content-Length: 0` unless the status forbids it).
    Empty,
    /// A body of known length.
    Full(Bytes),
    /// A body of known length in static memory: what [`Response::text`] makes of a `&'static
    /// str` (and [`ResponseBody::from`] of a `&'static str` or `&'static [u8]`). Nothing to
    /// count or free, and the engine may keep it with the memoized head of the response (one
    /// copy for both, see docs/performance.md).
    Static(&'static [u8]),
    /// A streamed body of unknown length, sent chunked.
    Stream(BodyStream),
    /// A streamed body of known length, sent with `Content-Length: len` (also to HEAD, which
    /// gets no body). The stream must yield exactly `len` bytes: if it yields more or fewer
    /// (or fails), the response is cut short and the connection closed, never kept alive.
    SizedStream {
        /// The announced length.
        len: u64,
        /// The bytes, in pieces.
        stream: BodyStream,
    },
    /// `len` bytes of a regular file from `offset`, sent with `Content-Length: len`. On a plain
    /// TCP connection the kernel copies them straight from the page cache to the socket
    /// (`sendfile(2)`, Linux); on other transports they are read and written in pieces. A
    /// file shorter than `offset + len` cuts the response short and closes the connection.
    /// Reading the file blocks the worker like any page-cache read: serve local files.
    ///
    /// ```no_run
    /// use peregrine_server::{Response, ResponseBody};
    /// let file = std::fs::File::open("video.mp4")?;
    /// let len = file.metadata()?.len();
    /// let r = Response::new(200).with_body(ResponseBody::File { file, offset: 0, len });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    File {
        /// An open regular file (its position is not used or moved).
        file: std::fs::File,
        /// Where the body starts in the file.
        offset: u64,
        /// The body's length.
        len: u64,
    },
    /// Switching protocols, with status 101 only. Over HTTP/1.1 the engine writes the head
    /// (`Connection: upgrade` added, the handler's `Upgrade` and other fields as given) and then
    /// hands the connection to this function ([`crate::upgrade::Upgraded`]); over HTTP/2, for
    /// an RFC 8441 extended CONNECT (which the handler sees as a `GET` with
    /// `Upgrade: <protocol>`), it sends `200` and hands over the stream.
    ///
    /// With any other status the function is dropped, never run: the response is sent as a
    /// normal one without a body, and the connection is not handed over (an extended CONNECT
    /// answered 2xx this way gets 501, since a 2xx would tell the client the tunnel is open).
    /// A 101 the engine cannot honour (a request body still unread, HTTP/1.0, an HTTP/2
    /// request that is not an extended CONNECT) is answered 500.
    Upgrade(crate::upgrade::OnUpgrade),
}

/// A response.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Extra header fields, in order (names are sent as given).
    pub headers: Vec<(Cow<'static, str>, Cow<'static, [u8]>)>,
    /// Body.
    pub body: ResponseBody,
    /// Trailer fields, sent after the body (see [`crate::trailers`]). Boxed: a response
    /// without them carries one null pointer.
    trailers: Option<Box<PendingTrailers>>,
}

impl Response {
    /// A response with `status` and no body.
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: ResponseBody::Empty,
            trailers: None,
        }
    }
    /// 200 `text/plain; charset=utf-8`. The body is anything [`ResponseBody`] converts from: a
    /// `&'static str` becomes [`ResponseBody::Static`], owned text or bytes ([`String`],
    /// `Vec<u8>`, [`Bytes`]) [`ResponseBody::Full`].
    ///
    /// ```
    /// use peregrine_server::{Response, ResponseBody};
    /// let r = Response::text("Hello, World!");
    /// assert_eq!(r.status, 200);
    /// assert!(matches!(r.body, ResponseBody::Static(b) if b == b"Hello, World!"));
    /// let r = Response::text(format!("{} items", 3));
    /// assert!(matches!(r.body, ResponseBody::Full(ref b) if b.as_ref() == b"3 items"));
    /// ```
    pub fn text(body: impl Into<ResponseBody>) -> Self {
        Response {
            status: 200,
            headers: text_fields(),
            body: body.into(),
            trailers: None,
        }
    }
    /// 200 `application/json` with `body`, JSON the caller serialised (the engine has no
    /// serialiser). Like [`Response::text`], its one field comes from a list the engine
    /// recycles, so building the answer allocates nothing beyond the body.
    ///
    /// ```
    /// use peregrine_server::{Response, ResponseBody};
    /// let r = Response::json(&br#"{"ok":true}"#[..]);
    /// assert_eq!(r.status, 200);
    /// assert_eq!(&*r.headers[0].1, b"application/json");
    /// assert!(matches!(r.body, ResponseBody::Static(b) if b == br#"{"ok":true}"#));
    /// ```
    pub fn json(body: impl Into<ResponseBody>) -> Self {
        Response {
            status: 200,
            headers: json_fields(),
            body: body.into(),
            trailers: None,
        }
    }
    /// Adds a header field (builder style), after any of the same name. The value is text or
    /// bytes, `'static` or owned ([`FieldValue`]).
    ///
    /// ```
    /// use peregrine_server::Response;
    /// let id = 7;
    /// let r = Response::new(204)
    ///     .with_header("x-request-id", format!("req-{id}"))
    ///     .with_header("vary", "origin")
    ///     .with_header("vary", &b"accept-encoding"[..]);
    /// assert_eq!(r.headers.len(), 3);
    /// ```
    // Inlined: the framework builds every text, bytes and JSON answer with it; inlined (and the
    // body set in place) measured ~30 instructions fewer per request (docs/performance.md).
    #[inline]
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl FieldValue,
    ) -> Self {
        if self.headers.capacity() == 0 {
            self.headers = spare_fields();
        }
        self.headers.push((name.into(), value.into_field_value()));
        self
    }
    /// Sets a header field, replacing every field of that name (compared without case)
    /// already there; [`Response::with_header`] adds one instead.
    ///
    /// ```
    /// use peregrine_server::Response;
    /// let mut r = Response::text("hi").with_header("Cache-Control", "no-store");
    /// r.insert_header("cache-control", "max-age=60");
    /// let values: Vec<_> = r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("cache-control")).collect();
    /// assert_eq!(values.len(), 1);
    /// assert_eq!(&*values[0].1, b"max-age=60");
    /// ```
    pub fn insert_header(&mut self, name: impl Into<Cow<'static, str>>, value: impl FieldValue) {
        let name = name.into();
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        if self.headers.capacity() == 0 {
            self.headers = spare_fields();
        }
        self.headers.push((name, value.into_field_value()));
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
    /// Sets trailer fields known now, sent after the body (see [`crate::trailers`] for where
    /// each protocol can carry them and where they are dropped).
    ///
    /// ```
    /// use peregrine_server::{Response, Trailers};
    /// let r = Response::text("data").with_trailers(Trailers::new().with("x-checksum", "1f")?);
    /// assert!(r.has_trailers());
    /// # Ok::<(), peregrine_server::TrailerError>(())
    /// ```
    pub fn with_trailers(mut self, trailers: Trailers) -> Self {
        self.trailers = Some(Box::new(PendingTrailers::Ready(trailers)));
        self
    }
    /// Sets trailer fields known only once the body ended (a status after a streamed body):
    /// `trailers` is awaited after the body's last byte was handed to the connection, and its
    /// fields sent then. Where trailers cannot be sent it is dropped, never polled.
    ///
    /// ```
    /// use peregrine_server::{Response, Trailers};
    /// // The body's producer (a streamed body, a task) sends the outcome once it knows it.
    /// let (tx, rx) = tokio::sync::oneshot::channel::<Trailers>();
    /// # drop(tx);
    /// let r = Response::text("streamed...")
    ///     .with_trailers_later(async move { rx.await.unwrap_or_default() });
    /// assert!(r.has_trailers());
    /// ```
    pub fn with_trailers_later(
        mut self,
        trailers: impl std::future::Future<Output = Trailers> + 'static,
    ) -> Self {
        self.trailers = Some(Box::new(PendingTrailers::Later(Box::pin(trailers))));
        self
    }
    /// Whether trailers were set.
    pub fn has_trailers(&self) -> bool {
        self.trailers.is_some()
    }
    /// Takes the trailers out (the drivers, when they send the body).
    pub(crate) fn take_trailers(&mut self) -> Option<Box<PendingTrailers>> {
        self.trailers.take()
    }
}

impl FieldValue for Cow<'static, [u8]> {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        self
    }
}
impl FieldValue for Bytes {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self.to_vec())
    }
}

impl ResponseBody {
    /// The body's bytes when they are in memory ([`ResponseBody::Full`] or
    /// [`ResponseBody::Static`]), as [`Bytes`] (no copy); `None` for the other kinds.
    ///
    /// ```
    /// use peregrine_server::ResponseBody;
    /// assert_eq!(ResponseBody::from("hi").in_memory().as_deref(), Some(&b"hi"[..]));
    /// assert!(ResponseBody::Empty.in_memory().is_none());
    /// ```
    pub fn in_memory(&self) -> Option<Bytes> {
        match self {
            ResponseBody::Full(b) => Some(b.clone()),
            ResponseBody::Static(s) => Some(Bytes::from_static(s)),
            _ => None,
        }
    }
}

impl From<&'static str> for ResponseBody {
    fn from(s: &'static str) -> Self {
        ResponseBody::Static(s.as_bytes())
    }
}

impl From<&'static [u8]> for ResponseBody {
    fn from(s: &'static [u8]) -> Self {
        ResponseBody::Static(s)
    }
}

impl From<Bytes> for ResponseBody {
    fn from(b: Bytes) -> Self {
        ResponseBody::Full(b)
    }
}

impl From<String> for ResponseBody {
    fn from(s: String) -> Self {
        ResponseBody::Full(Bytes::from(s))
    }
}

impl From<Vec<u8>> for ResponseBody {
    fn from(v: Vec<u8>) -> Self {
        ResponseBody::Full(Bytes::from(v))
    }
}

impl From<Box<[u8]>> for ResponseBody {
    fn from(v: Box<[u8]>) -> Self {
        ResponseBody::Full(Bytes::from(v))
    }
}

impl From<bytes::BytesMut> for ResponseBody {
    fn from(v: bytes::BytesMut) -> Self {
        ResponseBody::Full(v.freeze())
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseBody::Empty => f.write_str("Empty"),
            ResponseBody::Full(b) => f.debug_tuple("Full").field(&b.len()).finish(),
            ResponseBody::Static(b) => f.debug_tuple("Static").field(&b.len()).finish(),
            ResponseBody::Stream(_) => f.write_str("Stream"),
            ResponseBody::SizedStream { len, .. } => {
                f.debug_struct("SizedStream").field("len", len).finish()
            }
            ResponseBody::File { offset, len, .. } => f
                .debug_struct("File")
                .field("offset", offset)
                .field("len", len)
                .finish(),
            ResponseBody::Upgrade(_) => f.write_str("Upgrade"),
        }
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers.len())
            .field("body", &self.body)
            .field("trailers", &self.trailers.is_some())
            .finish()
    }
}

/// Logs a handler's field that fails [`check_field`](peregrine_codec::response::check_field): one line, the same from the HTTP/1.1 and
/// the HTTP/2 driver (at ERROR: the response is a bug the client cannot fix). The name is
/// printed escaped, since it may hold the very bytes that were refused.
#[cold]
#[inline(never)]
pub(crate) fn log_refused_field(
    status: u16,
    name: &str,
    why: peregrine_codec::response::FieldError,
) {
    tracing::error!(
        status,
        field = ?name,
        "the handler set a response {why}; answering 500"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(any(feature = "http2", feature = "http3"))]
    fn small_shared_bodies_are_detached_and_the_others_kept() {
        let buffer = Bytes::from(vec![7u8; 64 * 1024]);
        let small = buffer.slice(0..30);
        let copy = detach_small(small.clone());
        assert_eq!(copy, small);
        assert_ne!(
            copy.as_ptr(),
            small.as_ptr(),
            "a small shared slice is copied"
        );
        assert!(copy.is_unique());

        let alone = Bytes::from(b"alone".to_vec());
        let at = alone.as_ptr();
        assert_eq!(
            detach_small(alone).as_ptr(),
            at,
            "a body that owns its bytes is kept"
        );

        let large = buffer.slice(0..DETACH_MAX + 1);
        let at = large.as_ptr();
        assert_eq!(detach_small(large).as_ptr(), at, "a large slice is kept");
    }

    #[test]
    fn recycled_text_fields_keep_their_one_field_and_other_lists_come_back_empty() {
        let r = Response::text("a");
        assert_eq!(r.headers, vec![content_type_text()]);
        let list = r.headers.as_ptr();
        recycle_fields(r.headers);
        // The same list, field in place.
        let r = Response::text("b");
        assert_eq!(r.headers.as_ptr(), list);
        assert_eq!(r.headers, vec![content_type_text()]);
        // A text response given more fields is recycled empty, not as a text list.
        let r = r.with_header("X-C", b"3".as_slice());
        assert_eq!(r.headers.len(), 2);
        recycle_fields(r.headers);
        let r = Response::new(204).with_header("X-D", b"4".as_slice());
        assert_eq!(r.headers.as_ptr(), list);
        assert_eq!(r.headers.len(), 1);
        assert_eq!(r.headers[0].0, "X-D");
        recycle_fields(r.headers);
        // An equal field that is not the engine's own static is not taken for it.
        let own = (
            Cow::Owned("content-type".to_string()),
            Cow::Borrowed(CONTENT_TYPE_TEXT_VALUE),
        );
        assert!(!is_content_type_text(&own));
        let r = Response::text("e");
        assert_eq!(r.headers, vec![content_type_text()]);
        assert!(is_content_type_text(&r.headers[0]));
    }

    #[test]
    fn text_lists_recycled_without_a_check_keep_their_field_and_large_ones_go() {
        let r = Response::text("a");
        assert!(is_text_fields(&r.headers));
        let list = r.headers.as_ptr();
        recycle_text_fields(r.headers);
        let r = Response::text("b");
        assert_eq!(r.headers.as_ptr(), list);
        assert_eq!(r.headers, vec![content_type_text()]);
        // A text list that grew past the spare bound is freed, not kept.
        let mut headers = r.headers;
        headers.reserve(4 * SPARE_FIELDS_MAX_CAP);
        assert!(is_text_fields(&headers));
        recycle_text_fields(headers);
        let r = Response::text("c");
        assert!(r.headers.capacity() <= SPARE_FIELDS_MAX_CAP);
        assert_eq!(r.headers, vec![content_type_text()]);
        // Other lists are not text lists.
        let r = r.with_header("X-A", b"1".as_slice());
        assert!(!is_text_fields(&r.headers));
        assert!(!is_text_fields(&[]));
    }

    #[test]
    fn json_lists_are_recycled_with_their_field_and_kept_apart_from_text_ones() {
        let r = Response::json(&b"{}"[..]);
        assert_eq!(r.headers, vec![content_type(CONTENT_TYPE_JSON_VALUE)]);
        assert!(!is_text_fields(&r.headers));
        let list = r.headers.as_ptr();
        recycle_fields(r.headers);
        let r = Response::json(&b"[]"[..]);
        assert_eq!(
            r.headers.as_ptr(),
            list,
            "the same list, its field in place"
        );
        assert_eq!(&*r.headers[0].1, b"application/json");
        // Text answers do not get the JSON list, nor JSON ones the text list.
        let t = Response::text("t");
        assert_ne!(t.headers.as_ptr(), list);
        assert!(is_text_fields(&t.headers));
        // An equal value that is not the engine's own static is an ordinary list.
        let own = Response::new(200).with_header("content-type", b"application/json".to_vec());
        assert!(!is_content_type(&own.headers[0], CONTENT_TYPE_JSON_VALUE));
        recycle_fields(own.headers);
        let r2 = Response::json(&b"1"[..]);
        assert_eq!(r2.headers, vec![content_type(CONTENT_TYPE_JSON_VALUE)]);
        // A JSON list with a field added is cleared when recycled, not kept as JSON's.
        let grown = r.with_header("x-a", "1");
        recycle_fields(grown.headers);
        assert_eq!(Response::new(200).with_header("x-b", "2").headers.len(), 1);
    }
}
