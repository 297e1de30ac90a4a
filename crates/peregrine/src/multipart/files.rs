//! A part's file: its client-chosen name made safe (see `file_name.rs`), and saving it to disk
//! without ever leaving the chosen directory or leaving a partial file behind.

use super::Field;
use crate::error::Error;
use std::path::{Path, PathBuf};

impl Field {
    /// The part's `filename`, made safe to use as one path component: the client's name
    /// reduced to its final component (after the last `/` or `\\`), without a drive prefix
    /// (`C:`), control bytes (NUL included) or surrounding spaces and trailing dots, `:`
    /// replaced by `_`, at most 255 bytes. `None` if the part is not a file, or if nothing
    /// usable is left (`..`, `.`, empty). `dir.join(name)` stays in `dir`; prefer
    /// [`save_in`](Self::save_in), which also never overwrites. The client's own bytes are
    /// [`raw_file_name`](Self::raw_file_name).
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(format!("{:?}", field.file_name()))
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
    ///     .body(form(&[("avatar", Some("../../home/me.png"), "image/png", "PNG")]))
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), r#"Some("me.png")"#);
    /// # });
    /// ```
    pub fn file_name(&self) -> Option<&str> {
        self.safe_name.as_deref()
    }
    /// The part's `filename` exactly as the client sent it.
    ///
    /// **Warning:** client-chosen bytes: `../../etc/cron.d/x`, `/etc/passwd`, `C:\\x`,
    /// control characters. Never use it in a path (use [`file_name`](Self::file_name) or
    /// [`save_in`](Self::save_in)); escape it before showing it.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request};
    ///
    /// async fn handler(mut req: Request) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     Ok(format!("{:?} {:?}", field.raw_file_name(), field.file_name()))
    /// }
    /// let client = App::new().route("/", post(handler)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let body = "--XX\r\ncontent-disposition: form-data; name=\"f\"; filename=\"../x\"\r\n\r\nhi\r\n--XX--\r\n";
    /// let res = client.post("/").header("content-type", "multipart/form-data; boundary=XX").body(body).send().await;
    /// assert_eq!(res.text(), r#"Some("../x") Some("x")"#);
    /// # });
    /// ```
    pub fn raw_file_name(&self) -> Option<&str> {
        self.inner.file_name()
    }

    /// Streams the part into a file at `path` (created or truncated), chunk by chunk: the
    /// part is never held in memory. Returns the bytes written. On any failure (a limit, a
    /// broken body, a disk error) or if the handler is dropped mid-upload, the partial file is
    /// removed. A full disk or quota is `507 Insufficient Storage`, other disk errors `500`. `path` is the caller's: to keep the client's name, use
    /// [`save_in`](Self::save_in).
    ///
    /// ```
    /// use peregrine::{post, App, Error, MultipartLimits, Request, State};
    /// use std::path::PathBuf;
    ///
    /// struct Uploads(PathBuf);
    ///
    /// async fn upload(mut req: Request, State(dir): State<Uploads>) -> Result<String, Error> {
    ///     let mut form = req.multipart_with(MultipartLimits { total: 1 << 20, per_part: 1024 })?;
    ///     let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     // Never the client's file name as a path: a name of our own.
    ///     let n = field.save_to(dir.0.join("upload-1.bin")).await?;
    ///     Ok(format!("{n} bytes"))
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let client = App::new().with_state(Uploads(dir.path().into())).route("/upload", post(upload)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let send = |data: &str| {
    ///     let body = format!("--XX\r\ncontent-disposition: form-data; name=\"f\"; filename=\"../../x\"\r\n\r\n{data}\r\n--XX--\r\n");
    ///     client.post("/upload").header("content-type", "multipart/form-data; boundary=XX").body(body).send()
    /// };
    /// assert_eq!(send("hello").await.text(), "5 bytes");
    /// assert_eq!(std::fs::read(dir.path().join("upload-1.bin")).unwrap(), b"hello");
    /// // Over the per-part limit: 413, and no partial file is left behind.
    /// std::fs::remove_file(dir.path().join("upload-1.bin")).unwrap();
    /// assert_eq!(send(&"x".repeat(4096)).await.status(), 413);
    /// assert!(!dir.path().join("upload-1.bin").exists());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn save_to(&mut self, path: impl AsRef<Path>) -> Result<u64, Error> {
        let path = path.as_ref();
        // Declared before the file, so that the file is closed before a removal.
        let mut partial = RemoveOnDrop(None);
        let mut file = open_now(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
            path,
        )
        .map_err(storage_error)?;
        partial.0 = Some(path.to_owned());
        let written = self.copy_into(&mut file).await;
        drop(file);
        if written.is_ok() {
            partial.0 = None;
        }
        written
    }

    /// Streams the part into a new file named [`file_name`](Self::file_name) in `dir`, and
    /// returns the bytes written. It cannot write outside `dir`: the name is one safe
    /// component, the file is created new (`409 Conflict` if the name exists, a symbolic link
    /// included: it is never followed), a part without a usable name is `400`, a full disk
    /// `507`. On any failure, or if the handler is dropped mid-upload (the client went away), the partial
    /// file is removed.
    ///
    /// ```
    /// use peregrine::{post, App, Error, Request, State};
    /// use std::path::PathBuf;
    ///
    /// struct Uploads(PathBuf);
    ///
    /// async fn upload(mut req: Request, State(dir): State<Uploads>) -> Result<String, Error> {
    ///     let mut form = req.multipart()?;
    ///     let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    ///     let n = field.save_in(&dir.0).await?;
    ///     Ok(format!("{}: {n} bytes", field.file_name().unwrap_or_default()))
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let uploads = dir.path().join("uploads");
    /// std::fs::create_dir(&uploads)?;
    /// let client = App::new().with_state(Uploads(uploads.clone())).route("/upload", post(upload)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let send = |name: &str| {
    ///     let body = format!("--XX\r\ncontent-disposition: form-data; name=\"f\"; filename=\"{name}\"\r\n\r\nhello\r\n--XX--\r\n");
    ///     client.post("/upload").header("content-type", "multipart/form-data; boundary=XX").body(body).send()
    /// };
    /// assert_eq!(send("../notes.txt").await.text(), "notes.txt: 5 bytes");
    /// assert_eq!(std::fs::read(uploads.join("notes.txt")).unwrap(), b"hello");
    /// assert!(!dir.path().join("notes.txt").exists());
    /// assert_eq!(send("notes.txt").await.status(), 409); // never overwritten
    /// assert_eq!(send("..").await.status(), 400);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn save_in(&mut self, dir: impl AsRef<Path>) -> Result<u64, Error> {
        let name = self.safe_name.clone().ok_or_else(|| {
            Error::bad_request().with_detail(format!(
                "part `{}` has no usable file name",
                self.name().unwrap_or("")
            ))
        })?;
        let path = dir.as_ref().join(&name);
        let mut options = std::fs::OpenOptions::new();
        // create_new is O_CREAT|O_EXCL: it fails on any existing entry, a symbolic link
        // included, so a planted link cannot redirect the write; O_NOFOLLOW says so twice.
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
        let mut partial = RemoveOnDrop(None);
        let mut file = match open_now(&options, &path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::new(409).with_detail(format!("`{name}` already exists")));
            }
            Err(e) => return Err(storage_error(e)),
        };
        // Armed only once the file is ours: an existing one is never removed.
        partial.0 = Some(path);
        let written = self.copy_into(&mut file).await;
        drop(file);
        if written.is_ok() {
            partial.0 = None;
        }
        written
    }

    /// Writes the rest of the part to `file`; the bytes written.
    async fn copy_into(&mut self, file: &mut tokio::fs::File) -> Result<u64, Error> {
        use tokio::io::AsyncWriteExt;
        let mut written = 0u64;
        while let Some(c) = self.chunk().await? {
            file.write_all(&c).await.map_err(storage_error)?;
            written += c.len() as u64;
        }
        file.flush().await.map_err(storage_error)?;
        Ok(written)
    }
}

