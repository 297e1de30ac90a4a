//! Static files: content types, validators (`ETag`, `Last-Modified`) and conditional `304`s.

use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use peregrine_server::{Method, Response, ResponseBody};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, ReadBuf};

/// Files up to this size are read whole and sent with `Content-Length`; larger ones stream.
const WHOLE_FILE_LIMIT: u64 = 1024 * 1024;
const STREAM_CHUNK: usize = 64 * 1024;

/// Serves files under a directory, mounted on a route with a catch-all parameter.
///
/// * The catch-all is percent-decoded and split into segments; `..`, backslashes and NUL
///   are refused with 404 (nothing outside the root is ever named), and the resolved file must
///   still lie under the root after symlinks are followed.
/// * `Content-Type` from the extension (`mime_guess`), with `charset=utf-8` for text.
/// * `ETag` (from size and modification time) and `Last-Modified`; `If-None-Match` and
///   `If-Modified-Since` answered with `304 Not Modified`.
/// * A directory answers with its `index.html`, if any.
///
/// ```
/// use peregrine::{App, get};
/// use peregrine::fs::ServeDir;
/// let app = App::new().route("/static/{*path}", get(ServeDir::new("public")));
/// # let _ = app;
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
}

impl ServeDir {
    /// Serves `root` through the route parameter named `path`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ServeDir {
            inner: Arc::new(DirConfig {
                root: root.into(),
                param: "path".into(),
                index: Some("index.html".into()),
            }),
        }
    }
    /// Uses another catch-all parameter name (`/assets/{*file}` → `"file"`).
    pub fn param(mut self, name: &str) -> Self {
        Arc::make_mut(&mut self.inner).param = name.into();
        self
    }
    /// Index file for directories (`None` to answer directories with 404).
    pub fn index(mut self, file: Option<&str>) -> Self {
        Arc::make_mut(&mut self.inner).index = file.map(Into::into);
        self
    }
}

/// Decodes and checks a routed path parameter relative to a root: `None` if it is not
/// acceptable.
///
/// The parameter is split on `/` exactly as the router split it, and each segment must decode
/// to exactly one plain file name: no empty, `.` or `..` segment (a trailing `/` excepted), and
/// no `/`, `\` or NUL inside a decoded segment. So the file named is always the one the route
/// (and the middleware on it) matched: the decoded segments are the routed ones, one for one
/// (issue 17). [`crate::path::normalize`] already refuses or merges these before routing; this
/// holds even when `ServeDir` is called some other way.
pub(crate) fn safe_relative(raw: &str) -> Option<PathBuf> {
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
            || name.contains(['/', '\\', '\0'])
            // A drive prefix or other component that is not a plain name (Windows) is refused.
            || Path::new(&*name).components().count() != 1
        {
            return None;
        }
        rel.push(&*name);
    }
    Some(rel)
}

impl Handler for ServeDir {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let cfg = self.inner.clone();
        Box::pin(async move {
            let raw = req.param_raw(&cfg.param).unwrap_or("");
            let Some(rel) = safe_relative(raw) else {
                return Error::not_found().into_response();
            };
            let mut path = cfg.root.join(rel);
            match tokio::fs::metadata(&path).await {
                Ok(m) if m.is_dir() => match &cfg.index {
                    Some(i) => path.push(i),
                    None => return Error::not_found().into_response(),
                },
                Ok(_) => {}
                Err(_) => return Error::not_found().into_response(),
            }
            // Symlinks may point anywhere; only what resolves under the root is served.
            let (Ok(real), Ok(root)) = (
                tokio::fs::canonicalize(&path).await,
                tokio::fs::canonicalize(&cfg.root).await,
            ) else {
                return Error::not_found().into_response();
            };
            if !real.starts_with(&root) {
                return Error::not_found().into_response();
            }
            serve_file(&req, &real).await.into_response()
        })
    }
}

/// Serves one fixed file.
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
}

impl ServeFile {
    /// Serves `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ServeFile {
            path: Arc::new(path.into()),
        }
    }
}

impl Handler for ServeFile {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let path = self.path.clone();
        Box::pin(async move { serve_file(&req, &path).await.into_response() })
    }
}

/// Validators of a file: `(etag, last_modified)`.
pub(crate) fn validators(len: u64, modified: Option<SystemTime>) -> (String, Option<String>) {
    let (secs, nanos) = modified
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map_or((0, 0), |d| (d.as_secs(), d.subsec_nanos()));
    let etag = format!("\"{secs:x}.{nanos:x}-{len:x}\"");
    (etag, modified.map(httpdate::fmt_http_date))
}

/// Does an `If-None-Match` value match `etag` (weak comparison, RFC 9110 §13.1.2)?
pub(crate) fn none_match(header: &str, etag: &str) -> bool {
    let strip = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    let etag = strip(etag);
    header
        .split(',')
        .any(|t| t.trim() == "*" || strip(t) == etag)
}

