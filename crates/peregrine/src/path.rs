//! Request-path normalisation, applied once before routing so that every spelling of a path
//! reaches the same route, and its middleware, as the canonical one (a protected route
//! was reachable as `/static/%70rivate/x`, `/static//private/x`, `/static/./private/x` and
//! `/static/private%2fx`).
//!
//! The rules (the canonical form is what the router, [`Request::path`](crate::Request::path),
//! the route parameters and `fs::ServeDir` all see):
//!
//! 1. `%XX` escapes of RFC 3986 *unreserved* characters (`A-Z a-z 0-9 - . _ ~`) are decoded:
//!    RFC 3986 §6.2.2.2 makes them equivalent, so `/%70rivate` **is** `/private`.
//! 2. Every other escape stays encoded, with upper-case hex (`%c3%a9` → `%C3%A9`, §6.2.2.1),
//!    so parameter values are still decoded by the handler, exactly once.
//! 3. Empty segments are merged (`//a///b` → `/a/b`), as nginx does with `merge_slashes on`
//!    (its default): clients that join a base URL and a path produce them by accident.
//! 4. `.` and `..` segments, literal or encoded (`%2e`, `%2E%2e`), are **refused** (400). The
//!    URL Standard and RFC 3986 §5.2.4 resolve them on the client: browsers, curl (without
//!    `--path-as-is`) and HTTP libraries never send them, so one that arrives was made by hand,
//!    and guessing what it meant is how traversal and bypass bugs start.
//! 5. `%2F` (`/`), `%5C` (`\`) and `%00` (NUL) are **refused** (400): a segment that decodes to a
//!    separator means one thing to the router and another to a file system or a handler that
//!    splits the decoded value (Apache's `AllowEncodedSlashes Off` default does the same).
//!    Put such values in the query string, or opt in with
//!    [`App::encoded_slashes`](crate::App::encoded_slashes)`(`[`EncodedSlashes::Keep`]`)`: then
//!    `%2F` and `%5C` stay encoded inside their segment (never a separator to the router, like
//!    Apache's `AllowEncodedSlashes NoDecode`), and `fs::ServeDir` still
//!    refuses them. `%00` is refused either way.
//!
//! Why rewrite rather than redirect to the canonical form: a redirect costs a round trip and
//! a `POST` may not survive it, and rules 1–3 never change which resource is meant. What could
//! change the meaning (rules 4 and 5) is refused outright rather than redirected.
//!
//! A canonical path is returned borrowed (no allocation, the common case); anything that is
//! not `/`-rooted (`*` for `OPTIONS *`) is returned untouched, and an empty path (absolute-form
//! `http://host`) means `/`.
//!
//! ```
//! use peregrine::path::{normalize, PathError};
//! assert_eq!(normalize("/static/%70rivate//x.txt").unwrap(), "/static/private/x.txt");
//! assert_eq!(normalize("/a%20b").unwrap(), "/a%20b");
//! assert_eq!(normalize("/static/./private/x.txt"), Err(PathError::DotSegment));
//! assert_eq!(normalize("/static/private%2fx.txt"), Err(PathError::EncodedSeparator));
//! ```

use std::borrow::Cow;
use std::fmt;

/// Why a path was refused (answered 400 before routing).
///
/// ```
/// use peregrine::path::{normalize, PathError};
/// use peregrine::{get, App, Request};
///
/// assert_eq!(normalize("/files/%2E%2E/secret"), Err(PathError::DotSegment));
/// assert_eq!(normalize("/files/a%00b"), Err(PathError::EncodedSeparator));
///
/// // In an application the refusal is a 400 before routing: no handler, no middleware runs.
/// let client = App::new().route("/files/{*rest}", get(|_r: Request| async { "file" })).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/files/../etc/passwd").send().await.status(), 400);
/// assert_eq!(client.get("/files/a%2fb").send().await.status(), 400);
/// assert_eq!(client.get("/files//a").send().await.text(), "file"); // merged, not refused
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// A `.` or `..` segment, literal or percent-encoded.
    DotSegment,
    /// `%2F`, `%5C` or `%00` (an encoded `/`, `\` or NUL), or a raw `\` or NUL (the codec
    /// refuses raw ones in a request-target; this covers other callers).
    EncodedSeparator,
    /// A `%` not followed by two hex digits (the codec refuses these first; kept for callers
    /// that normalise other strings).
    BadEscape,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathError::DotSegment => "the path has a '.' or '..' segment",
            PathError::EncodedSeparator => "the path has an encoded '/', '\\' or NUL",
            PathError::BadEscape => "the path has a malformed percent-escape",
        })
    }
}

