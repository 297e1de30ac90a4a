// Over 600 lines: ServeDir's options and its request flow (open, validators, ranges, encodings, index, fallback) read top to bottom; helpers live in open/range/conditional.
//! Static files for real assets: content types, validators and conditional requests, `Range`
//! (single and `multipart/byteranges`, `If-Range`, 416), precompressed `.br`/`.gz` siblings,
//! `Cache-Control` (immutable for hashed names), directory index, SPA fallback.
//!
//! What is refused, and why, is in `docs/security.md` ("Static files").
//!
//! ```
//! use peregrine::fs::ServeDir;
//! use peregrine::App;
//!
//! let root = tempfile::tempdir()?;
//! std::fs::write(root.path().join("notes.txt"), "0123456789")?;
//! let client = App::new().merge(ServeDir::new(root.path()).router("/files")).test();
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let res = client.get("/files/notes.txt").send().await;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.header("content-type"), Some("text/plain; charset=utf-8"));
//! assert_eq!(res.text(), "0123456789");
//!
//! // A client that has the file already gets a 304 for its ETag.
//! let etag = res.header("etag").unwrap().to_owned();
//! let again = client.get("/files/notes.txt").header("if-none-match", etag).send().await;
//! assert_eq!(again.status(), 304);
//!
//! // A range of it: 206 with `Content-Range`.
//! let part = client.get("/files/notes.txt").header("range", "bytes=2-4").send().await;
//! assert_eq!(part.status(), 206);
//! assert_eq!(part.header("content-range"), Some("bytes 2-4/10"));
//! assert_eq!(part.text(), "234");
//!
//! // Nothing outside the root: a `..` segment is refused before routing, a dotfile is not found.
//! assert_eq!(client.get("/files/%2e%2e/etc/passwd").send().await.status(), 400);
//! assert_eq!(client.get("/files/.env").send().await.status(), 404);
//! # });
//! # Ok::<(), std::io::Error>(())
//! ```

mod conditional;
mod open;
mod range;

use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::middleware::compression::{negotiate, Coding};
use crate::request::Request;
use crate::response::IntoResponse;
use crate::router::{get, Router};
use bytes::Bytes;
use conditional::{Conditions, Precondition};
use open::{Miss, Opened};
use peregrine_server::{Method, Response, ResponseBody};
use range::{ByteRange, Ranges};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conditional::validators;

/// Default for [`ServeDir::max_in_memory`]: bodies up to this size are read whole and sent with
/// `Content-Length`; larger ones are sent from the file (`sendfile(2)` on plain TCP), also
/// with `Content-Length`.
pub const DEFAULT_MAX_IN_MEMORY: u64 = 8 * 1024 * 1024;
/// `Cache-Control` for names recognised as content-hashed (see [`ServeDir::immutable_hashed`]).
const IMMUTABLE: &[u8] = b"public, max-age=31536000, immutable";

/// Serves files under a directory, mounted on a route with a catch-all parameter.
///
/// * **Paths**: the (already normalised, see [`crate::path`]) catch-all is split into segments
///   exactly as routed; each must decode to one plain name. `..`, `\`, NUL, encoded separators
///   and names starting with `.` (unless [`ServeDir::hidden`]) are 404, and the opened file must
///   lie under the root once symlinks are followed, checked on the opened descriptor (no
///   check-then-open race). FIFOs, devices and sockets are never read.
/// * **Headers**: `Content-Type` from the extension (`mime_guess`, `charset=utf-8` for text),
///   strong `ETag`, `Last-Modified`, `Accept-Ranges: bytes`, `Content-Length` for every body, range
///   and HEAD answer; bodies past [`ServeDir::max_in_memory`] go out with `sendfile(2)` on plain
///   TCP.
/// * **Conditional requests** in the order of RFC 9110 §13.2.2: `If-Match` /
///   `If-Unmodified-Since` (412), `If-None-Match` / `If-Modified-Since` (304), `If-Range`.
/// * **Range** (GET): one range → 206 with `Content-Range`; several → `multipart/byteranges`;
///   none satisfiable → 416 with `Content-Range: bytes */len`; malformed or more than 16 ranges
///   → the whole file (a server may ignore `Range`).
/// * **Directories**: `dir/` answers with its `index.html`; `dir` redirects (301) to `dir/` so
///   that relative links in the index work. [`ServeDir::router`] also routes the bare prefix.
///
/// ```
/// use peregrine::{App, get};
/// use peregrine::fs::ServeDir;
/// let assets = ServeDir::new("public")
///     .precompressed_br()
///     .precompressed_gzip()
///     .immutable_hashed(true)
///     .cache_control("public, max-age=300")
///     .spa_fallback("index.html");
/// // GET /static/ (index), /static/app.3f2a9c1b.js, /static/some/client/route (index.html) ...
/// let app = App::new().merge(assets.router("/static"));
/// // or, for the catch-all alone:
/// let app2 = App::new().route("/files/{*path}", get(ServeDir::new("files")));
/// # let _ = (app, app2);
/// ```
#[derive(Debug, Clone)]
pub struct ServeDir {
    inner: Arc<DirConfig>,
}

