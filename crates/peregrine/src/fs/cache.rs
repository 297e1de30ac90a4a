//! The `Cache-Control` of a served file: `public, max-age=31536000, immutable` for names that
//! carry a content hash (when [`ServeDir::immutable_hashed`](super::ServeDir::immutable_hashed)
//! is on), else the value configured with `cache_control`, else none.

use super::options::FileOptions;
use std::borrow::Cow;

/// `Cache-Control` for names recognised as content-hashed (see
/// [`ServeDir::immutable_hashed`](super::ServeDir::immutable_hashed)).
const IMMUTABLE: &[u8] = b"public, max-age=31536000, immutable";

/// The `Cache-Control` value for the file named `file_name` under options `o`, if any: the
/// immutable one for a content-hashed name overrides the configured one.
pub(super) fn cache_control(o: &FileOptions, file_name: &str) -> Option<Cow<'static, [u8]>> {
    if o.immutable_hashed && is_hashed_name(file_name) {
        Some(Cow::Borrowed(IMMUTABLE))
    } else {
        o.cache_control.clone()
    }
}

/// Does `name` (a file name) look content-hashed? See
/// [`ServeDir::immutable_hashed`](super::ServeDir::immutable_hashed).
pub(super) fn is_hashed_name(name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
