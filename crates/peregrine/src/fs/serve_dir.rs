//! [`ServeDir`], the service for a directory, and its builder options (index, hidden names,
//! symlinks, SPA fallback, precompressed siblings, caching, in-memory limit), plus
//! [`ServeDir::router`], which mounts it under a prefix. How it answers a request is in
//! `dir_handler.rs`.

use super::open::Policy;
use super::options::{checked_value, FileOptions};
use super::symlinks::Symlinks;
use crate::router::{get, Router};
use std::path::PathBuf;
use std::sync::Arc;

/// Serves files under a directory, mounted on a route with a catch-all parameter.
///
/// * **Paths**: the (already normalised, see [`crate::path`]) catch-all is split into segments
///   exactly as routed; each must decode to one plain name. `..`, `\`, NUL, encoded separators
///   and names starting with `.` (unless [`ServeDir::hidden`]) are 404. No symbolic link below
///   the root is followed unless [`ServeDir::symlinks`] allows it, checked on the opened
///   descriptor (no check-then-open race). FIFOs, devices and sockets are never read.
/// * **Headers**: `Content-Type` from the extension (`mime_guess`, `charset=utf-8` for text),
///   strong `ETag`, `Last-Modified`, `Accept-Ranges: bytes`, `Content-Length` for every body, range
///   and HEAD answer.
/// * **Memory**: only bodies up to [`ServeDir::max_in_memory`] (64 KiB) are read into memory;
///   larger files and ranges are sent from the open file (`sendfile(2)` on plain TCP, bounded
///   pieces otherwise), and several ranges of a larger total stream part by part in 64 KiB
///   pieces. A slow client holds at most one piece, whatever the file's size.
/// * **Conditional requests** in the order of RFC 9110 §13.2.2: `If-Match` /
///   `If-Unmodified-Since` (412), `If-None-Match` / `If-Modified-Since` (304), `If-Range`.
/// * **Range** (GET): one range → 206 with `Content-Range`; several → `multipart/byteranges`;
///   none satisfiable → 416 with `Content-Range: bytes */len`; malformed or more than 16 ranges
///   → the whole file (a server may ignore `Range`).
/// * **Directories**: `dir/` answers with its `index.html`; `dir` redirects (301) to `dir/` so
///   that relative links in the index work. The catch-all route also answers its bare prefix
///   (`/static/` with the index, `/static` with a redirect to `/static/`), with the route's
///   hooks and layers.
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
    pub(super) inner: Arc<DirConfig>,
}

/// A [`ServeDir`]'s settings, shared by its clones (copied on write by the builders).
#[derive(Debug, Clone)]
pub(super) struct DirConfig {
    pub(super) root: PathBuf,
    pub(super) param: String,
    pub(super) index: Option<String>,
    pub(super) hidden: bool,
    pub(super) symlinks: Symlinks,
    pub(super) spa_fallback: Option<PathBuf>,
    pub(super) files: FileOptions,
}

impl DirConfig {
    pub(super) fn policy(&self) -> Policy {
        Policy {
            symlinks: self.symlinks,
            hidden: self.hidden,
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
                symlinks: Symlinks::Deny,
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
    /// What to do with symbolic links below the root; [`Symlinks::Deny`] by default, so that a
    /// link cannot make a file outside the root, or in a directory that another route protects
    /// with a hook, reachable through this route. See [`Symlinks`].
    ///
    /// ```
    /// use peregrine::fs::{ServeDir, Symlinks};
    /// use peregrine::App;
    ///
    /// let shared = tempfile::tempdir()?;
    /// std::fs::write(shared.path().join("logo.png"), b"\x89PNG")?;
    /// let root = tempfile::tempdir()?;
    /// # #[cfg(unix)]
    /// std::os::unix::fs::symlink(shared.path(), root.path().join("shared"))?;
    /// let client = App::new()
    ///     .merge(ServeDir::new(root.path()).router("/default"))
    ///     .merge(ServeDir::new(root.path()).symlinks(Symlinks::Follow).router("/linked"))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # #[cfg(unix)] {
    /// // The link leads out of the root: refused unless the policy says otherwise.
    /// assert_eq!(client.get("/default/shared/logo.png").send().await.status(), 404);
    /// assert_eq!(client.get("/linked/shared/logo.png").send().await.status(), 200);
    /// # }
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn symlinks(mut self, policy: Symlinks) -> Self {
        self.cfg().symlinks = policy;
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
    /// Bodies (or ranges) up to `bytes` are read into memory whole (where a compression layer
    /// may compress them); larger ones are sent from the open file, `sendfile(2)` on plain TCP
    /// and bounded pieces on other transports, and several ranges of a larger total are
    /// streamed part by part. Every answer carries `Content-Length`. Default
    /// [`DEFAULT_MAX_IN_MEMORY`](super::DEFAULT_MAX_IN_MEMORY) (64 KiB). This is memory per
    /// request: raising it lets each slow client hold that much.
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

    /// The route that serves this directory under `prefix` (`"/static"`): `/static/{*path}`,
    /// which also answers `/static/` (the index) and `/static` (a redirect to `/static/`), so
    /// a hook or layer on it covers the whole directory.
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
        Router::new().route(&catch_all, get(self))
    }
}