#[derive(Debug, Clone)]
struct DirConfig {
    root: PathBuf,
    param: String,
    index: Option<String>,
    hidden: bool,
    spa_fallback: Option<PathBuf>,
    files: FileOptions,
}

/// What applies to every file served (by [`ServeDir`] or [`ServeFile`]).
#[derive(Debug, Clone)]
struct FileOptions {
    precompressed_br: bool,
    precompressed_gzip: bool,
    cache_control: Option<Cow<'static, [u8]>>,
    immutable_hashed: bool,
    max_in_memory: u64,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            precompressed_br: false,
            precompressed_gzip: false,
            cache_control: None,
            immutable_hashed: false,
            max_in_memory: DEFAULT_MAX_IN_MEMORY,
        }
    }
}

impl ServeDir {
    /// Serves `root` through the route parameter named `path` (route it as `{*path}`, or use
    /// [`ServeDir::router`]).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::{get, App};
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::create_dir(root.path().join("css"))?;
    /// std::fs::write(root.path().join("css/site.css"), "body{margin:0}")?;
    /// let client = App::new().route("/assets/{*path}", get(ServeDir::new(root.path()))).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/assets/css/site.css").send().await;
    /// assert_eq!(res.header("content-type"), Some("text/css; charset=utf-8"));
    /// assert_eq!(res.text(), "body{margin:0}");
    /// assert_eq!(client.get("/assets/css/missing.css").send().await.status(), 404);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ServeDir {
            inner: Arc::new(DirConfig {
                root: root.into(),
                param: "path".into(),
                index: Some("index.html".into()),
                hidden: false,
                spa_fallback: None,
                files: FileOptions::default(),
            }),
        }
    }
    fn cfg(&mut self) -> &mut DirConfig {
        Arc::make_mut(&mut self.inner)
    }
    /// Uses another catch-all parameter name (`/assets/{*file}` → `"file"`).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::{get, App};
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("logo.svg"), "<svg/>")?;
    /// let client = App::new().route("/img/{*file}", get(ServeDir::new(root.path()).param("file"))).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/img/logo.svg").send().await.header("content-type"), Some("image/svg+xml; charset=utf-8"));
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn param(mut self, name: &str) -> Self {
        self.cfg().param = name.into();
        self
    }
    /// Index file for directories (`index.html` by default; `None` to answer directories with
    /// 404).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::create_dir(root.path().join("docs"))?;
    /// std::fs::write(root.path().join("docs/README.txt"), "read me")?;
    /// let client = App::new()
    ///     .merge(ServeDir::new(root.path()).index(Some("README.txt")).router("/site"))
    ///     .merge(ServeDir::new(root.path()).index(None).router("/raw"))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/site/docs/").send().await.text(), "read me");
    /// // Without the slash, a redirect to it (so relative links in the index resolve).
    /// assert_eq!(client.get("/site/docs").send().await.header("location"), Some("/site/docs/"));
    /// assert_eq!(client.get("/raw/docs/").send().await.status(), 404);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn index(mut self, file: Option<&str>) -> Self {
        self.cfg().index = file.map(Into::into);
        self
    }
    /// Serves names starting with `.` (`.env`, `.git/…`, `.well-known/…`); off by default, so
    /// that a stray dotfile in the root is not published.
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::create_dir(root.path().join(".well-known"))?;
    /// std::fs::write(root.path().join(".well-known/security.txt"), "Contact: mailto:sec@example.com")?;
    /// let client = App::new()
    ///     .merge(ServeDir::new(root.path()).router("/default"))
    ///     .merge(ServeDir::new(root.path()).hidden(true).router("/public"))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/default/.well-known/security.txt").send().await.status(), 404);
    /// assert_eq!(client.get("/public/.well-known/security.txt").send().await.status(), 200);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn hidden(mut self, serve: bool) -> Self {
        self.cfg().hidden = serve;
        self
    }
    /// Single-page applications: a `GET`/`HEAD` for a missing file, from a client that accepts
    /// `text/html` (a navigation, not a script or image fetch), answers with `file` (relative to
    /// the root, usually `index.html`) and `Cache-Control: no-cache`. Refused paths stay 404/400.
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("index.html"), "<main id=app></main>")?;
    /// let app = App::new().merge(ServeDir::new(root.path()).spa_fallback("index.html").router("/app"));
    /// let client = app.test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// // A browser navigating to a client-side route gets the application's page.
    /// let page = client.get("/app/settings/profile").header("accept", "text/html").send().await;
    /// assert_eq!(page.status(), 200);
    /// assert_eq!(page.text(), "<main id=app></main>");
    /// assert_eq!(page.header("cache-control"), Some("no-cache"));
    /// // A script or image that is missing is still a 404.
    /// let script = client.get("/app/missing.js").header("accept", "*/*").send().await;
    /// assert_eq!(script.status(), 404);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spa_fallback(mut self, file: &str) -> Self {
        self.cfg().spa_fallback = Some(file.into());
        self
    }
    /// Serves `name.br` instead of `name` when the client accepts brotli and the sibling
    /// exists (and adds `Vary: Accept-Encoding` to every answer).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("app.js"), "console.log(1)")?;
    /// std::fs::write(root.path().join("app.js.br"), b"(brotli bytes made at build time)")?;
    /// let client = App::new().merge(ServeDir::new(root.path()).precompressed_br().router("/js")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/js/app.js").header("accept-encoding", "gzip, br").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("br"));
    /// assert_eq!(res.header("content-type"), Some("text/javascript; charset=utf-8"));
    /// assert_eq!(res.header("vary"), Some("Accept-Encoding"));
    /// // A client without brotli gets the file itself.
    /// let plain = client.get("/js/app.js").send().await;
    /// assert_eq!(plain.header("content-encoding"), None);
    /// assert_eq!(plain.text(), "console.log(1)");
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn precompressed_br(mut self) -> Self {
        self.cfg().files.precompressed_br = true;
        self
    }
    /// Serves `name.gz` when the client accepts gzip (after `.br`, if both are enabled and
    /// equally acceptable).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("data.json"), "[1,2,3]")?;
    /// std::fs::write(root.path().join("data.json.gz"), b"(gzip bytes)")?;
    /// let client = App::new().merge(ServeDir::new(root.path()).precompressed_gzip().router("/d")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/d/data.json").header("accept-encoding", "gzip").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("gzip"));
    /// assert_eq!(res.header("content-type"), Some("application/json; charset=utf-8"));
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn precompressed_gzip(mut self) -> Self {
        self.cfg().files.precompressed_gzip = true;
        self
    }
    /// `Cache-Control` value for every file served (304s included).
    ///
    /// # Panics
    /// If `value` contains a control character.
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("report.pdf"), b"%PDF-1.7")?;
    /// let dir = ServeDir::new(root.path()).cache_control("public, max-age=300");
    /// let client = App::new().merge(dir.router("/reports")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/reports/report.pdf").send().await;
    /// assert_eq!(res.header("cache-control"), Some("public, max-age=300"));
    /// assert_eq!(res.header("content-type"), Some("application/pdf"));
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cache_control(mut self, value: &str) -> Self {
        self.cfg().files.cache_control = Some(checked_value(value));
        self
    }
    /// Names that carry a content hash (`app.3f2a9c1b.js`, `index-BxQ2ab3c.css`: the last
    /// `.`/`-`/`_`-separated part of the stem has 8–64 letters and digits, at least one of
    /// each) get `Cache-Control: public, max-age=31536000, immutable`, overriding
    /// [`ServeDir::cache_control`].
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("app.3f2a9c1b.js"), "built")?;
    /// std::fs::write(root.path().join("robots.txt"), "User-agent: *")?;
    /// let dir = ServeDir::new(root.path()).immutable_hashed(true).cache_control("no-cache");
    /// let client = App::new().merge(dir.router("/s")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let hashed = client.get("/s/app.3f2a9c1b.js").send().await;
    /// assert_eq!(hashed.header("cache-control"), Some("public, max-age=31536000, immutable"));
    /// let plain = client.get("/s/robots.txt").send().await;
    /// assert_eq!(plain.header("cache-control"), Some("no-cache"));
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn immutable_hashed(mut self, on: bool) -> Self {
        self.cfg().files.immutable_hashed = on;
        self
    }
    /// Bodies (or ranges) up to `bytes` are read whole (and may be compressed); larger ones are
    /// sent from the file (`sendfile(2)` on plain TCP). Both carry `Content-Length`. Default [`DEFAULT_MAX_IN_MEMORY`] (8 MiB).
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("video.bin"), vec![7u8; 64 * 1024])?;
    /// // Anything past 16 KiB is sent from the file, not copied into memory first.
    /// let dir = ServeDir::new(root.path()).max_in_memory(16 * 1024);
    /// let client = App::new().merge(dir.router("/media")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/media/video.bin").send().await;
    /// assert_eq!(res.status(), 200);
    /// assert_eq!(res.bytes().len(), 64 * 1024);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_in_memory(mut self, bytes: u64) -> Self {
        self.cfg().files.max_in_memory = bytes;
        self
    }

    /// Routes that serve this directory under `prefix` (`"/static"`): `/static/{*path}` for
    /// files, `/static/` for the index, and `/static`, which redirects to `/static/`.
    ///
    /// # Panics
    /// If `prefix` does not start with `/` or ends with `/`.
    ///
    /// ```
    /// use peregrine::fs::ServeDir;
    /// use peregrine::App;
    ///
    /// let root = tempfile::tempdir()?;
    /// std::fs::write(root.path().join("index.html"), "<h1>Docs</h1>")?;
    /// let client = App::new().merge(ServeDir::new(root.path()).router("/docs")).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let moved = client.get("/docs?lang=en").send().await;
    /// assert_eq!(moved.status(), 301);
    /// assert_eq!(moved.header("location"), Some("/docs/?lang=en"));
    /// assert_eq!(client.get("/docs/").send().await.text(), "<h1>Docs</h1>");
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn router(self, prefix: &str) -> Router {
        assert!(
            prefix.starts_with('/') && !prefix.ends_with('/'),
            "prefix {prefix:?} must start with '/' and not end with '/'"
        );
        let catch_all = format!("{prefix}/{{*{}}}", self.inner.param);
        let slash = format!("{prefix}/");
        Router::new()
            .route(&catch_all, get(self.clone()))
            .route(&slash, get(self))
            .route(
                prefix,
                get(move |req: Request| {
                    let to = with_query(&format!("{}/", req.path()), req.query_string());
                    async move { moved_permanently(to) }
                }),
            )
    }
}

