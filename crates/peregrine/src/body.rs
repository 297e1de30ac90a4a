//! The raw request body as a stream, held to the request's body limit (the same limit as
//! [`Request::bytes`](crate::Request::bytes), `json`, `form` and `multipart`).

use crate::error::Error;
use crate::request::body_error;
use bytes::Bytes;
use peregrine_server::Body;

/// The request body piece by piece, as sent (not decoded), made by
/// [`Request::body_mut`](crate::Request::body_mut). It stops at the request's body limit
/// ([`Request::body_limit`](crate::Request::body_limit): the application's, the route's or the
/// request's own, which the engine's body is held to): a declared
/// `Content-Length` over the limit fails before anything is read, and a body that grows past it
/// (chunked) fails on the piece that crosses it. The failure is the same 413 problem document
/// as [`Request::bytes`](crate::Request::bytes) gives, so a handler's `?` answers it.
///
/// ```
/// use peregrine::{post, App, Error, Request};
///
/// async fn upload(mut req: Request) -> Result<String, Error> {
///     let mut total = 0;
///     while let Some(piece) = req.body_mut().chunk().await? { // 413 past the limit
///         total += piece.len();
///     }
///     Ok(format!("{total} bytes"))
/// }
/// let app = App::new()
///     .body_limit(64 * 1024)
///     .route("/upload", post(upload).body_limit(512 * 1024 * 1024)); // this route: 512 MiB
/// # let _ = app;
/// ```
pub struct BodyStream<'a> {
    pub(crate) body: &'a mut Body,
}

impl BodyStream<'_> {
    /// The next piece of the body, `None` at the end. 413 past the body limit, 400 for broken
    /// framing, 408 if the client stalls.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// /// Sums the sizes of the pieces as they arrive.
    /// async fn total(mut req: Request) -> Result<String, Error> {
    ///     let mut body = req.body_mut();
    ///     let mut n = 0;
    ///     while let Some(piece) = body.chunk().await? {
    ///         n += piece.len();
    ///     }
    ///     Ok(n.to_string())
    /// }
    /// let client = App::new().body_limit(100).route("/", post(total)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body("x".repeat(100)).send().await.text(), "100");
    /// assert_eq!(client.post("/").body("x".repeat(101)).send().await.status(), 413);
    /// # });
    /// ```
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        self.body.chunk().await.map_err(body_error)
    }

    /// The limit this stream is held to, in bytes.
    ///
    /// ```
    /// use peregrine::{post, App, Request};
    ///
    /// let client = App::new()
    ///     .body_limit(1024)
    ///     .route("/a", post(|mut req: Request| async move { req.body_mut().limit().to_string() }))
    ///     .route("/b", post(|mut req: Request| async move { req.body_mut().limit().to_string() }).body_limit(1 << 20))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/a").send().await.text(), "1024");
    /// assert_eq!(client.post("/b").send().await.text(), "1048576");
    /// # });
    /// ```
    pub fn limit(&self) -> u64 {
        self.body.limit()
    }

    /// How many body bytes have been read so far.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// /// Reads only the first piece (say, to sniff a file type), then reports progress.
    /// async fn sniff(mut req: Request) -> Result<String, Error> {
    ///     let mut body = req.body_mut();
    ///     let first = body.chunk().await?.unwrap_or_default();
    ///     let kind = if first.starts_with(b"%PDF") { "pdf" } else { "other" };
    ///     Ok(format!("{kind}, {} bytes read", body.bytes_read()))
    /// }
    ///
    /// let client = App::new().route("/sniff", post(sniff)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/sniff").body("%PDF-1.7 ...").send().await.text(), "pdf, 12 bytes read");
    /// # });
    /// ```
    pub fn bytes_read(&self) -> u64 {
        self.body.bytes_read()
    }

    /// The request's trailer fields, once the body was read to its end (the engine's
    /// [`Body::trailers`]): the same over HTTP/1.1 (chunked), HTTP/2 and HTTP/3; `None` before
    /// the end or when the client sent none.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let body = req.bytes().await?;
    ///     let sum = req.body_mut().trailers().and_then(|t| t.get("x-sum")).map(<[u8]>::to_vec);
    ///     Ok(format!("{} bytes, x-sum {:?}", body.len(), sum))
    /// }
    /// let client = App::new().route("/up", post(upload)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/up").body("abc").send().await.text(), "3 bytes, x-sum None");
    /// # });
    /// ```
    pub fn trailers(&self) -> Option<&peregrine_server::Trailers> {
        self.body.trailers()
    }
}