impl std::error::Error for PathError {}

/// What to do with `%2F` and `%5C` (encoded `/` and `\`) in a path.
///
/// ```
/// use peregrine::path::EncodedSlashes;
/// use peregrine::{get, App, Error, Request};
///
/// // GitLab-style ids: `/projects/group%2Fname/issues`.
/// async fn issues(req: Request) -> Result<String, Error> {
///     Ok(format!("issues of {}", req.param_str("id")?)) // decoded here, once
/// }
///
/// let client = App::new()
///     .encoded_slashes(EncodedSlashes::Keep)
///     .route("/projects/{id}/issues", get(issues))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/projects/group%2Fname/issues").send().await;
/// assert_eq!(res.text(), "issues of group/name");
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncodedSlashes {
    /// Refuse the request with 400 (the default).
    #[default]
    Refuse,
    /// Keep them encoded inside their segment: a route parameter may then contain `/` once the
    /// handler decodes it (GitLab-style `projects/group%2Fname` ids).
    Keep,
}

/// The canonical form of `path` (see the [module documentation](self)), or why it is refused.
/// Encoded slashes are refused; see [`normalize_with`].
///
/// ```
/// use peregrine::path::normalize;
/// use std::borrow::Cow;
///
/// // Already canonical: borrowed, nothing allocated.
/// assert!(matches!(normalize("/api/v1/users/7"), Ok(Cow::Borrowed("/api/v1/users/7"))));
/// // Escapes of unreserved characters decoded, others upper-cased, empty segments merged.
/// assert_eq!(normalize("/api//v1/%7Eada/caf%c3%a9").unwrap(), "/api/v1/~ada/caf%C3%A9");
/// // `*` (OPTIONS *) is left alone; an empty path is `/`.
/// assert_eq!(normalize("*").unwrap(), "*");
/// assert_eq!(normalize("").unwrap(), "/");
/// ```
pub fn normalize(path: &str) -> Result<Cow<'_, str>, PathError> {
    normalize_with(path, EncodedSlashes::Refuse)
}

/// [`normalize`], choosing what happens to encoded slashes.
///
/// ```
/// use peregrine::path::{normalize_with, EncodedSlashes};
/// assert_eq!(normalize_with("/p/group%2fname", EncodedSlashes::Keep).unwrap(), "/p/group%2Fname");
/// assert!(normalize_with("/p/group%2fname", EncodedSlashes::Refuse).is_err());
/// ```
pub fn normalize_with(path: &str, slashes: EncodedSlashes) -> Result<Cow<'_, str>, PathError> {
    if path.is_empty() {
        return Ok(Cow::Borrowed("/"));
    }
    let keep = slashes == EncodedSlashes::Keep;
    if !path.starts_with('/') || is_canonical(path.as_bytes(), keep) {
        return Ok(Cow::Borrowed(path));
    }
    rewrite(path, keep).map(Cow::Owned)
}

/// Bytes [`is_canonical`] must look at; every other byte is skipped with one table load.
static NOTABLE: [bool; 256] = {
    let mut t = [false; 256];
    t[b'/' as usize] = true;
    t[b'%' as usize] = true;
    t[b'\\' as usize] = true;
    t[0] = true;
    t
};

/// Is `path` already canonical? Conservative: `false` for anything [`rewrite`] would change or
/// refuse. One pass over the bytes, nothing allocated: this runs on every request, so only `/`,
/// `%`, `\` and NUL are examined (measured: see the framework README, "Request paths").
fn is_canonical(b: &[u8], keep_slashes: bool) -> bool {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !NOTABLE[c as usize] {
            i += 1;
            continue;
        }
        match c {
            b'/' => match b.get(i + 1) {
                Some(b'/') => return false,
                // `/.` + (`/` | end) and `/..` + (`/` | end).
                Some(b'.') => match b.get(i + 2) {
                    None | Some(b'/') => return false,
                    Some(b'.') if matches!(b.get(i + 3), None | Some(b'/')) => return false,
                    _ => {}
                },
                _ => {}
            },
            b'%' => match escape_at(b, i) {
                Some(v)
                    if b[i + 1..i + 3] == hex_upper(v)
                        && !decodes(v)
                        && !refused(v, keep_slashes) =>
                {
                    i += 3;
                    continue;
                }
                _ => return false,
            },
            _ => return false, // `\` or NUL
        }
        i += 1;
    }
    true
}

