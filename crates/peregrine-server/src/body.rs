//! Incoming request bodies, streamed from the connection with backpressure.

use crate::trailers::Trailers;
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::pin::Pin;

/// The default body limit, in bytes (1 MiB): what [`Limits::max_body_size`] starts at and
/// what a [`Body`] made in memory ([`Body::from_bytes`]) is held to until [`Body::set_limit`].
///
/// [`Limits::max_body_size`]: crate::Limits::max_body_size
pub const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Body larger than the limit → answer 413.
    TooLarge,
    /// No body bytes within the body timeout → the engine answers 408.
    Timeout,
    /// The client closed or reset the connection before the body was complete.
    Incomplete,
    /// Invalid chunked framing → 400. The reason is safe to show.
    Invalid(&'static str),
}

impl BodyError {
    /// The status a server answers with for this error.
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooLarge => 413,
            BodyError::Timeout => 408,
            BodyError::Incomplete | BodyError::Invalid(_) => 400,
        }
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge => f.write_str("request body too large"),
            BodyError::Timeout => f.write_str("timed out reading request body"),
            BodyError::Incomplete => f.write_str("request body incomplete"),
            BodyError::Invalid(r) => write!(f, "invalid request body: {r}"),
        }
    }
}

impl std::error::Error for BodyError {}

/// A request body. Reading pulls bytes from the connection on demand (and sends
/// `100 Continue` first if the client asked for it); what the handler does not read is drained
/// or the connection closed by the engine afterwards, so the connection never desynchronises.
///
/// Backpressure: nothing is read from the socket until the handler asks for the next chunk, so
/// a slow consumer slows the client down through TCP flow control.
///
/// Every body has a size limit ([`Body::limit`]; from a connection it starts at
/// [`Limits::max_body_size`](crate::Limits::max_body_size)), which every way of
/// reading it is held to: a declared length over it fails before anything is read (and before
/// `100 Continue`), a body that grows past it fails on the piece that crosses it, and a chunked
/// body's extensions count against it too. [`Body::set_limit`] changes it for this body (a
/// framework does so per route) before it is read.
pub struct Body {
    inner: Inner,
    /// The size limit (see [`Body::limit`]).
    limit: u64,
    /// Data bytes handed out so far, held to `limit`.
    read: u64,
}

enum Inner {
    Empty,
    Memory(Option<Bytes>),
    /// Bytes a driver reads as they are asked for (an HTTP/1.1 connection, an HTTP/2 stream).
    Source(Box<dyn BodySource>),
}

/// What a waiting [`BodySource::chunk`] resolves to.
pub(crate) type ChunkFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Bytes>, BodyError>> + 'a>>;

/// A driver's request body, the seam that keeps [`Body`] free of the drivers: each driver
/// implements it (`h1::body`, `h2::body`) and hands a boxed one to [`Body::from_source`].
pub(crate) trait BodySource {
    /// The next piece if it can be had without waiting (the common case: the body arrived with
    /// the head), `None` when it must wait (then [`BodySource::chunk`]).
    /// `limit` is the body's current [`Body::limit`], for what only the driver sees (the chunk
    /// extensions of HTTP/1.1); [`Body`] itself counts the data bytes against it.
    fn try_chunk(&mut self, limit: u64) -> Option<Result<Option<Bytes>, BodyError>>;
    /// The next piece, `None` at the end, waiting for it as long as the driver's rules allow
    /// (`limit` as for [`BodySource::try_chunk`]).
    fn chunk(&mut self, limit: u64) -> ChunkFuture<'_>;
    /// The length the request declared, if any.
    fn content_length(&self) -> Option<u64>;
    /// The handler refused the body as too large: the driver must not read it on its own
    /// afterwards (HTTP/1.1 closes the connection instead of draining it).
    fn refuse_too_large(&self);
    /// The body's trailer fields, once it was read to its end (`None` before, or if it had
    /// none).
    fn trailers(&self) -> Option<&Trailers> {
        None
    }
}

impl Body {
    /// An empty body.
    pub fn empty() -> Self {
        Body::with(Inner::Empty, DEFAULT_BODY_LIMIT)
    }

    fn with(inner: Inner, limit: u64) -> Self {
        Body {
            inner,
            limit,
            read: 0,
        }
    }

    /// Whether this is [`Body::empty`] itself (not merely a body with nothing left to read).
    pub(crate) fn is_empty_kind(&self) -> bool {
        matches!(self.inner, Inner::Empty)
    }

    /// A body already in memory (useful to test services without a socket).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use peregrine_server::Body;
    /// let mut b = Body::from_bytes("hello".into());
    /// assert_eq!(b.to_bytes(1024).await.unwrap(), "hello");
    /// # });
    /// ```
    pub fn from_bytes(bytes: Bytes) -> Self {
        if bytes.is_empty() {
            Body::empty()
        } else {
            Body::with(Inner::Memory(Some(bytes)), DEFAULT_BODY_LIMIT)
        }
    }

    /// A body read from a driver, held to `limit` (the server's `max_body_size`) until
    /// [`Body::set_limit`].
    pub(crate) fn from_source(source: Box<dyn BodySource>, limit: u64) -> Self {
        Body::with(Inner::Source(source), limit)
    }

