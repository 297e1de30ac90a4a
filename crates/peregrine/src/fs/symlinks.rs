//! [`Symlinks`], what [`ServeDir`](super::ServeDir) does with symbolic links below its root,
//! and the check made on every opened file (see `open.rs` for why it runs after opening).

use std::fs::Metadata;
use std::path::{Component, Path};

/// What [`ServeDir::symlinks`](super::ServeDir::symlinks) allows for symbolic links below the
/// root (the root itself may be a symlink, such as a `current -> releases/42` deployment: it is
/// resolved once, and everything is checked against where it points). Like nginx's
/// `disable_symlinks`.
///
/// A followed link is an alias: the file it names is served under the link's URL, so hooks
/// and layers on the route of the link's URL apply, not those of the route of the file's real
/// place. [`Symlinks::Deny`] (the default) is the only policy where every file has exactly one
/// URL under the root.
///
/// ```
/// use peregrine::fs::{ServeDir, Symlinks};
/// use peregrine::App;
///
/// let root = tempfile::tempdir()?;
/// std::fs::write(root.path().join("real.txt"), "real")?;
/// # #[cfg(unix)]
/// std::os::unix::fs::symlink(root.path().join("real.txt"), root.path().join("alias.txt"))?;
/// let client = App::new()
///     .merge(ServeDir::new(root.path()).router("/strict"))
///     .merge(ServeDir::new(root.path()).symlinks(Symlinks::WithinRoot).router("/loose"))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// # #[cfg(unix)] {
/// assert_eq!(client.get("/strict/alias.txt").send().await.status(), 404);
/// assert_eq!(client.get("/loose/alias.txt").send().await.text(), "real");
/// # }
/// assert_eq!(client.get("/strict/real.txt").send().await.text(), "real");
/// # });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Symlinks {
    /// No symbolic link anywhere below the root, in a directory or in the file's own name:
    /// such a request is 404. (nginx `disable_symlinks on`.)
    #[default]
    Deny,
    /// Links are followed when what they lead to is under the root, and, unless
    /// [`ServeDir::hidden`](super::ServeDir::hidden) is on, its path below the root has no
    /// name starting with `.`. A link may still alias a file of another route under the same
    /// root (a directory protected by a hook on its own route): use it only when every file
    /// under the root may be served by this route.
    WithinRoot,
    /// Links are followed wherever they lead, inside the root or not (nginx
    /// `disable_symlinks off`, Apache `FollowSymLinks`). Only for trees whose every link was
    /// put there on purpose by whoever deploys them (and that no one else can write).
    Follow,
}

/// Is the open file (metadata `meta`) found at `path` (the canonical root joined with the
/// routed names, lexically) servable under `root` (canonical) with `policy`?
///
/// The path is canonicalised and compared with what `policy` allows, and (Unix) the canonical
/// path must name the same device and inode as the open descriptor: a link swapped between
/// the open and this check gives mismatching identities, so what is served is always what was
/// checked.
pub(crate) fn allowed(
    root: &Path,
    path: &Path,
    meta: &Metadata,
    policy: Symlinks,
    hidden: bool,
) -> bool {
    if policy == Symlinks::Follow {
        return true;
    }
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    let ok = match policy {
        // No link below the root: resolving changed nothing (`path` has no `.`/`..`).
        Symlinks::Deny => real == path,
        Symlinks::WithinRoot => real
            .strip_prefix(root)
            .is_ok_and(|rel| hidden || !has_hidden_name(rel)),
        Symlinks::Follow => true,
    };
    ok && same_file(&real, meta)
}

fn has_hidden_name(rel: &Path) -> bool {
    rel.components().any(|c| match c {
        Component::Normal(n) => match n.to_str() {
            Some(n) => n.starts_with('.'),
            None => true,
        },
        _ => true,
    })
}

/// Does `real` name the file open with metadata `meta`?
fn same_file(real: &Path, meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(real).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (real, meta);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_below_the_root() {
        assert!(has_hidden_name(Path::new("a/.git/config")));
        assert!(has_hidden_name(Path::new(".env")));
        assert!(!has_hidden_name(Path::new("a/b.txt")));
        assert!(!has_hidden_name(Path::new("a..b/c")));
    }
}
