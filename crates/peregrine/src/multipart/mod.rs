//! `multipart/form-data` request bodies (feature `multipart`, on the `multer` crate), streamed
//! part by part with a limit per part and for the whole body, and saved to disk without being
//! held in memory (`files.rs`: client file names made safe, `save_in` / `save_to`).

use crate::error::Error;
use crate::request::{body_error, Request};
use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::{Body, BodyError};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

mod file_name;
mod files;

/// Limits for [`Request::multipart_with`]. Past either limit the read fails with 413.
///
/// ```
/// use peregrine::MultipartLimits;
/// // Photo uploads: up to 50 MiB in all, no single photo over 20 MiB.
/// let photos = MultipartLimits { total: 50 << 20, per_part: 20 << 20 };
/// assert!(photos.per_part <= photos.total);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MultipartLimits {
    /// The whole body (every part, headers and boundaries included).
    pub total: u64,
    /// Any one part's data.
    pub per_part: u64,
}

/// A `multipart/form-data` body, read part by part (see [`Request::multipart`]).
///
/// ```
/// use peregrine::{post, App, Error, Request};
///
/// /// A contact form: `email` is required.
/// async fn contact(mut req: Request) -> Result<String, Error> {
///     let mut form = req.multipart()?;
///     let (mut email, mut message) = (None, String::new());
///     while let Some(mut field) = form.next_field().await? {
///         match field.name() {
///             Some("email") => email = Some(field.text().await?),
///             Some("message") => message = field.text().await?,
///             _ => {} // unknown parts are skipped
///         }
///     }
///     let email = email.ok_or_else(|| Error::unprocessable().with_field_error("email", "required"))?;
///     Ok(format!("{email}: {message}"))
/// }
///
/// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
/// #     let mut b = String::new();
/// #     for (name, file, ct, data) in parts {
/// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
/// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
/// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
/// #     }
/// #     b + "--XX--\r\n"
/// # }
/// let client = App::new().route("/contact", post(contact)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let send = |body: String| client.post("/contact").header("content-type", "multipart/form-data; boundary=XX").body(body);
/// let ok = send(form(&[("email", None, "text/plain", "ada@example.com"), ("message", None, "text/plain", "hi")])).send().await;
/// assert_eq!(ok.text(), "ada@example.com: hi");
/// assert_eq!(send(form(&[("message", None, "text/plain", "hi")])).send().await.status(), 422);
/// // Not multipart at all: 415.
/// assert_eq!(client.post("/contact").body("email=x").send().await.status(), 415);
/// # });
/// ```
pub struct Multipart {
    inner: multer::Multipart<'static>,
    pump: Pump,
}

/// One part of a [`Multipart`] body. Read it before asking for the next part.
///
/// ```
/// use peregrine::{post, App, Error, Request};
///
/// /// Avatars: one PNG part, kept in memory (small).
/// async fn avatar(mut req: Request) -> Result<String, Error> {
///     let mut form = req.multipart()?;
///     let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
///     if field.content_type().as_deref() != Some("image/png") {
///         return Err(Error::new(415).with_detail("avatars must be PNG"));
///     }
///     let file_name = field.file_name().unwrap_or("unnamed").to_owned(); // for display only
///     let data = field.bytes().await?;
///     Ok(format!("{file_name}: {} bytes", data.len()))
/// }
///
/// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
/// #     let mut b = String::new();
/// #     for (name, file, ct, data) in parts {
/// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
/// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
/// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
/// #     }
/// #     b + "--XX--\r\n"
/// # }
/// let client = App::new().route("/me/avatar", post(avatar)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let send = |body: String| client.post("/me/avatar").header("content-type", "multipart/form-data; boundary=XX").body(body);
/// let res = send(form(&[("file", Some("me.png"), "image/png", "PNGDATA")])).send().await;
/// assert_eq!(res.text(), "me.png: 7 bytes");
/// assert_eq!(send(form(&[("file", Some("me.gif"), "image/gif", "GIF")])).send().await.status(), 415);
/// # });
/// ```
pub struct Field {
    inner: multer::Field<'static>,
    pump: Pump,
    /// `file_name()`: the client's name made safe once, so it can be lent out.
    safe_name: Option<String>,
}

/// Feeds multer (which wants a `Send` stream) from the engine's body (which is not `Send`)
/// through a one-chunk channel. Polled beside every read, in the reader's own task, so no task
/// is spawned and backpressure reaches the client.
#[derive(Clone)]
struct Pump(Rc<RefCell<Option<PumpFuture>>>);

type PumpFuture = Pin<Box<dyn Future<Output = ()>>>;

impl Pump {
    async fn drive<T>(&self, fut: impl Future<Output = T>) -> T {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let Ok(mut slot) = self.0.try_borrow_mut() {
                if let Some(p) = slot.as_mut() {
                    if p.as_mut().poll(cx).is_ready() {
                        *slot = None;
                    }
                }
            }
            fut.as_mut().poll(cx)
        })
        .await
    }
}

