//! Reading the request body: whole (`bytes`, `text`, `json`, `form`, decoded when sent
//! compressed) or as a raw stream, all held to the request's body limit, which is the engine
//! body's own (`peregrine_server::Body::limit`): it counts every byte read, however read. Also
//! (The problem answers for body errors are in `body_error.rs`.)

use super::body_error::body_error;
use super::media_type::{is_json_content_type, media_type_is};
use super::Request;
use crate::error::Error;
use bytes::Bytes;
use serde::de::DeserializeOwned;

impl Request {
    /// Declared body length, `None` for a chunked body.
    ///
    /// ```
    /// use peregrine::{post, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", post(|req: Request| async move { format!("{:?}", req.content_length()) }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body("hello").send().await.text(), "Some(5)");
    /// let chunked = client.post("/").header("transfer-encoding", "chunked").body("5\r\nhello\r\n0\r\n\r\n");
    /// assert_eq!(chunked.send().await.text(), "None");
    /// # });
    /// ```
    pub fn content_length(&self) -> Option<u64> {
        self.inner.content_length()
    }

    /// The whole body, up to the request's body limit ([`Request::body_limit`]: the route's
    /// or the application's, default 1 MiB). 413 past the limit, 400
    /// for broken framing, 408 if the client stalls. A body sent with `Content-Encoding: gzip`,
    /// `deflate` or `br` is decoded, the decoded size held to the same limit (see
    /// [`App::decode_request_bodies`](crate::App::decode_request_bodies)).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn size(mut req: Request) -> Result<String, Error> {
    ///     Ok(req.bytes().await?.len().to_string())
    /// }
    /// let client = App::new().body_limit(8).route("/", post(size)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body(&b"\x00\x01\x02"[..]).send().await.text(), "3");
    /// assert_eq!(client.post("/").body("0123456789").send().await.status(), 413);
    /// # });
    /// ```
    pub async fn bytes(&mut self) -> Result<Bytes, Error> {
        let coding = if self.ctx.decode_bodies {
            crate::decode::coding_of(self.header_bytes("content-encoding"))?
        } else {
            None
        };
        // The engine holds the body (compressed, as sent) to its limit, counting what the raw
        // stream already handed out.
        let raw = self
            .inner
            .body_mut()
            .to_bytes(usize::MAX)
            .await
            .map_err(body_error)?;
        match coding {
            None => Ok(raw),
            Some(c) => {
                let limit = usize::try_from(self.body_limit()).unwrap_or(usize::MAX);
                crate::decode::decode(c, &raw, limit)
            }
        }
    }

    /// The body limit for this request, in bytes: the one [`Request::bytes`], `json`, `form`,
    /// `multipart` and the raw [`Request::body_mut`] stream are held to. It is the route's
    /// ([`MethodRouter::body_limit`](crate::MethodRouter::body_limit)) if it has one, else the
    /// application's ([`App::body_limit`](crate::App::body_limit)).
    ///
    /// ```
    /// use peregrine::{post, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", post(|req: Request| async move { req.body_limit().to_string() }))
    ///     .route("/big", post(|req: Request| async move { req.body_limit().to_string() }).body_limit(1 << 30))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").send().await.text(), "1048576"); // the default, 1 MiB
    /// assert_eq!(client.post("/big").send().await.text(), "1073741824");
    /// # });
    /// ```
    pub fn body_limit(&self) -> u64 {
        self.inner.body().limit()
    }