/// Opens the file on this thread, not on tokio's blocking pool: a handler dropped while an
/// offloaded open is under way (the client went away) would leave the open to finish after
/// the drop, creating a file nobody removes (and that `save_in` would then refuse as existing).
/// Creating one directory entry takes about as long as the removal `RemoveOnDrop` does inline.
fn open_now(options: &std::fs::OpenOptions, path: &Path) -> std::io::Result<tokio::fs::File> {
    options.open(path).map(tokio::fs::File::from_std)
}

/// A write error as the client sees it: out of space (`ENOSPC`, `EDQUOT`, or a file over the
/// size limit, `EFBIG`) is `507 Insufficient Storage`, the client may retry later or elsewhere;
/// anything else is the server's own `500`. The cause goes to the log, never to the client.
fn storage_error(e: std::io::Error) -> Error {
    #[cfg(unix)]
    let full = matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
    );
    #[cfg(not(unix))]
    let full = e.kind() == std::io::ErrorKind::StorageFull;
    if !full {
        return Error::internal_from(e);
    }
    tracing::warn!(target: "peregrine::multipart", error = %e, "upload refused: no space left");
    Error::new(507).with_title("Insufficient Storage")
}

/// Removes the file at its path when dropped, unless disarmed (`None`): the cleanup of a failed
/// upload, and of one whose handler future was dropped (there is no `.await` in a drop, hence
/// the blocking call, once).
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
