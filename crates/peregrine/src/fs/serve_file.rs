//! [`ServeFile`], the service for one fixed file, its builder option (`Cache-Control`) and how
//! it answers: open the file on the blocking pool, then the same response building as
//! [`ServeDir`](super::ServeDir) (validators, conditional requests, `Range`).

use super::open::{self, blocking, miss_response};
use super::options::{checked_value, FileOptions};
use super::respond::serve;
use crate::handler::{BoxFuture, Handler};
use crate::request::Request;
use peregrine_server::Response;
use std::path::PathBuf;
use std::sync::Arc;

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
