//! An in-process test client: requests go through the whole application (routing, layers,
//! handlers, error answers) without a socket.

use crate::app::{App, AppService};
use crate::header::IntoHeaderValue;
use bytes::Bytes;
use peregrine_server::{Response, ResponseBody, Service};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::rc::Rc;

/// Sends requests to an application in memory. Made by [`App::test`].
///
/// Each request is built as the HTTP/1.1 bytes a client would send and parsed by the engine's
/// strict parser (so a malformed test request fails loudly), then answered by the compiled
/// application on a [`LocalSet`](tokio::task::LocalSet) owned by the client, as a worker
/// would: handlers may use `spawn_local`, per-worker state
/// ([`App::on_worker_start`](crate::App::on_worker_start)) is built on first use, and a
/// streamed body is read to its end before `send` returns. Use it from `#[tokio::test]`.
///
/// What it does not show: the headers the engine adds on the wire (`date`, `content-length`,
/// `transfer-encoding`, `connection`), and the engine's own limits; test those with a socket.
///
/// ```
/// use peregrine::{get, post, App, Error, Json, Request, StatusCode};
/// use serde_json::{json, Value};
///
/// async fn create(mut req: Request) -> Result<(StatusCode, Json<Value>), Error> {
///     let mut todo: Value = req.json().await?;
///     todo["id"] = json!(1);
///     Ok((StatusCode::CREATED, Json(todo)))
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let client = App::new()
///     .route("/todos", post(create))
///     .route("/spawn", get(|_req: Request| async {
///         tokio::task::spawn_local(async { "from a local task" }).await.unwrap()
///     }))
///     .test();
///
/// let res = client.post("/todos").json(&json!({"title": "fly"})).send().await;
/// assert_eq!(res.status(), StatusCode::CREATED);
/// assert_eq!(res.json::<Value>()["id"], 1);
///
/// let res = client.post("/todos").header("content-type", "text/plain").body("x").send().await;
/// assert_eq!(res.status(), 415);
/// assert_eq!(res.header("content-type"), Some("application/problem+json"));
///
/// assert_eq!(client.get("/spawn").send().await.text(), "from a local task");
/// # });
/// ```
pub struct TestClient {
    service: AppService,
    /// Where `spawn_local` lands. Workers run on a `LocalRuntime` instead (no `LocalSet`), but
    /// this client runs inside the caller's runtime, usually `#[tokio::test]`'s plain one, where
    /// only a `LocalSet` can take local tasks.
    local: Rc<tokio::task::LocalSet>,
    peer: SocketAddr,
}

impl App {
    /// Compiles the application into a [`TestClient`] (no socket, no worker threads).
    ///
    /// # Panics
    /// If the application does not build (route conflict, missing state): the message says
    /// why, as [`App::try_into_service`] would.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/health", get(|_r: Request| async { "ok" })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/health").send().await.text(), "ok");
    /// assert_eq!(client.get("/nope").send().await.status(), 404);
    /// # });
    /// ```
    pub fn test(self) -> TestClient {
        TestClient {
            service: self.into_service(),
            local: Rc::new(tokio::task::LocalSet::new()),
            peer: SocketAddr::from(([127, 0, 0, 1], 40000)),
        }
    }
}

macro_rules! method_builders {
    ($($name:ident => $method:expr;)*) => {
        $(
            #[doc = concat!("A `", $method, "` request to `target` (path and query).")]
            #[doc = ""]
            #[doc = "```"]
            #[doc = "use peregrine::{any, App, Request};"]
            #[doc = ""]
            #[doc = "let client = App::new()"]
            #[doc = "    .route(\"/\", any(|req: Request| async move { ([(\"x-method\", req.method().to_owned())], \"\") }))"]
            #[doc = "    .test();"]
            #[doc = "# tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {"]
            #[doc = concat!("let res = client.", stringify!($name), "(\"/\").send().await;")]
            #[doc = concat!("assert_eq!(res.header(\"x-method\"), Some(\"", $method, "\"));")]
            #[doc = "# });"]
            #[doc = "```"]
            pub fn $name(&self, target: &str) -> TestRequest<'_> {
                self.request($method, target)
            }
        )*
    };
}

impl TestClient {
    /// The peer address handlers see ([`Request::peer_addr`](crate::Request::peer_addr));
    /// `127.0.0.1:40000` by default.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/ip", get(|req: Request| async move { req.peer_addr().to_string() }))
    ///     .test()
    ///     .with_peer("[2001:db8::5]:61000".parse().unwrap());
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/ip").send().await.text(), "[2001:db8::5]:61000");
    /// # });
    /// ```
    pub fn with_peer(mut self, peer: SocketAddr) -> Self {
        self.peer = peer;
        self
    }