fn checked_value(value: &str) -> Cow<'static, [u8]> {
    assert!(
        !value.bytes().any(|b| b.is_ascii_control() && b != b'\t'),
        "header value {value:?} contains a control character"
    );
    Cow::Owned(value.as_bytes().to_vec())
}

fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

fn moved_permanently(location: String) -> Response {
    Response::new(301).with_header("location", Cow::Owned(location.into_bytes()))
}

/// Decodes and checks a routed path parameter relative to a root: `None` if it is not
/// acceptable.
///
/// The parameter is split on `/` exactly as the router split it, and each segment must decode
/// to exactly one plain file name: no empty, `.` or `..` segment (a trailing `/` excepted), and
/// no `/`, `\` or NUL inside a decoded segment. So the file named is always the one the route
/// (and the middleware on it) matched: the decoded segments are the routed ones, one for one
/// (issue 17). [`crate::path::normalize`] already refuses or merges these before routing; this
/// holds even when `ServeDir` is called some other way. Names starting with `.` are refused
/// unless `hidden`.
pub(crate) fn safe_relative(raw: &str, hidden: bool) -> Option<PathBuf> {
    let mut rel = PathBuf::new();
    let raw = raw.strip_suffix('/').unwrap_or(raw);
    if raw.is_empty() {
        return Some(rel);
    }
    for seg in raw.split('/') {
        let name = percent_encoding::percent_decode_str(seg)
            .decode_utf8()
            .ok()?;
        if name.is_empty()
            || name == "."
            || name == ".."
            || (!hidden && name.starts_with('.'))
            || name.contains(['/', '\\', '\0'])
            || !plain_name_on_this_os(&name)
        {
            return None;
        }
        rel.push(&*name);
    }
    Some(rel)
}

