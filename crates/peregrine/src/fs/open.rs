//! Opening a file under a root safely. Runs on tokio's blocking pool (one hop per request).
//!
//! * The file is opened first (non-blocking on Unix, so a FIFO or a device cannot hang the
//!   thread in `open`) and everything else is decided from the opened descriptor's metadata:
//!   something that is not a regular file is never read.
//! * Containment is checked after opening, against the opened file: the path is canonicalised
//!   and must lie under the canonical root, and (Unix) the canonical path must name the same
//!   inode as the open descriptor. A symlink swapped between the check and the open (the old
//!   `canonicalize`-then-`open` race) therefore cannot smuggle out a file: either the file we
//!   hold is the one under the root, or the identities differ and the answer is 404. An
//!   `openat2(RESOLVE_BENEATH)` walk would avoid the second lookup but is Linux-only and
//!   needs raw syscalls; this check is portable and costs one `stat`.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

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

/// Opens `path` for reading without blocking on FIFOs and devices; returns it with the
/// metadata of the opened descriptor.
pub(crate) fn open_nonblocking(path: &Path) -> io::Result<(File, Metadata)> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It has no
        // effect on reads of regular files.
        o.custom_flags(libc::O_NONBLOCK);
    }
    let file = o.open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Is the open file (with metadata `meta`) at `path` really under `root` (canonical)?
fn contained(root: &Path, path: &Path, meta: &Metadata) -> bool {
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    if !real.starts_with(root) {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&real) {
            Ok(m) => m.dev() == meta.dev() && m.ino() == meta.ino(),
            Err(_) => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// Opens `rel` under `root`: a regular file, or the `index` of a directory (`slash`: the
/// request path ended in `/`, or named the root itself). Checks containment after opening.
pub(crate) fn open_under(
    root: &Path,
    rel: &Path,
    index: Option<&str>,
    slash: bool,
) -> Result<Opened, Miss> {
    let root = std::fs::canonicalize(root)?;
    let mut path = root.join(rel);
    let (mut file, mut meta) = open_nonblocking(&path)?;
    if meta.is_dir() {
        let Some(index) = index else {
            return Err(Miss::NotFound);
        };
        if !slash {
            return Err(Miss::NeedsSlash);
        }
        path.push(index);
        (file, meta) = open_nonblocking(&path)?;
    }
    if !meta.is_file() || !contained(&root, &path, &meta) {
        return Err(Miss::NotFound);
    }
    Ok(Opened { file, meta, path })
}

/// Opens the sibling `path` + `suffix` (`.br`, `.gz`) of an opened file under the same checks.
pub(crate) fn open_sibling(root: &Path, path: &Path, suffix: &str) -> Option<Opened> {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    let sibling = PathBuf::from(s);
    let root = std::fs::canonicalize(root).ok()?;
    let (file, meta) = open_nonblocking(&sibling).ok()?;
    (meta.is_file() && contained(&root, &sibling, &meta)).then_some(Opened {
        file,
        meta,
        path: sibling,
    })
}

/// Opens one fixed file (for `ServeFile`): a regular file, or nothing.
pub(crate) fn open_file(path: &Path) -> Result<Opened, Miss> {
    let (file, meta) = open_nonblocking(path)?;
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
