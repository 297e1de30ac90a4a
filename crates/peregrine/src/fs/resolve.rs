//! From the routed catch-all parameter to a relative path under the root, refusing anything
//! that could step outside it or name something other than what the router matched:
//! `..`, `.` and empty segments, encoded separators, `\`, NUL, hidden names (unless asked
//! for) and, on Windows, drive letters, streams and trailing dots. Containment on disk
//! (symlinks) is checked later, on the opened file (see `open.rs`).

use std::path::{Path, PathBuf};

/// Decodes and checks a routed path parameter relative to a root: `None` if it is not
/// acceptable.
///
/// The parameter is split on `/` exactly as the router split it, and each segment must decode
/// to exactly one plain file name: no empty, `.` or `..` segment (a trailing `/` excepted), and
/// no `/`, `\` or NUL inside a decoded segment. So the file named is always the one the route
/// (and the middleware on it) matched: the decoded segments are the routed ones, one for one
///. [`crate::path::normalize`] already refuses or merges these before routing; this
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
}