/// A name the OS takes as one ordinary component. On Windows, also refuses `:` (drive letters,
/// alternate data streams) and trailing dots or spaces (Windows drops them, so `x.txt.` would
/// open `x.txt` under another name).
fn plain_name_on_this_os(name: &str) -> bool {
    let one = Path::new(name).components().count() == 1
        && matches!(
            Path::new(name).components().next(),
            Some(std::path::Component::Normal(_))
        );
    if cfg!(windows) {
        one && !name.contains(':') && !name.ends_with(['.', ' '])
    } else {
        one
    }
}

/// Does `name` (a file name) look content-hashed? See [`ServeDir::immutable_hashed`].
pub(crate) fn is_hashed_name(name: &str) -> bool {
    let Some((stem, _ext)) = name.rsplit_once('.') else {
        return false;
    };
    let Some((_, token)) = stem.rsplit_once(['.', '-', '_']) else {
        return false;
    };
    (8..=64).contains(&token.len())
        && token.bytes().all(|b| b.is_ascii_alphanumeric())
        && token.bytes().any(|b| b.is_ascii_digit())
        && token.bytes().any(|b| b.is_ascii_alphabetic())
}

impl Handler for ServeDir {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let cfg = self.inner.clone();
        Box::pin(async move {
            let raw = req.param_raw(&cfg.param).unwrap_or("");
            let Some(rel) = safe_relative(raw, cfg.hidden) else {
                return Error::not_found().into_response();
            };
            // The root itself (route `/static/`) or a path ending in `/` may show an index.
            let slash = raw.is_empty() || raw.ends_with('/');
            let wants = wanted_codings(&req, &cfg.files);
            let root = cfg.root.clone();
            let index = cfg.index.clone();
            let found = blocking(move || {
                let opened = open::open_under(&root, &rel, index.as_deref(), slash)?;
                let sibling = pick_sibling(&root, &opened.path, wants);
                Ok((opened, sibling))
            })
            .await;
            match found {
                Ok((opened, sibling)) => serve(&req, opened, sibling, &cfg.files, None).await,
                Err(Miss::NeedsSlash) => {
                    moved_permanently(with_query(&format!("{}/", req.path()), req.query_string()))
                }
                Err(Miss::NotFound) => match &cfg.spa_fallback {
                    Some(f) if accepts_html(&req) => spa(&req, &cfg, f.clone()).await,
                    _ => Error::not_found().into_response(),
                },
                Err(miss) => miss_response(miss),
            }
        })
    }
}