    /// A request with any method (`"PROPFIND"`, ...) to `target` (path and query).
    ///
    /// ```
    /// use peregrine::{on, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/dav/{*path}", on("PROPFIND", |_r: Request| async { "<multistatus/>" }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.request("PROPFIND", "/dav/notes").send().await.text(), "<multistatus/>");
    /// assert_eq!(client.request("GET", "/dav/notes").send().await.status(), 405);
    /// # });
    /// ```
    pub fn request(&self, method: &str, target: &str) -> TestRequest<'_> {
        TestRequest {
            client: self,
            method: method.to_owned(),
            target: target.to_owned(),
            headers: Vec::new(),
            body: None,
        }
    }

    method_builders! {
        get => "GET";
        head => "HEAD";
        post => "POST";
        put => "PUT";
        patch => "PATCH";
        delete => "DELETE";
        options => "OPTIONS";
    }
}

/// A request being built; [`TestRequest::send`] answers it.
///
/// ```
/// use peregrine::{put, App, Error, Request};
///
/// async fn rename(mut req: Request) -> Result<String, Error> {
///     let id: u32 = req.param("id")?;
///     let token = req.header("authorization").unwrap_or("-").to_owned();
///     Ok(format!("{id} -> {} ({token})", req.text().await?))
/// }
///
/// let client = App::new().route("/files/{id}", put(rename)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client
///     .put("/files/3?notify=1")
///     .header("authorization", "Bearer t0k")
///     .body("report.pdf")
///     .send()
///     .await;
/// assert_eq!(res.text(), "3 -> report.pdf (Bearer t0k)");
/// # });
/// ```
#[must_use = "a test request does nothing until `send().await`"]
pub struct TestRequest<'a> {
    client: &'a TestClient,
    method: String,
    target: String,
    headers: Vec<(Cow<'static, str>, Cow<'static, [u8]>)>,
    body: Option<Vec<u8>>,
}

impl TestRequest<'_> {
    /// Adds a header (`Host: test` is sent unless one is given).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { req.header("accept-language").unwrap_or("-").to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").header("Accept-Language", "fr").send().await.text(), "fr");
    /// # });
    /// ```
    pub fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl IntoHeaderValue,
    ) -> Self {
        self.headers.push((name.into(), value.into_header_value()));
        self
    }

    /// A JSON body (`content-type: application/json` unless set).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn echo(mut req: Request) -> Result<String, Error> {
    ///     let ct = req.header("content-type").unwrap_or("-").to_owned();
    ///     Ok(format!("{ct} {}", req.text().await?))
    /// }
    /// let client = App::new().route("/", post(echo)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.post("/").json(&serde_json::json!({"title": "fly"})).send().await;
    /// assert_eq!(res.text(), r#"application/json {"title":"fly"}"#);
    /// # });
    /// ```
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        let body = serde_json::to_vec(value).expect("test body serialises to JSON");
        self.set_default_type("application/json");
        self.body = Some(body);
        self
    }

    /// A form body (`content-type: application/x-www-form-urlencoded` unless set).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Login { user: String, remember: bool }
    ///
    /// async fn login(mut req: Request) -> Result<String, Error> {
    ///     let f: Login = req.form().await?;
    ///     Ok(format!("{} remember={}", f.user, f.remember))
    /// }
    ///
    /// let client = App::new().route("/login", post(login)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.post("/login").form(&[("user", "ada lovelace"), ("remember", "true")]).send().await;
    /// assert_eq!(res.text(), "ada lovelace remember=true");
    /// # });
    /// ```
    pub fn form<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        let body = serde_urlencoded::to_string(value).expect("test body serialises as a form");
        self.set_default_type("application/x-www-form-urlencoded");
        self.body = Some(body.into_bytes());
        self
    }

    /// A raw body (no content type is added).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn echo(mut req: Request) -> Result<String, Error> {
    ///     let ct = req.header("content-type").unwrap_or("none").to_owned();
    ///     Ok(format!("{ct} {}", req.text().await?))
    /// }
    /// let client = App::new().route("/", post(echo)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").body("raw bytes").send().await.text(), "none raw bytes");
    /// # });
    /// ```
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into().to_vec());
        self
    }

    fn set_default_type(&mut self, ct: &'static str) {
        if !self.has_header("content-type") {
            self.headers
                .push((Cow::Borrowed("content-type"), Cow::Borrowed(ct.as_bytes())));
        }
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// The request as a client would write it.
    fn to_bytes(&self) -> Vec<u8> {
        let body = self.body.as_deref().unwrap_or_default();
        let mut raw = Vec::with_capacity(128 + body.len());
        raw.extend_from_slice(self.method.as_bytes());
        raw.push(b' ');
        raw.extend_from_slice(self.target.as_bytes());
        raw.extend_from_slice(b" HTTP/1.1\r\n");
        if !self.has_header("host") {
            raw.extend_from_slice(b"host: test\r\n");
        }
        for (n, v) in &self.headers {
            raw.extend_from_slice(n.as_bytes());
            raw.extend_from_slice(b": ");
            raw.extend_from_slice(v);
            raw.extend_from_slice(b"\r\n");
        }
        let framed = self.has_header("content-length") || self.has_header("transfer-encoding");
        if !framed && (self.body.is_some() || matches!(&*self.method, "POST" | "PUT" | "PATCH")) {
            raw.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        raw.extend_from_slice(body);
        raw
    }

    /// Sends the request through the application and reads the whole answer.
    ///
    /// # Panics
    /// If the request is not valid HTTP/1.1 (a bad header name or value, a target with
    /// spaces): a test bug, reported with the parser's reason.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/users/{id}", get(|_r: Request| async { "found" })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/users/1").send().await;
    /// assert_eq!((res.status(), res.text()), (200, "found"));
    /// assert_eq!(client.delete("/users/1").send().await.status(), 405);
    /// # });
    /// ```
    pub async fn send(self) -> TestResponse {
        let raw = self.to_bytes();
        let req =
            peregrine_server::Request::from_bytes(&raw, self.client.peer).unwrap_or_else(|e| {
                panic!(
                    "test request {} {} is not valid HTTP/1.1: {e:?}",
                    self.method, self.target
                )
            });
        let head = self.method == "HEAD";
        let service = self.client.service.clone();
        self.client
            .local
            .run_until(async move {
                let res = service.call(req).await;
                TestResponse::read(res, head).await
            })
            .await
    }
}

/// A whole answer: status, headers (those the application set) and body.
///
/// ```
/// use peregrine::{get, App, Request};
///
/// let client = App::new()
///     .route("/", get(|_r: Request| async { (201, [("x-id", "9")], "made") }))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/").send().await;
/// assert_eq!(res.status(), 201);
/// assert_eq!(res.header("x-id"), Some("9"));
/// assert_eq!(res.text(), "made");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct TestResponse {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Bytes,
    /// The body stream failed after these bytes (the engine would abort the connection).
    aborted: Option<String>,
    streamed: bool,
}

