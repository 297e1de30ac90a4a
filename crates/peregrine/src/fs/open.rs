//! Opening a file under a root safely. Runs on tokio's blocking pool (one hop per request).
//!
//! * The file is opened first (non-blocking on Unix, so a FIFO or a device cannot hang the
//!   thread in `open`) and everything else is decided from the opened descriptor's metadata:
//!   something that is not a regular file is never read.
//! * Symbolic links are checked after opening, against the opened file, by the policy of
//!   [`Symlinks`] (`symlinks.rs`): the path is canonicalised and compared with what the policy
//!   allows, and (Unix) the canonical path must name the same inode as the open descriptor. A
//!   symlink swapped between the check and the open (the old `canonicalize`-then-`open` race)
//!   therefore cannot smuggle out a file: either the file we hold is the one checked, or the
//!   identities differ and the answer is 404. Under [`Symlinks::Deny`] the last name is also
//!   opened with `O_NOFOLLOW`. An `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` walk would
//!   avoid the second lookup but is Linux-only and needs raw syscalls (the framework forbids
//!   `unsafe`); this check is portable and costs one `stat`.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::symlinks::{allowed, Symlinks};
use crate::error::Error;
use crate::response::IntoResponse;
use peregrine_server::Response;

/// A regular file, open, with its metadata and the path it was found at.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) file: File,
    pub(crate) meta: Metadata,
    pub(crate) path: PathBuf,
}

/// Why nothing was opened.
#[derive(Debug)]
pub(crate) enum Miss {
    /// Nothing servable there (missing, not a regular file, outside the root, hidden).
    NotFound,
    /// A directory asked for without its trailing slash: redirect to the slash form, so that
    /// relative links in its index resolve under it.
    NeedsSlash,
    /// The file exists but may not be read.
    Forbidden,
    /// Any other I/O error.
    Io(io::Error),
}

/// The answer for a file that could not be opened: 404, 403, or a logged 500.
pub(super) fn miss_response(miss: Miss) -> Response {
    match miss {
        Miss::NotFound | Miss::NeedsSlash => Error::not_found().into_response(),
        Miss::Forbidden => Error::forbidden().into_response(),
        Miss::Io(e) => Error::internal_from(e).into_response(),
    }
}

impl From<io::Error> for Miss {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::NotFound => Miss::NotFound,
            io::ErrorKind::PermissionDenied => Miss::Forbidden,
            _ if is_not_a_directory(&e) => Miss::NotFound,
            _ => Miss::Io(e),
        }
    }
}

fn is_not_a_directory(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ENOTDIR) || e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Opens `path` for reading without blocking on FIFOs and devices (and, with `nofollow`, not
/// through a symlink as its last name: ELOOP, a 404); returns it with the metadata of the
/// opened descriptor.
pub(crate) fn open_nonblocking(path: &Path, nofollow: bool) -> io::Result<(File, Metadata)> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It has no
        // effect on reads of regular files.
        let nofollow = if nofollow { libc::O_NOFOLLOW } else { 0 };
        o.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    #[cfg(not(unix))]
    let _ = nofollow;
    let file = o.open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// How a [`ServeDir`](super::ServeDir) lets files under its root be opened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub(crate) symlinks: Symlinks,
    /// Names starting with `.` may be served.
    pub(crate) hidden: bool,
}

impl Policy {
    fn open(self, path: &Path) -> io::Result<(File, Metadata)> {
        open_nonblocking(path, self.symlinks == Symlinks::Deny)
    }
}

/// Opens `rel` under `root`: a regular file, or the `index` of a directory (`slash`: the
/// request path ended in `/`, or named the root itself). Checks symlinks after opening.
pub(crate) fn open_under(
    root: &Path,
    rel: &Path,
    index: Option<&str>,
    slash: bool,
    policy: Policy,
) -> Result<Opened, Miss> {
    let root = std::fs::canonicalize(root)?;
    let mut path = root.join(rel);
    let (mut file, mut meta) = policy.open(&path)?;
    if meta.is_dir() {
        let Some(index) = index else {
            return Err(Miss::NotFound);
        };
        if !slash {
            return Err(Miss::NeedsSlash);
        }
        path.push(index);
        (file, meta) = policy.open(&path)?;
    }
    if !meta.is_file() || !allowed(&root, &path, &meta, policy.symlinks, policy.hidden) {
        return Err(Miss::NotFound);
    }
    Ok(Opened { file, meta, path })
}

/// Opens the sibling `path` + `suffix` (`.br`, `.gz`) of an opened file under the same checks.
pub(crate) fn open_sibling(
    root: &Path,
    path: &Path,
    suffix: &str,
    policy: Policy,
) -> Option<Opened> {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    let sibling = PathBuf::from(s);
    let root = std::fs::canonicalize(root).ok()?;
    let (file, meta) = policy.open(&sibling).ok()?;
    (meta.is_file() && allowed(&root, &sibling, &meta, policy.symlinks, policy.hidden)).then_some(
        Opened {
            file,
            meta,
            path: sibling,
        },
    )
}

/// Opens one fixed file (for `ServeFile`): a regular file, or nothing.
pub(crate) fn open_file(path: &Path) -> Result<Opened, Miss> {
    let (file, meta) = open_nonblocking(path, false)?;
    if !meta.is_file() {
        return Err(Miss::NotFound);
    }
    Ok(Opened {
        file,
        meta,
        path: path.to_owned(),
    })
}

/// Runs blocking file work on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Miss> + Send + 'static,
) -> Result<T, Miss> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Miss::Io(std::io::Error::other(e))),
    }
}

/// Reads `len` bytes at `offset` (positioned reads; the file's cursor is not used).
pub(crate) fn read_at(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    let mut done = 0;
    while done < buf.len() {
        let n = read_at_once(file, &mut buf[done..], offset + done as u64)?;
        if n == 0 {
            // The file shrank since its metadata was read: what was promised cannot be sent.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shorter than its metadata said",
            ));
        }
        done += n;
    }
    Ok(buf)
}

#[cfg(unix)]
fn read_at_once(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    loop {
        match file.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

#[cfg(windows)]
fn read_at_once(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::windows::fs::FileExt;
    file.seek_read(buf, offset)
}