/// The SPA fallback document, `no-cache` so a new deployment is picked up at once.
async fn spa(req: &Request, cfg: &DirConfig, file: PathBuf) -> Response {
    let root = cfg.root.clone();
    match blocking(move || open::open_under(&root, &file, None, true)).await {
        Ok(opened) => {
            let mut files = cfg.files.clone();
            files.cache_control = Some(Cow::Borrowed(&b"no-cache"[..]));
            files.immutable_hashed = false;
            serve(req, opened, None, &files, None).await
        }
        Err(miss) => miss_response(miss),
    }
}

fn accepts_html(req: &Request) -> bool {
    matches!(req.method_kind(), Method::Get | Method::Head)
        && req
            .header("accept")
            .is_some_and(|a| a.to_ascii_lowercase().contains("text/html"))
}

fn miss_response(miss: Miss) -> Response {
    match miss {
        Miss::NotFound | Miss::NeedsSlash => Error::not_found().into_response(),
        Miss::Forbidden => Error::forbidden().into_response(),
        Miss::Io(e) => Error::internal_from(e).into_response(),
    }
}

/// Runs blocking file work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Miss> + Send + 'static,
) -> Result<T, Miss> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Miss::Io(std::io::Error::other(e))),
    }
}

/// Precompressed siblings worth looking for, best first: `(coding, suffix)`.
type Wanted = [Option<(Coding, &'static str)>; 2];

fn wanted_codings(req: &Request, o: &FileOptions) -> Wanted {
    if !(o.precompressed_br || o.precompressed_gzip) {
        return [None, None];
    }
    let Some(accept) = req.header_bytes("accept-encoding") else {
        return [None, None];
    };
    let suffix = |c: Coding| {
        (
            c,
            match c {
                Coding::Brotli => ".br",
                Coding::Gzip => ".gz",
            },
        )
    };
    let first = negotiate(accept, o.precompressed_gzip, o.precompressed_br);
    // The other enabled coding, if also acceptable, in case the first has no sibling.
    let second = match first {
        Some(Coding::Brotli) => negotiate(accept, o.precompressed_gzip, false),
        Some(Coding::Gzip) => negotiate(accept, false, o.precompressed_br),
        None => None,
    };
    [first.map(suffix), second.map(suffix)]
}

fn pick_sibling(root: &Path, path: &Path, wants: Wanted) -> Option<(Coding, Opened)> {
    wants
        .into_iter()
        .flatten()
        .find_map(|(c, suffix)| open::open_sibling(root, path, suffix).map(|o| (c, o)))
}

/// Serves one fixed file (with the same conditional, `Range` and caching behaviour).
///
/// ```
/// use peregrine::{App, get};
/// use peregrine::fs::ServeFile;
/// let app = App::new().route("/favicon.ico", get(ServeFile::new("public/favicon.ico")));
/// # let _ = app;
/// ```
#[derive(Debug, Clone)]
pub struct ServeFile {
    path: Arc<PathBuf>,
    files: Arc<FileOptions>,
}

impl ServeFile {
    /// Serves `path`.
    ///
    /// ```
    /// use peregrine::fs::ServeFile;
    /// use peregrine::{get, App};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let page = dir.path().join("maintenance.html");
    /// std::fs::write(&page, "<p>Back soon</p>")?;
    /// let client = App::new().route("/", get(ServeFile::new(&page))).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").send().await;
    /// assert_eq!(res.header("content-type"), Some("text/html; charset=utf-8"));
    /// assert_eq!(res.text(), "<p>Back soon</p>");
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ServeFile {
            path: Arc::new(path.into()),
            files: Arc::new(FileOptions::default()),
        }
    }
    /// `Cache-Control` value for the file.
    ///
    /// # Panics
    /// If `value` contains a control character.
    ///
    /// ```
    /// use peregrine::fs::ServeFile;
    /// use peregrine::{get, App};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let icon = dir.path().join("favicon.ico");
    /// std::fs::write(&icon, [0u8, 0, 1, 0])?;
    /// let favicon = ServeFile::new(&icon).cache_control("public, max-age=86400");
    /// let client = App::new().route("/favicon.ico", get(favicon)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/favicon.ico").send().await;
    /// assert_eq!(res.header("cache-control"), Some("public, max-age=86400"));
    /// assert_eq!(res.bytes().as_ref(), &[0u8, 0, 1, 0][..]);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cache_control(mut self, value: &str) -> Self {
        Arc::make_mut(&mut self.files).cache_control = Some(checked_value(value));
        self
    }
}