/// Builds the canonical form of a `/`-rooted path that is not canonical yet.
fn rewrite(path: &str, keep_slashes: bool) -> Result<String, PathError> {
    let mut out = String::with_capacity(path.len());
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    for (n, seg) in segments.iter().enumerate() {
        if seg.is_empty() {
            // Merge empty segments; a trailing `/` stays (it names a directory-like resource).
            if n == last {
                out.push('/');
            }
            continue;
        }
        if seg.contains(['\\', '\0']) {
            return Err(PathError::EncodedSeparator);
        }
        out.push('/');
        let start = out.len();
        let mut rest = *seg;
        while let Some(p) = rest.find('%') {
            out.push_str(&rest[..p]);
            let v = escape_at(rest.as_bytes(), p).ok_or(PathError::BadEscape)?;
            if refused(v, keep_slashes) {
                return Err(PathError::EncodedSeparator);
            }
            if decodes(v) {
                out.push(v as char);
            } else {
                out.push('%');
                out.extend(hex_upper(v).iter().map(|&h| h as char));
            }
            // The escape was three ASCII bytes, so this is a char boundary.
            rest = &rest[p + 3..];
        }
        out.push_str(rest);
        if matches!(&out[start..], "." | "..") {
            return Err(PathError::DotSegment);
        }
    }
    Ok(out)
}

