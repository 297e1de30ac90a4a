//! The routes without parameters, by exact path: a request whose path is one of them byte for
//! byte is routed without normalising the path or walking the matcher's tree.
//!
//! Same answer as the full routing: a static pattern admitted here is canonical as written (so
//! normalising a path equal to it changes nothing), and the matcher prefers a static route to
//! any parameter or catch-all route for the very same path. Measured with cachegrind: routing
//! `/plaintext` (normalisation, matcher, parameter list) was ~370 instructions per request.

use crate::path::{self, EncodedSlashes};
use std::borrow::Cow;

/// Paths longer than this are left to the matcher: the table is indexed by length.
const MAX_LEN: usize = 128;

/// Static route patterns by length, each with its route index.
#[derive(Default)]
pub(super) struct StaticRoutes {
    by_len: Vec<Vec<(Box<str>, u32)>>,
}

impl StaticRoutes {
    /// Adds `pattern` (the route at `route`) if it has no parameters and is canonical under
    /// `slashes`; any other pattern is left to the matcher. The first pattern added for a path
    /// keeps it, as in the matcher.
    pub(super) fn add(&mut self, pattern: &str, route: u32, slashes: EncodedSlashes) {
        if !canonical_as_written(pattern, slashes)
            || !pattern.starts_with('/')
            || pattern.len() > MAX_LEN
            || pattern.contains(['{', '}'])
        {
            return;
        }
        if self.by_len.len() <= pattern.len() {
            self.by_len.resize_with(pattern.len() + 1, Vec::new);
        }
        let bucket = &mut self.by_len[pattern.len()];
        if !bucket.iter().any(|(p, _)| **p == *pattern) {
            bucket.push((pattern.into(), route));
        }
    }

    /// The route whose pattern is exactly `path`, if it is static.
    #[inline]
    pub(super) fn get(&self, path: &str) -> Option<u32> {
        self.by_len
            .get(path.len())?
            .iter()
            .find(|(p, _)| p.as_bytes() == path.as_bytes())
            .map(|&(_, route)| route)
    }
}

/// Whether normalising `text` under `slashes` leaves it as it is: a route pattern (or a prefix
/// of one) written in the form routing sees paths in.
pub(super) fn canonical_as_written(text: &str, slashes: EncodedSlashes) -> bool {
    matches!(path::normalize_with(text, slashes), Ok(Cow::Borrowed(p)) if p == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(patterns: &[&str], slashes: EncodedSlashes) -> StaticRoutes {
        let mut t = StaticRoutes::default();
        for (i, p) in patterns.iter().enumerate() {
            t.add(p, i as u32, slashes);
        }
        t
    }

    #[test]
    fn only_canonical_patterns_without_parameters_are_kept() {
        let t = table(
            &[
                "/plaintext",
                "/users/{id}",
                "/a//b",
                "/x/./y",
                "/%70rivate",
                "/files/{*rest}",
                "/a%2Fb",
                "/{{literal}}",
                "/",
            ],
            EncodedSlashes::Refuse,
        );
        assert_eq!(t.get("/plaintext"), Some(0));
        assert_eq!(t.get("/"), Some(8));
        for p in [
            "/users/{id}",
            "/a//b",
            "/x/./y",
            "/%70rivate",
            "/files/{*rest}",
            "/a%2Fb",
            "/{{literal}}",
            "/plaintex",
            "/plaintextt",
            "",
        ] {
            assert_eq!(t.get(p), None, "{p}");
        }
        // Kept encoded slashes make `%2F` canonical.
        assert_eq!(
            table(&["/a%2Fb"], EncodedSlashes::Keep).get("/a%2Fb"),
            Some(0)
        );
    }

    #[test]
    fn the_first_pattern_for_a_path_keeps_it_and_equal_lengths_are_told_apart() {
        let t = table(&["/ab", "/cd", "/ab"], EncodedSlashes::Refuse);
        assert_eq!(t.get("/ab"), Some(0));
        assert_eq!(t.get("/cd"), Some(1));
        assert_eq!(t.get("/ef"), None);
        let long = format!("/{}", "a".repeat(MAX_LEN));
        assert_eq!(table(&[&long], EncodedSlashes::Refuse).get(&long), None);
    }
}