    /// Sets this request's body limit (for middleware or a handler that decides it per request,
    /// such as a larger limit for authenticated uploaders); `u64::MAX` lifts it. Set it before
    /// the body is read: it replaces the application's and the route's for this request, and
    /// the engine holds every way of reading the body to it.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{Request, Response};
    /// struct TrustedUploads;
    /// impl Hook for TrustedUploads {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         if req.header("x-uploader-token").is_some() {
    ///             req.set_body_limit(1 << 30);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn set_body_limit(&mut self, bytes: u64) {
        self.inner.body_mut().set_limit(bytes);
    }

    /// The whole body, failing with 413 past `limit` bytes: [`Request::set_body_limit`] then
    /// [`Request::bytes`], for a handler that knows its own limit.
    ///
    /// ```
    /// # use peregrine::{Error, Request};
    /// async fn upload(mut req: Request) -> Result<String, Error> {
    ///     let data = req.bytes_limited(64 * 1024).await?;
    ///     Ok(format!("{} bytes", data.len()))
    /// }
    /// # let _ = upload;
    /// ```
    pub async fn bytes_limited(&mut self, limit: u64) -> Result<Bytes, Error> {
        self.set_body_limit(limit);
        self.bytes().await
    }

    /// The body as UTF-8 text (400 if it is not UTF-8).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn shout(mut req: Request) -> Result<String, Error> {
    ///     Ok(req.text().await?.to_uppercase())
    /// }
    /// let client = App::new().route("/", post(shout)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body("hi").send().await.text(), "HI");
    /// assert_eq!(client.post("/").body(&b"\xff"[..]).send().await.status(), 400); // not UTF-8
    /// # });
    /// ```
    pub async fn text(&mut self) -> Result<String, Error> {
        let b = self.bytes().await?;
        String::from_utf8(b.into())
            .map_err(|_| Error::bad_request().with_detail("request body is not valid UTF-8"))
    }

    /// The body parsed as JSON into `T`. 415 unless the content type is `application/json` or
    /// `application/*+json`; 400 for malformed JSON or JSON of the wrong shape; 413 past the
    /// body limit.
    ///
    /// ```
    /// # use peregrine::{Error, Json, Request};
    /// #[derive(serde::Deserialize, serde::Serialize)]
    /// struct NewUser { name: String, age: u8 }
    /// async fn create(mut req: Request) -> Result<(u16, Json<NewUser>), Error> {
    ///     let user: NewUser = req.json().await?;
    ///     Ok((201, Json(user)))
    /// }
    /// # let _ = create;
    /// ```
    pub async fn json<T: DeserializeOwned>(&mut self) -> Result<T, Error> {
        if !is_json_content_type(self.header_bytes("content-type")) {
            return Err(Error::new(415).with_detail("expected content type application/json"));
        }
        let body = self.bytes().await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::bad_request().with_detail(format!("invalid JSON body: {e}")))
    }

    /// The body parsed as `application/x-www-form-urlencoded` into `T`. 415 for another
    /// content type, 400 if malformed, 413 past the body limit.
    ///
    /// ```
    /// # use peregrine::{Error, Request};
    /// #[derive(serde::Deserialize)]
    /// struct Login { user: String, password: String }
    /// async fn login(mut req: Request) -> Result<String, Error> {
    ///     let form: Login = req.form().await?;
    ///     Ok(format!("hello {}", form.user))
    /// }
    /// # let _ = login;
    /// ```
    pub async fn form<T: DeserializeOwned>(&mut self) -> Result<T, Error> {
        if !media_type_is(
            self.header_bytes("content-type"),
            "application/x-www-form-urlencoded",
        ) {
            return Err(Error::new(415)
                .with_detail("expected content type application/x-www-form-urlencoded"));
        }
        let body = self.bytes().await?;
        serde_urlencoded::from_bytes(&body)
            .map_err(|e| Error::bad_request().with_detail(format!("invalid form body: {e}")))
    }

    /// The raw body, to read piece by piece (streaming uploads): as sent (not decoded), held
    /// to the request's [body limit](Request::body_limit) like every other way of reading the
    /// body (413 problem document past it; see [`BodyStream`](crate::BodyStream)). A route
    /// taking larger uploads raises its own limit with
    /// [`MethodRouter::body_limit`](crate::MethodRouter::body_limit) or
    /// [`MethodRouter::no_body_limit`](crate::MethodRouter::no_body_limit).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// /// Counts the body's lines without holding it in memory.
    /// async fn count_lines(mut req: Request) -> Result<String, Error> {
    ///     let mut body = req.body_mut();
    ///     let mut lines = 0;
    ///     while let Some(piece) = body.chunk().await? {
    ///         lines += piece.iter().filter(|&&b| b == b'\n').count();
    ///     }
    ///     Ok(lines.to_string())
    /// }
    /// let client = App::new().body_limit(16).route("/", post(count_lines)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body("a\nb\nc\n").send().await.text(), "3");
    /// assert_eq!(client.post("/").body("x".repeat(17)).send().await.status(), 413);
    /// # });
    /// ```
    pub fn body_mut(&mut self) -> crate::body::BodyStream<'_> {
        crate::body::BodyStream {
            body: self.inner.body_mut(),
        }
    }
}