impl Handler for ServeFile {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let path = self.path.clone();
        let files = self.files.clone();
        Box::pin(async move {
            match blocking(move || open::open_file(&path)).await {
                Ok(opened) => serve(&req, opened, None, &files, None).await,
                Err(miss) => miss_response(miss),
            }
        })
    }
}

/// Answers `req` from an opened file (or its precompressed `sibling`).
async fn serve(
    req: &Request,
    opened: Opened,
    sibling: Option<(Coding, Opened)>,
    o: &FileOptions,
    status: Option<u16>,
) -> Response {
    let type_path = opened.path.clone();
    let (coding, file) = match sibling {
        Some((c, s)) => (Some(c), s),
        None => (None, opened),
    };
    let len = file.meta.len();
    let modified = file.meta.modified().ok();
    let (mut etag, last_modified) = validators(len, modified);
    if let Some(c) = coding {
        // Distinct validators per coding: the bytes differ (RFC 9110 §8.8.3).
        etag.insert_str(
            etag.len() - 1,
            if c == Coding::Brotli { "-br" } else { "-gz" },
        );
    }

    let mut res = Response::new(status.unwrap_or(200));
    push(&mut res, "etag", etag.clone().into_bytes());
    if let Some(lm) = &last_modified {
        push(&mut res, "last-modified", lm.clone().into_bytes());
    }
    let file_name = type_path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if o.immutable_hashed && is_hashed_name(file_name) {
        res.headers
            .push((Cow::Borrowed("cache-control"), Cow::Borrowed(IMMUTABLE)));
    } else if let Some(cc) = &o.cache_control {
        res.headers
            .push((Cow::Borrowed("cache-control"), cc.clone()));
    }
    if o.precompressed_br || o.precompressed_gzip {
        res.headers
            .push((Cow::Borrowed("vary"), Cow::Borrowed(b"Accept-Encoding")));
    }

    let method = req.method_kind();
    let safe = matches!(method, Method::Get | Method::Head);
    if safe {
        let c = Conditions {
            if_match: req.header("if-match"),
            if_unmodified_since: req.header("if-unmodified-since"),
            if_none_match: req.header("if-none-match"),
            if_modified_since: req.header("if-modified-since"),
        };
        match conditional::evaluate(c, &etag, modified) {
            Precondition::Proceed => {}
            Precondition::NotModified => {
                res.status = 304;
                return res;
            }
            Precondition::Failed => {
                let mut e = Error::new(412).into_response();
                e.headers.extend(res.headers);
                return e;
            }
        }
    }

    let ctype = content_type(&type_path);
    if let Some(c) = coding {
        res.headers.push((
            Cow::Borrowed("content-encoding"),
            Cow::Borrowed(if c == Coding::Brotli { b"br" } else { b"gzip" }),
        ));
    }
    res.headers
        .push((Cow::Borrowed("accept-ranges"), Cow::Borrowed(b"bytes")));

    // Range applies to GET only (RFC 9110 §14.2), and only while If-Range holds.
    let ranges = match req.header("range") {
        Some(r) if method == Method::Get && res.status == 200 => {
            let if_range_ok = req.header("if-range").map_or(true, |ir| {
                conditional::if_range_holds(ir, &etag, last_modified.as_deref())
            });
            if if_range_ok {
                range::parse(r, len)
            } else {
                Ranges::Ignore
            }
        }
        _ => Ranges::Ignore,
    };
    match ranges {
        Ranges::Unsatisfiable => {
            let mut e = Error::new(416)
                .with_header(
                    "content-range",
                    Cow::Owned(format!("bytes */{len}").into_bytes()),
                )
                .into_response();
            e.headers.extend(res.headers);
            e
        }
        Ranges::Satisfiable(r) if r.len() == 1 => {
            let (a, b) = r[0];
            res.status = 206;
            push(
                &mut res,
                "content-range",
                format!("bytes {a}-{b}/{len}").into_bytes(),
            );
            res.headers.push((Cow::Borrowed("content-type"), ctype));
            body(res, file, a, b - a + 1, o.max_in_memory).await
        }
        Ranges::Satisfiable(r) if range::total(&r) <= o.max_in_memory => {
            multipart(res, file, &r, len, &ctype, &etag).await
        }
        _ => {
            res.headers.push((Cow::Borrowed("content-type"), ctype));
            body(res, file, 0, len, o.max_in_memory).await
        }
    }
}