    /// This body's size limit, in bytes (see [`Body`]; `u64::MAX`: none).
    ///
    /// ```
    /// use peregrine_server::{Body, DEFAULT_BODY_LIMIT};
    /// assert_eq!(Body::from_bytes("hello".into()).limit(), DEFAULT_BODY_LIMIT);
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Sets this body's size limit, in bytes (`u64::MAX` lifts it), for every way of reading it
    /// from now on: [`Body::chunk`], [`Body::to_bytes`] and, over HTTP/1.1, the chunk-extension
    /// bytes. Set it before reading; bytes already read count against the new limit.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use peregrine_server::{Body, BodyError};
    /// let mut b = Body::from_bytes("hello".into());
    /// b.set_limit(4);
    /// assert_eq!(b.chunk().await, Err(BodyError::TooLarge));
    /// # });
    /// ```
    pub fn set_limit(&mut self, bytes: u64) {
        self.limit = bytes;
    }

    /// Data bytes read from this body so far (what [`Body::limit`] is held against).
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// The bytes the body still declares: what is left of its `Content-Length`, or of a body
    /// in memory.
    fn declared_left(&self) -> Option<u64> {
        let total = match &self.inner {
            Inner::Empty => return None,
            Inner::Memory(b) => return b.as_ref().map(|b| b.len() as u64),
            Inner::Source(s) => s.content_length(),
        };
        total.map(|n| n.saturating_sub(self.read))
    }

    /// Next piece of the body, `None` at the end; [`BodyError::TooLarge`] past [`Body::limit`].
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        // A declared length over the limit fails before anything is read.
        if self
            .declared_left()
            .is_some_and(|n| self.read.saturating_add(n) > self.limit)
        {
            return Err(self.too_large());
        }
        let piece = match &mut self.inner {
            Inner::Empty => None,
            Inner::Memory(b) => b.take(),
            Inner::Source(s) => match s.try_chunk(self.limit) {
                Some(ready) => ready?,
                None => s.chunk(self.limit).await?,
            },
        };
        if let Some(piece) = &piece {
            self.read = self.read.saturating_add(piece.len() as u64);
            if self.read > self.limit {
                return Err(self.too_large());
            }
        }
        Ok(piece)
    }

    /// The whole body, failing with [`BodyError::TooLarge`] past `limit` bytes or past the
    /// body's own [`Body::limit`], whichever is smaller (checked against Content-Length before
    /// reading anything).
    pub async fn to_bytes(&mut self, limit: usize) -> Result<Bytes, BodyError> {
        if matches!(self.inner, Inner::Empty) {
            return Ok(Bytes::new());
        }
        let limit = (limit as u64).min(self.limit.saturating_sub(self.read));
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let declared = self.declared_left().unwrap_or(0);
        if declared > limit as u64 {
            return Err(self.too_large());
        }
        // One piece (the common case: the body arrived with the head) is returned without a copy.
        let first = match self.chunk().await? {
            None => return Ok(Bytes::new()),
            Some(b) => b,
        };
        let mut acc: Option<BytesMut> = None;
        let mut total = first.len();
        if total > limit {
            return Err(self.too_large());
        }
        loop {
            match self.chunk().await? {
                None => {
                    return Ok(match acc {
                        None => first,
                        Some(a) => a.freeze(),
                    })
                }
                Some(more) => {
                    total += more.len();
                    if total > limit {
                        return Err(self.too_large());
                    }
                    let a = acc.get_or_insert_with(|| {
                        let hint = declared.max(total as u64).min(limit as u64) as usize;
                        let mut a = BytesMut::with_capacity(hint);
                        a.extend_from_slice(&first);
                        a
                    });
                    a.extend_from_slice(&more);
                }
            }
        }
    }

    /// The request's trailer fields (RFC 9110 §6.5), once the body was read to its end
    /// ([`Body::chunk`] returned `Ok(None)`, or [`Body::to_bytes`] returned): over HTTP/2 and
    /// HTTP/3 the HEADERS frame after the DATA, over HTTP/1.1 the trailer section of a chunked
    /// body. `None` before the end, when the client sent none, and for a body in memory. The
    /// same on every protocol; fields that may not be trailers (framing, `Host`) were refused
    /// by the protocol's parser, as a malformed request.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use peregrine_server::Body;
    /// let mut b = Body::from_bytes("hello".into());
    /// b.to_bytes(1024).await.unwrap();
    /// assert!(b.trailers().is_none());
    /// # });
    /// ```
    pub fn trailers(&self) -> Option<&Trailers> {
        match &self.inner {
            Inner::Source(s) => s.trailers(),
            Inner::Empty | Inner::Memory(_) => None,
        }
    }

    fn too_large(&self) -> BodyError {
        if let Inner::Source(s) = &self.inner {
            s.refuse_too_large();
        }
        BodyError::TooLarge
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Empty => f.write_str("Body::Empty"),
            Inner::Memory(b) => write!(f, "Body::Memory({:?})", b.as_ref().map(|b| b.len())),
            Inner::Source(s) => write!(f, "Body::Stream(content_length={:?})", s.content_length()),
        }
    }
}

/// The trailers a stream receives after its last DATA frame (HTTP/2 and HTTP/3 alike), polled
/// with `poll` until `deadline`: `None` when the client sent none, `Timeout` past the deadline,
/// `Incomplete` when the stream failed instead.
#[cfg(feature = "http2")]
pub(crate) async fn trailers_after_data<E>(
    deadline: tokio::time::Instant,
    mut poll: impl FnMut(
        &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<http::HeaderMap>, E>>,
) -> Result<Option<Trailers>, BodyError> {
    let polled = tokio::time::timeout_at(deadline, std::future::poll_fn(|cx| poll(cx)))
        .await
        .map_err(|_| BodyError::Timeout)?;
    match polled {
        Ok(map) => Ok(map.as_ref().map(Trailers::from_header_map)),
        Err(_) => Err(BodyError::Incomplete),
    }
}