/// Collects a streamed body, and the error that ended it early, if any.
async fn read_stream(
    mut s: std::pin::Pin<Box<dyn futures_core::Stream<Item = std::io::Result<Bytes>>>>,
) -> (Bytes, Option<String>) {
    let mut acc = Vec::new();
    let mut aborted = None;
    while let Some(chunk) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
        match chunk {
            Ok(b) => acc.extend_from_slice(&b),
            Err(e) => {
                aborted = Some(e.to_string());
                break;
            }
        }
    }
    (Bytes::from(acc), aborted)
}

impl TestResponse {
    async fn read(res: Response, head: bool) -> TestResponse {
        let headers = res
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_vec()))
            .collect();
        let streamed = matches!(res.body, ResponseBody::Stream(_));
        let (body, aborted) = match res.body {
            // The test client has no connection to switch: the 101 is seen without a body.
            ResponseBody::Empty | ResponseBody::Upgrade(_) => (Bytes::new(), None),
            ResponseBody::Full(b) => (b, None),
            ResponseBody::Static(b) => (Bytes::from_static(b), None),
            ResponseBody::Stream(s) => read_stream(s).await,
            ResponseBody::SizedStream { len, stream } => {
                let (b, mut aborted) = read_stream(stream).await;
                if aborted.is_none() && b.len() as u64 != len {
                    // The engine closes the connection on a length mismatch.
                    aborted = Some(format!("{} bytes of an announced {len}", b.len()));
                }
                (b, aborted)
            }
            ResponseBody::File { file, offset, len } => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; len as usize];
                match file.read_exact_at(&mut buf, offset) {
                    Ok(()) => (Bytes::from(buf), None),
                    Err(e) => (Bytes::new(), Some(e.to_string())),
                }
            }
        };
        TestResponse {
            status: res.status,
            headers,
            // The engine sends HEAD answers without their body.
            body: if head { Bytes::new() } else { body },
            aborted,
            streamed,
        }
    }

    /// Whether the body was a stream (the engine sends it chunked) rather than a full body
    /// (sent with `Content-Length`).
    ///
    /// ```
    /// use peregrine::sse::{Event, Sse};
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/full", get(|_r: Request| async { "all at once" }))
    ///     .route("/events", get(|_r: Request| async {
    ///         Sse::new(futures_util::stream::iter([Event::data("one")])).keep_alive(None)
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert!(!client.get("/full").send().await.is_streamed());
    /// assert!(client.get("/events").send().await.is_streamed());
    /// # });
    /// ```
    pub fn is_streamed(&self) -> bool {
        self.streamed
    }

    /// The status code.
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    ///
    /// let client = App::new()
    ///     .route("/teapot", get(|_r: Request| async { Err::<(), _>(Error::new(418)) }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/teapot").send().await.status(), 418);
    /// # });
    /// ```
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The status as a [`StatusCode`](crate::StatusCode) (with its name in assertion
    /// messages: `404 Not Found`); it compares with plain numbers too.
    ///
    /// ```
    /// use peregrine::{get, App, Request, StatusCode};
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { "home" })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.post("/").send().await;
    /// assert_eq!(res.status_code(), StatusCode::METHOD_NOT_ALLOWED);
    /// assert_eq!(res.status_code(), 405);
    /// assert!(res.status_code().is_client_error());
    /// # });
    /// ```
    pub fn status_code(&self) -> crate::StatusCode {
        crate::StatusCode::from_u16(self.status).unwrap_or(crate::StatusCode::INTERNAL_SERVER_ERROR)
    }
    /// First value of header `name` (case-insensitive) as text; `None` if absent or not UTF-8.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { "hi" })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").send().await;
    /// assert_eq!(res.header("Content-Type"), Some("text/plain; charset=utf-8"));
    /// assert_eq!(res.header("x-missing"), None);
    /// # });
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }
    /// First value of header `name` (case-insensitive), byte-exact.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { ([("x-raw", &b"caf\xe9"[..])], "") }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").send().await;
    /// assert_eq!(res.header_bytes("x-raw"), Some(&b"caf\xe9"[..]));
    /// assert_eq!(res.header("x-raw"), None); // not UTF-8
    /// # });
    /// ```
    pub fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| &v[..])
    }
    /// Every value of header `name`, in order.
    ///
    /// ```
    /// use peregrine::cookie::SetCookie;
    /// use peregrine::{get, App, Error, Request, Response};
    ///
    /// async fn login(_req: Request) -> Result<Response, Error> {
    ///     Ok(Response::new(204)
    ///         .with_header("set-cookie", SetCookie::new("sid", "s1").to_header()?)
    ///         .with_header("set-cookie", SetCookie::new("theme", "dark").to_header()?))
    /// }
    ///
    /// let client = App::new().route("/login", get(login)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/login").send().await.header_all("set-cookie"), ["sid=s1", "theme=dark"]);
    /// # });
    /// ```
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .collect()
    }
    /// All headers the application set, in order (not those the engine adds on the wire,
    /// such as `date` and `content-length`).
    ///
    /// ```
    /// use peregrine::{get, App, Json, Request};
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { Json(serde_json::json!({"ok": true})) })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").send().await;
    /// let names: Vec<&str> = res.headers().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["content-type"]);
    /// # });
    /// ```
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.headers.iter().map(|(n, v)| (n.as_str(), &v[..]))
    }
    /// The body.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/bin", get(|_r: Request| async { vec![0u8, 159, 255] })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(&client.get("/bin").send().await.bytes()[..], [0, 159, 255]);
    /// # });
    /// ```
    pub fn bytes(&self) -> &Bytes {
        &self.body
    }
    /// The body as text.
    ///
    /// # Panics
    /// If it is not UTF-8.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { String::from("héllo") })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "héllo");
    /// # });
    /// ```
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("response body is UTF-8")
    }
    /// The body parsed as JSON.
    ///
    /// # Panics
    /// If it is not JSON of that shape (the message shows the body).
    ///
    /// ```
    /// use peregrine::{get, App, Json, Request};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Todo { id: u32, title: String }
    ///
    /// let client = App::new()
    ///     .route("/todos/1", get(|_r: Request| async { Json(Todo { id: 1, title: "fly".into() }) }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let todo: Todo = client.get("/todos/1").send().await.json();
    /// assert_eq!(todo, Todo { id: 1, title: "fly".into() });
    /// # });
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body is not the expected JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    /// The error of a streamed body that ended with one (the client would see a truncated
    /// response), if any.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use peregrine::{get, App, Request, StreamBody};
    ///
    /// async fn export(_req: Request) -> StreamBody {
    ///     StreamBody::new(futures_util::stream::iter([
    ///         Ok(Bytes::from_static(b"row 1\n")),
    ///         Err(std::io::Error::other("database went away")),
    ///     ]))
    /// }
    ///
    /// let client = App::new().route("/export", get(export)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/export").send().await;
    /// assert_eq!(res.text(), "row 1\n"); // what the client got before the cut
    /// assert!(res.stream_error().unwrap().contains("database went away"));
    /// # });
    /// ```
    pub fn stream_error(&self) -> Option<&str> {
        self.aborted.as_deref()
    }
}