fn push(res: &mut Response, name: &'static str, value: Vec<u8>) {
    res.headers.push((Cow::Borrowed(name), Cow::Owned(value)));
}

/// Sets the body to `n` bytes of `file` from `offset`, always with `Content-Length`: read whole
/// up to `max_in_memory`; past it, a file body the engine sends with `sendfile(2)` on plain
/// TCP (read and written in pieces on other transports), so a large file is never copied
/// through the worker.
async fn body(
    mut res: Response,
    file: Opened,
    offset: u64,
    n: u64,
    max_in_memory: u64,
) -> Response {
    if n <= max_in_memory {
        match blocking(move || Ok(open::read_at(&file.file, offset, n)?)).await {
            Ok(data) => res.body = ResponseBody::Full(Bytes::from(data)),
            Err(miss) => return miss_response(miss),
        }
        return res;
    }
    res.body = ResponseBody::File {
        file: file.file,
        offset,
        len: n,
    };
    res
}

/// A `multipart/byteranges` body (RFC 9110 §14.6) for several ranges.
async fn multipart(
    mut res: Response,
    file: Opened,
    ranges: &[ByteRange],
    len: u64,
    ctype: &[u8],
    etag: &str,
) -> Response {
    let boundary = boundary(etag);
    let mut heads = Vec::with_capacity(ranges.len());
    for &(a, b) in ranges {
        let mut h = format!("\r\n--{boundary}\r\nContent-Type: ").into_bytes();
        h.extend_from_slice(ctype);
        h.extend_from_slice(format!("\r\nContent-Range: bytes {a}-{b}/{len}\r\n\r\n").as_bytes());
        heads.push(h);
    }
    let ranges = ranges.to_vec();
    let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
    let built = blocking(move || {
        let mut out = Vec::new();
        for (h, &(a, b)) in heads.iter().zip(&ranges) {
            out.extend_from_slice(h);
            out.extend_from_slice(&open::read_at(&file.file, a, b - a + 1)?);
        }
        out.extend_from_slice(&tail);
        Ok(out)
    })
    .await;
    match built {
        Ok(out) => {
            res.status = 206;
            push(
                &mut res,
                "content-type",
                format!("multipart/byteranges; boundary={boundary}").into_bytes(),
            );
            res.body = ResponseBody::Full(Bytes::from(out));
            res
        }
        Err(miss) => miss_response(miss),
    }
}