/// The byte encoded by the escape at `b[i]` (which is `%`), if well formed.
fn escape_at(b: &[u8], i: usize) -> Option<u8> {
    let hi = hex_value(*b.get(i + 1)?)?;
    let lo = hex_value(*b.get(i + 2)?)?;
    Some(hi << 4 | lo)
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn hex_upper(v: u8) -> [u8; 2] {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    [HEX[(v >> 4) as usize], HEX[(v & 15) as usize]]
}

/// RFC 3986 unreserved: decoded, because encoding them changes nothing.
fn decodes(v: u8) -> bool {
    v.is_ascii_alphanumeric() || matches!(v, b'-' | b'.' | b'_' | b'~')
}

/// Encoded bytes that would become separators (or end a C string) once decoded.
fn refused(v: u8, keep_slashes: bool) -> bool {
    v == 0 || (!keep_slashes && matches!(v, b'/' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn n(p: &str) -> Result<String, PathError> {
        normalize(p).map(Cow::into_owned)
    }

    #[test]
    fn canonical_paths_are_borrowed() {
        for p in [
            "/",
            "/a",
            "/a/b/",
            "/a%20b",
            "/caf%C3%A9",
            "/a.b/..c/c..",
            "/.well-known/x",
            "*",
        ] {
            assert!(
                matches!(normalize(p), Ok(Cow::Borrowed(q)) if q == p),
                "{p}"
            );
        }
        assert!(matches!(normalize(""), Ok(Cow::Borrowed("/"))));
    }

    #[test]
    fn unreserved_escapes_are_decoded_and_others_upper_cased() {
        assert_eq!(
            n("/static/%70rivate/x.txt").unwrap(),
            "/static/private/x.txt"
        );
        assert_eq!(n("/%41%7a%30%2D%2e%5F%7E").unwrap(), "/Az0-._~");
        assert_eq!(n("/caf%c3%a9").unwrap(), "/caf%C3%A9");
        assert_eq!(n("/a%20b%3f").unwrap(), "/a%20b%3F");
        assert_eq!(n("/%25").unwrap(), "/%25");
        assert_eq!(n("/%2570").unwrap(), "/%2570");
    }

    #[test]
    fn empty_segments_are_merged() {
        assert_eq!(n("//").unwrap(), "/");
        assert_eq!(n("//a").unwrap(), "/a");
        assert_eq!(
            n("/static//private/x.txt").unwrap(),
            "/static/private/x.txt"
        );
        assert_eq!(n("/a///b//").unwrap(), "/a/b/");
    }

    #[test]
    fn dot_segments_are_refused() {
        for p in [
            "/.",
            "/..",
            "/./",
            "/../",
            "/a/.",
            "/a/..",
            "/a/./b",
            "/a/../b",
            "/%2e",
            "/%2E%2e",
            "/a/%2e%2E/b",
            "/.%2e/",
            "//./",
            "/a//../",
        ] {
            assert_eq!(normalize(p), Err(PathError::DotSegment), "{p}");
        }
        // Dots inside a name are names.
        assert_eq!(n("/a.../...b/.c/%2e%2e%2e").unwrap(), "/a.../...b/.c/...");
    }

    #[test]
    fn encoded_separators_are_refused() {
        for p in [
            "/a%2fb", "/a%2Fb", "/a%5cb", "/a%5C", "/%00", "/ok/%2f/", "/a\\b", "/a\0",
        ] {
            assert_eq!(normalize(p), Err(PathError::EncodedSeparator), "{p}");
        }
    }

    #[test]
    fn encoded_slashes_can_be_kept_encoded() {
        let keep = |p| normalize_with(p, EncodedSlashes::Keep).map(Cow::into_owned);
        assert_eq!(keep("/p/a%2fb%5c").unwrap(), "/p/a%2Fb%5C");
        assert!(matches!(
            normalize_with("/p/a%2Fb", EncodedSlashes::Keep),
            Ok(Cow::Borrowed(_))
        ));
        assert_eq!(keep("/p/%00"), Err(PathError::EncodedSeparator));
        assert_eq!(keep("/p/%2e%2e/x"), Err(PathError::DotSegment));
    }

    #[test]
    fn malformed_escapes_are_refused() {
        for p in ["/%", "/%4", "/%zz", "/a%2"] {
            assert_eq!(normalize(p), Err(PathError::BadEscape), "{p}");
        }
    }

    /// Splits a canonical path into decoded segments.
    fn decoded_segments(p: &str) -> Vec<Vec<u8>> {
        p.split('/')
            .skip(1)
            .map(|s| percent_encoding::percent_decode_str(s).collect())
            .collect()
    }

    /// Path-like strings made of the characters that matter here.
    fn path_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("/".to_owned()),
                Just(".".to_owned()),
                Just("..".to_owned()),
                Just("a".to_owned()),
                Just("~".to_owned()),
                Just(";".to_owned()),
                (0u8..=255).prop_map(|v| format!("%{v:02x}")),
                (0u8..=255).prop_map(|v| format!("%{v:02X}")),
                Just("%".to_owned()),
                Just("%2".to_owned()),
            ],
            0..16,
        )
        .prop_map(|parts| format!("/{}", parts.concat()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The output is canonical, normalising it again changes nothing, and it names the
        /// same decoded segments as the input minus the empty ones.
        #[test]
        fn normal_form_is_canonical_and_stable(p in path_strategy()) {
            match normalize(&p) {
                Ok(c) => {
                    prop_assert!(c.starts_with('/'));
                    prop_assert!(is_canonical(c.as_bytes(), false), "{} -> {}", p, c);
                    prop_assert!(matches!(normalize(&c), Ok(Cow::Borrowed(_))));
                    prop_assert!(!c.contains("//"));
                    let segs = decoded_segments(&c);
                    for (k, s) in segs.iter().enumerate() {
                        prop_assert!(s != b"." && s != b"..");
                        prop_assert!(!s.contains(&b'/') && !s.contains(&b'\\') && !s.contains(&0));
                        prop_assert!(!s.is_empty() || k == segs.len() - 1);
                    }
                    let mut want: Vec<Vec<u8>> = p
                        .split('/')
                        .skip(1)
                        .map(|s| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>())
                        .collect();
                    let trailing = want.last().is_some_and(|s| s.is_empty());
                    want.retain(|s| !s.is_empty());
                    if trailing || want.is_empty() {
                        want.push(Vec::new());
                    }
                    prop_assert_eq!(segs, want);
                }
                Err(e) => {
                    // A refusal always has a reason present in the input.
                    let lower = p.to_ascii_lowercase();
                    let reason = match e {
                        PathError::DotSegment => p.split('/').any(|s| {
                            let d: Vec<u8> = percent_encoding::percent_decode_str(s).collect();
                            d == b"." || d == b".."
                        }),
                        PathError::EncodedSeparator => {
                            lower.contains("%2f") || lower.contains("%5c") || lower.contains("%00")
                                || p.contains(['\\', '\0'])
                        }
                        PathError::BadEscape => p.contains('%'),
                    };
                    prop_assert!(reason, "{} refused as {:?}", p, e);
                }
            }
        }

        /// Arbitrary text never panics the normaliser.
        #[test]
        fn any_text_is_handled(p in "\\PC*") {
            let _ = normalize(&p);
            let _ = normalize(&format!("/{p}"));
        }
    }
}