struct ChannelStream(tokio::sync::mpsc::Receiver<Result<Bytes, BodyError>>);

impl Stream for ChannelStream {
    type Item = Result<Bytes, BodyError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "multipart")))]
impl Request {
    /// The body as `multipart/form-data`, with the application's body limit for the whole
    /// body and for each part. 415 if the content type is not `multipart/form-data` with a
    /// boundary.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut saved = Vec::new();
    ///     while let Some(mut part) = form.next_field().await? {
    ///         let name = part.name().unwrap_or("").to_owned();
    ///         if part.file_name().is_some() {
    ///             let path = std::env::temp_dir().join(format!("upload-{name}"));
    ///             let n = part.save_to(&path).await?; // streamed to disk
    ///             saved.push(format!("{name}: {n} bytes"));
    ///         } else {
    ///             saved.push(format!("{name} = {}", part.text().await?));
    ///         }
    ///     }
    ///     Ok(saved.join("\n"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let client = App::new().route("/upload", post(upload)).test();
    /// let body = "--XX\r\ncontent-disposition: form-data; name=\"title\"\r\n\r\nfalcon\r\n\
    ///             --XX\r\ncontent-disposition: form-data; name=\"photo\"; filename=\"a.jpg\"\r\n\
    ///             content-type: image/jpeg\r\n\r\nJPEGDATA\r\n--XX--\r\n";
    /// let res = client
    ///     .post("/upload")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(body)
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "title = falcon\nphoto: 8 bytes");
    /// # });
    /// ```
    pub fn multipart(&mut self) -> Result<Multipart, Error> {
        let limit = self.body_limit();
        self.multipart_with(MultipartLimits {
            total: limit,
            per_part: limit,
        })
    }

    /// [`Request::multipart`] with explicit limits (for uploads larger than the body limit,
    /// streamed to disk with [`Field::save_to`]).
    ///
    /// ```
    /// use peregrine::{post, App, Error, MultipartLimits, Request};
    ///
    /// // Up to 64 MiB in all, but no single part over 16 bytes here (to show the 413).
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let limits = MultipartLimits { total: 64 << 20, per_part: 16 };
    ///     let mut form = req.multipart_with(limits)?;
    ///     let mut sizes = Vec::new();
    ///     while let Some(mut part) = form.next_field().await? {
    ///         sizes.push(part.bytes().await?.len().to_string()); // 413 past `per_part`
    ///     }
    ///     Ok(sizes.join(","))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let client = App::new().route("/upload", post(upload)).test();
    /// let form = |data: &str| {
    ///     format!("--XX\r\ncontent-disposition: form-data; name=\"f\"\r\n\r\n{data}\r\n--XX--\r\n")
    /// };
    /// let send = |body: String| {
    ///     client
    ///         .post("/upload")
    ///         .header("content-type", "multipart/form-data; boundary=XX")
    ///         .body(body)
    ///         .send()
    /// };
    /// assert_eq!(send(form("small")).await.text(), "5");
    /// assert_eq!(send(form(&"x".repeat(17))).await.status(), 413);
    /// # });
    /// ```
    pub fn multipart_with(&mut self, limits: MultipartLimits) -> Result<Multipart, Error> {
        let ct = self.header("content-type").unwrap_or("");
        let boundary = multer::parse_boundary(ct).map_err(|_| {
            Error::new(415).with_detail("expected content type multipart/form-data with a boundary")
        })?;
        // The whole stream's limit is the body's (the engine holds the stream to it).
        self.set_body_limit(limits.total);
        if let Some(n) = self.content_length() {
            if n > limits.total {
                return Err(body_error(BodyError::TooLarge));
            }
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut body: Body = std::mem::replace(self.inner.body_mut(), Body::empty());
        let pump = Pump(Rc::new(RefCell::new(Some(Box::pin(async move {
            loop {
                let chunk = body.chunk().await;
                let last = !matches!(chunk, Ok(Some(_)));
                let item = match chunk {
                    Ok(Some(b)) => Ok(b),
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                if tx.send(item).await.is_err() || last {
                    break;
                }
            }
        })))));
        let constraints = multer::Constraints::new().size_limit(
            multer::SizeLimit::new()
                .whole_stream(limits.total)
                .per_field(limits.per_part),
        );
        Ok(Multipart {
            inner: multer::Multipart::with_constraints(ChannelStream(rx), boundary, constraints),
            pump,
        })
    }
}

impl Multipart {
    /// The next part, `None` after the last.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut names = Vec::new();
    ///     while let Some(field) = form.next_field().await? {
    ///         names.push(field.name().unwrap_or("?").to_owned());
    ///     }
    ///     Ok(names.join(","))
    /// }
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .post("/")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("title", None, "text/plain", "Notes"), ("tags", None, "text/plain", "a b")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "title,tags");
    /// # });
    /// ```
    pub async fn next_field(&mut self) -> Result<Option<Field>, Error> {
        let pump = self.pump.clone();
        let next = pump
            .drive(self.inner.next_field())
            .await
            .map_err(multer_error)?;
        Ok(next.map(|inner| Field {
            safe_name: inner.file_name().and_then(file_name::safe_file_name),
            inner,
            pump,
        }))
    }
}

