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

mod byteranges;
mod cache;
mod conditional;
mod content_type;
mod dir_handler;
mod open;
mod options;
mod precompressed;
mod range;
mod resolve;
mod respond;
mod serve_dir;
mod serve_file;
mod symlinks;

pub use options::DEFAULT_MAX_IN_MEMORY;
// Outside `fs`, only the fuzz checks use it.
#[cfg(feature = "brotli")]
pub(crate) use resolve::safe_relative;
pub use serve_dir::ServeDir;
pub use serve_file::ServeFile;
pub use symlinks::Symlinks;