/// Is the file unmodified since the `If-Modified-Since` date? (One-second resolution, as HTTP
/// dates have.) An unparseable date is ignored, as RFC 9110 §13.1.3 requires.
pub(crate) fn not_modified_since(header: &str, modified: SystemTime) -> bool {
    let Ok(since) = httpdate::parse_http_date(header) else {
        return false;
    };
    let m = modified
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let s = since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    m <= s
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

/// Serves the file at `path` for `req` with validators and conditional handling.
async fn serve_file(req: &Request, path: &Path) -> Result<Response, Error> {
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::not_found()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(Error::forbidden())
        }
        Err(e) => return Err(Error::internal_from(e)),
    };
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Err(Error::not_found());
    }
    let modified = meta.modified().ok();
    let (etag, last_modified) = validators(meta.len(), modified);

    let mut res = Response::new(200);
    res.headers
        .push((Cow::Borrowed("etag"), Cow::Owned(etag.clone().into_bytes())));
    if let Some(lm) = &last_modified {
        res.headers.push((
            Cow::Borrowed("last-modified"),
            Cow::Owned(lm.clone().into_bytes()),
        ));
    }

    let method = req.method_kind();
    if matches!(method, Method::Get | Method::Head) {
        let fresh = match req.header("if-none-match") {
            Some(inm) => none_match(inm, &etag),
            // If-Modified-Since only counts without If-None-Match (RFC 9110 §13.1.3).
            None => match (req.header("if-modified-since"), modified) {
                (Some(ims), Some(m)) => not_modified_since(ims, m),
                _ => false,
            },
        };
        if fresh {
            res.status = 304;
            return Ok(res);
        }
    }

    res.headers
        .push((Cow::Borrowed("content-type"), content_type(path)));
    if meta.len() <= WHOLE_FILE_LIMIT {
        let data = read_all(file, meta.len()).await?;
        res.body = ResponseBody::Full(data);
    } else {
        res.body = ResponseBody::Stream(Box::pin(FileStream {
            file,
            buf: BytesMut::new(),
        }));
    }
    Ok(res)
}

async fn read_all(mut file: tokio::fs::File, len: u64) -> std::io::Result<Bytes> {
    use tokio::io::AsyncReadExt;
    let mut v = Vec::with_capacity(len as usize);
    file.read_to_end(&mut v).await?;
    Ok(Bytes::from(v))
}

/// A file as a stream of chunks.
struct FileStream {
    file: tokio::fs::File,
    buf: BytesMut,
}

impl Stream for FileStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        this.buf.resize(STREAM_CHUNK, 0);
        let mut rb = ReadBuf::new(&mut this.buf[..]);
        match Pin::new(&mut this.file).poll_read(cx, &mut rb) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                if n == 0 {
                    return Poll::Ready(None);
                }
                let chunk = this.buf.split_to(n).freeze();
                Poll::Ready(Some(Ok(chunk)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn traversal_is_refused() {
        assert_eq!(safe_relative("a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(safe_relative("a/"), Some(PathBuf::from("a")));
        assert_eq!(safe_relative("a%20b"), Some(PathBuf::from("a b")));
        // Segments that the router would not have seen as one name are refused.
        assert_eq!(safe_relative("./a"), None);
        assert_eq!(safe_relative("a//b"), None);
        assert_eq!(safe_relative("/a"), None);
        assert_eq!(safe_relative("a/%2e/b"), None);
        assert_eq!(safe_relative("private%2fx.txt"), None);
        assert_eq!(safe_relative(""), Some(PathBuf::new()));
        assert_eq!(safe_relative("../etc/passwd"), None);
        assert_eq!(safe_relative("a/../../x"), None);
        assert_eq!(safe_relative("%2e%2e/x"), None);
        assert_eq!(safe_relative("a%2f..%2f..%2fx"), None);
        assert_eq!(safe_relative("a%5c..%5cx"), None);
        assert_eq!(safe_relative("a%00b"), None);
        assert_eq!(safe_relative("%ff"), None);
    }

    #[test]
    fn etag_matching() {
        let (etag, _) = validators(10, Some(UNIX_EPOCH + Duration::new(100, 5)));
        assert_eq!(etag, "\"64.5-a\"");
        assert!(none_match(&etag, &etag));
        assert!(none_match(&format!("W/{etag}"), &etag));
        assert!(none_match(&format!("\"x\", {etag}"), &etag));
        assert!(none_match("*", &etag));
        assert!(!none_match("\"other\"", &etag));
    }

    #[test]
    fn modified_since() {
        let m = UNIX_EPOCH + Duration::new(1_700_000_000, 500_000_000);
        let same = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert!(not_modified_since(&same, m));
        let before = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_699_999_999));
        assert!(!not_modified_since(&before, m));
        assert!(!not_modified_since("garbage", m));
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