impl Field {
    /// The part's `name` (from `Content-Disposition`).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(format!("{:?}", field.name()))
    /// }
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .post("/")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("avatar", Some("me.png"), "image/png", "PNG")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), r#"Some("avatar")"#);
    /// # });
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.inner.name()
    }
    /// The part's content type, as sent.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(format!("{:?}", field.content_type()))
    /// }
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .post("/")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("avatar", Some("me.png"), "image/png", "PNG")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), r#"Some("image/png")"#);
    /// # });
    /// ```
    pub fn content_type(&self) -> Option<String> {
        self.inner.content_type().map(|m| m.to_string())
    }
    /// The next piece of the part's data, `None` at its end.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// /// Counts lines of an uploaded log as it streams in, never holding it whole.
    /// async fn count_lines(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut lines = 0;
    ///     while let Some(mut field) = form.next_field().await? {
    ///         while let Some(chunk) = field.chunk().await? {
    ///             lines += chunk.iter().filter(|&&b| b == b'\n').count();
    ///         }
    ///     }
    ///     Ok(lines.to_string())
    /// }
    ///
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/logs", post(count_lines)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let log = "GET /\n".repeat(10_000);
    /// let res = client
    ///     .post("/logs")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("log", Some("access.log"), "text/plain", &log)]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "10000");
    /// # });
    /// ```
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        let pump = self.pump.clone();
        pump.drive(self.inner.chunk()).await.map_err(multer_error)
    }
    /// The whole part in memory (within the per-part limit). If the memory is refused, `503`
    /// with `Retry-After`.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(format!("{} bytes", field.bytes().await?.len()))
    /// }
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .post("/")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("file", Some("a.bin"), "application/octet-stream", "0123456789")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "10 bytes");
    /// # });
    /// ```
    pub async fn bytes(&mut self) -> Result<Bytes, Error> {
        let mut out = Vec::new();
        while let Some(c) = self.chunk().await? {
            // A refused allocation is this request's 503, not an abort of the process.
            out.try_reserve(c.len()).map_err(|_| {
                Error::new(503)
                    .with_detail("not enough memory for this part now")
                    .with_header("retry-after", "1")
            })?;
            out.extend_from_slice(&c);
        }
        Ok(Bytes::from(out))
    }
    /// The whole part as UTF-8 text (400 otherwise).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(field.text().await?.to_uppercase())
    /// }
    /// # fn form(parts: &[(&str, Option<&str>, &str, &str)]) -> String {
    /// #     let mut b = String::new();
    /// #     for (name, file, ct, data) in parts {
    /// #         b += &format!("--XX\r\ncontent-disposition: form-data; name=\"{name}\"");
    /// #         if let Some(f) = file { b += &format!("; filename=\"{f}\""); }
    /// #         b += &format!("\r\ncontent-type: {ct}\r\n\r\n{data}\r\n");
    /// #     }
    /// #     b + "--XX--\r\n"
    /// # }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .post("/")
    ///     .header("content-type", "multipart/form-data; boundary=XX")
    ///     .body(form(&[("note", None, "text/plain", "héllo")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "HÉLLO");
    /// # });
    /// ```
    pub async fn text(&mut self) -> Result<String, Error> {
        String::from_utf8(self.bytes().await?.into()).map_err(|_| {
            Error::bad_request().with_detail(format!(
                "part `{}` is not valid UTF-8",
                self.name().unwrap_or("")
            ))
        })
    }
}

fn multer_error(e: multer::Error) -> Error {
    match e {
        multer::Error::FieldSizeExceeded { limit, field_name } => {
            Error::new(413).with_detail(format!(
                "part `{}` exceeds its limit of {limit} bytes",
                field_name.unwrap_or_default()
            ))
        }
        multer::Error::StreamSizeExceeded { limit } => Error::new(413)
            .with_detail(format!("multipart body exceeds its limit of {limit} bytes")),
        multer::Error::StreamReadFailed(inner) => match inner.downcast::<BodyError>() {
            Ok(b) => body_error(*b),
            Err(other) => Error::bad_request().with_detail(format!("multipart body: {other}")),
        },
        other => Error::bad_request().with_detail(format!("malformed multipart body: {other}")),
    }
}