/// A boundary unlikely to occur in the file: 64 random bits (std's per-process random keys).
fn boundary(etag: &str) -> String {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(etag);
    format!("peregrine-{r:016x}")
}

fn content_type(path: &Path) -> Cow<'static, [u8]> {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let essence = mime.essence_str();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || essence == "application/javascript"
        || essence == "application/json"
        || essence == "image/svg+xml";
    if textual {
        Cow::Owned(format!("{essence}; charset=utf-8").into_bytes())
    } else {
        Cow::Owned(essence.as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_is_refused() {
        assert_eq!(
            safe_relative("a/b.txt", false),
            Some(PathBuf::from("a/b.txt"))
        );
        assert_eq!(safe_relative("a/", false), Some(PathBuf::from("a")));
        assert_eq!(safe_relative("a%20b", false), Some(PathBuf::from("a b")));
        assert_eq!(safe_relative("", false), Some(PathBuf::new()));
        // Segments that the router would not have seen as one name are refused.
        assert_eq!(safe_relative("./a", false), None);
        assert_eq!(safe_relative("a//b", false), None);
        assert_eq!(safe_relative("/a", false), None);
        assert_eq!(safe_relative("a/%2e/b", false), None);
        assert_eq!(safe_relative("private%2fx.txt", false), None);
        assert_eq!(safe_relative("../etc/passwd", false), None);
        assert_eq!(safe_relative("a/../../x", false), None);
        assert_eq!(safe_relative("%2e%2e/x", false), None);
        assert_eq!(safe_relative("a%2f..%2f..%2fx", false), None);
        assert_eq!(safe_relative("a%5c..%5cx", false), None);
        assert_eq!(safe_relative("a\\b", false), None);
        assert_eq!(safe_relative("a%00b", false), None);
        assert_eq!(safe_relative("%ff", false), None);
    }

    #[test]
    fn hidden_names_are_opt_in() {
        assert_eq!(safe_relative(".env", false), None);
        assert_eq!(safe_relative("a/.git/config", false), None);
        assert_eq!(safe_relative("%2eenv", false), None);
        assert_eq!(safe_relative(".env", true), Some(PathBuf::from(".env")));
        assert_eq!(safe_relative("..", true), None);
        assert_eq!(
            safe_relative("a..b/c.", false),
            Some(PathBuf::from("a..b/c."))
        );
    }

    #[test]
    fn hashed_names() {
        for n in [
            "app.3f2a9c1b.js",
            "index-BxQ2ab3c.css",
            "main.0123456789abcdef0123.js",
            "x_a1b2c3d4e5.png",
        ] {
            assert!(is_hashed_name(n), "{n}");
        }
        for n in [
            "app.js",
            "index.html",
            "report-20240101.pdf",
            "chunk-vendors.js",
            "settings-abcdefgh.js",
            "jquery-3.7.1.min.js",
            "a1b2c3d4e5f6",
        ] {
            assert!(!is_hashed_name(n), "{n}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(
            &content_type(Path::new("a.html"))[..],
            b"text/html; charset=utf-8"
        );
        assert_eq!(&content_type(Path::new("a.png"))[..], b"image/png");
        assert_eq!(
            &content_type(Path::new("a.unknownext"))[..],
            b"application/octet-stream"
        );
    }
}
