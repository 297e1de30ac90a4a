//! The routes whose only parameter is their whole last segment (`/users/{id}`), by their static
//! prefix (`/users/`): a canonical path `/users/42` is routed with one comparison instead of a
//! walk of the matcher's tree and its parameter list.
//!
//! Measured with cachegrind on the lab's `GET /users/42`: routing through matchit (its tree,
//! its parameter iterator, which checks every name and value as UTF-8, and our copy of the
//! values' offsets) was about 560 instructions per request, against about 90 here (the lookup
//! with its compare, and the one-entry parameter list).
//!
//! Same answer as the matcher: a prefix is admitted only when no other route could match a path
//! made of that prefix and one more segment (see [`LastParamRoutes::build`]); anything else is
//! left to the matcher. `last_param_routes_agree_with_the_matcher` checks it against matchit.

/// One registered route pattern, as the matcher has it.
pub(super) struct Pattern<'a> {
    pub(super) text: &'a str,
    pub(super) route: u32,
    /// Routed by exact path before this table is looked at (`statics.rs`), for the path as sent
    /// and again for the normalised one.
    pub(super) exact: bool,
}

/// Prefixes (ending in `/`) of routes `prefix{name}`, by length, each with its route index.
#[derive(Default)]
pub(super) struct LastParamRoutes {
    by_len: Vec<Vec<(Box<str>, u32)>>,
}

impl LastParamRoutes {
    /// The table for `patterns`, every pattern the matcher holds. `canonical` says whether a
    /// prefix is already in the form normalisation gives (routing looks here after it).
    ///
    /// A route `P{name}` (P static, ending in `/`) is admitted unless another pattern Q could
    /// match some path `P` + segment:
    /// - a static Q (no parameter) that is `P` + one segment, unless routing finds it by
    ///   exact path first (`exact`);
    /// - a Q with a catch-all whose static start and P, one being a prefix of the other;
    /// - a Q with parameters, as many `/` as `P{name}`, whose static start and P are so.
    pub(super) fn build(patterns: &[Pattern<'_>], canonical: impl Fn(&str) -> bool) -> Self {
        let mut table = LastParamRoutes::default();
        for p in patterns {
            let Some(prefix) = last_param_prefix(p.text) else {
                continue;
            };
            if !canonical(prefix) {
                continue;
            }
            let slashes = slash_count(p.text);
            let shadowed = patterns.iter().any(|q| {
                if std::ptr::eq(q, p) {
                    return false;
                }
                match static_start(q.text) {
                    // Static: only the very path `prefix` + one segment.
                    None => {
                        !q.exact
                            && q.text
                                .strip_prefix(prefix)
                                .is_some_and(|rest| !rest.contains('/'))
                    }
                    Some(start) => {
                        let overlaps = start.starts_with(prefix) || prefix.starts_with(start);
                        overlaps && (q.text.contains("{*") || slash_count(q.text) == slashes)
                    }
                }
            });
            if shadowed {
                continue;
            }
            if table.by_len.len() <= prefix.len() {
                table.by_len.resize_with(prefix.len() + 1, Vec::new);
            }
            table.by_len[prefix.len()].push((prefix.into(), p.route));
        }
        table
    }

    /// The route for the canonical `path` and its parameter's byte range, if its prefix is in
    /// the table and its last segment is not empty.
    #[inline]
    pub(super) fn get(&self, path: &str) -> Option<(u32, (u32, u32))> {
        if self.by_len.is_empty() {
            return None;
        }
        let b = path.as_bytes();
        let slash = b.iter().rposition(|&c| c == b'/')?;
        let start = slash + 1;
        if start == b.len() {
            return None;
        }
        self.route_after(b, start)
    }

    /// [`get`](Self::get) for a path as sent, before normalising: answers only when the path
    /// is canonical already, which holds when its prefix is in the table (canonical as
    /// written) and its last segment is plain: no `%`, `\` or NUL (the bytes normalisation
    /// looks at besides `/`), and neither `.` nor `..`. The same route and range as
    /// normalising, then [`get`](Self::get); `None` leaves the path to that.
    ///
    /// Measured with callgrind on the lab's `GET /users/42`: normalising (a scan of every byte
    /// of the path) cost about 115 instructions per request; this walk over the last segment,
    /// which the lookup makes anyway, about 10.
    #[inline]
    pub(super) fn get_canonical(&self, path: &str) -> Option<(u32, (u32, u32))> {
        if self.by_len.is_empty() {
            return None;
        }
        let b = path.as_bytes();
        let mut slash = b.len();
        loop {
            slash = slash.checked_sub(1)?;
            match b[slash] {
                b'/' => break,
                b'%' | b'\\' | 0 => return None,
                _ => {}
            }
        }
        let start = slash + 1;
        if matches!(&b[start..], b"" | b"." | b"..") {
            return None;
        }
        self.route_after(b, start)
    }

    /// The route whose prefix is `path[..start]`, with the range of the segment after it.
    #[inline]
    fn route_after(&self, path: &[u8], start: usize) -> Option<(u32, (u32, u32))> {
        let prefix = &path[..start];
        let &(_, route) = self
            .by_len
            .get(start)?
            .iter()
            .find(|(p, _)| p.as_bytes() == prefix)?;
        Some((route, (start as u32, path.len() as u32)))
    }
}

/// `P` of a pattern `P{name}` whose only parameter is its whole last segment, `P` static.
fn last_param_prefix(pattern: &str) -> Option<&str> {
    let body = pattern.strip_suffix('}')?;
    let open = body.rfind('{')?;
    let (prefix, name) = (&body[..open], &body[open + 1..]);
    let plain_name = !name.is_empty() && !name.contains(['{', '}', '*', '/']);
    let static_prefix =
        prefix.starts_with('/') && prefix.ends_with('/') && !prefix.contains(['{', '}']);
    (plain_name && static_prefix).then_some(prefix)
}

/// The text of `pattern` before its first parameter, or `None` if it has none (`{{` and `}}`
/// are literal braces, as the matcher reads them).
fn static_start(pattern: &str) -> Option<&str> {
    let b = pattern.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' | b'}' if b.get(i + 1) == Some(&b[i]) => i += 2,
            b'{' => return Some(&pattern[..i]),
            _ => i += 1,
        }
    }
    None
}

fn slash_count(s: &str) -> usize {
    s.bytes().filter(|&c| c == b'/').count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(patterns: &[&str]) -> LastParamRoutes {
        let list: Vec<Pattern<'_>> = patterns
            .iter()
            .enumerate()
            .map(|(i, t)| Pattern {
                text: t,
                route: i as u32,
                exact: false,
            })
            .collect();
        LastParamRoutes::build(&list, |_| true)
    }

    #[test]
    fn a_last_segment_parameter_is_routed_by_its_prefix() {
        let t = table(&["/users/{id}", "/users", "/orgs/{org}/teams/{team}"]);
        assert_eq!(t.get("/users/42"), Some((0, (7, 9))));
        assert_eq!(t.get("/users/"), None);
        assert_eq!(t.get("/users"), None);
        assert_eq!(t.get("/users/42/"), None);
        assert_eq!(t.get("/users/4/2"), None);
        assert_eq!(
            t.get("/orgs/a/teams/b"),
            None,
            "an earlier parameter: the matcher's"
        );
        assert_eq!(t.get("/other/42"), None);
    }

    #[test]
    fn a_path_as_sent_is_routed_only_when_normalising_would_leave_it() {
        let t = table(&["/users/{id}"]);
        assert_eq!(t.get_canonical("/users/42"), Some((0, (7, 9))));
        assert_eq!(t.get_canonical("/users/.x"), Some((0, (7, 9))));
        assert_eq!(t.get_canonical("/users/..."), Some((0, (7, 10))));
        for not_canonical in [
            "/users/%34%32",
            "/users/4%2F2",
            "/users/4\\2",
            "/users/4\u{0}2",
            "/users/.",
            "/users/..",
            "/users//42",
            "/a/../users/42",
            "/users/",
            "users/42",
            "",
        ] {
            assert_eq!(t.get_canonical(not_canonical), None, "{not_canonical:?}");
        }
    }

    #[test]
    fn a_prefix_another_route_could_match_is_left_to_the_matcher() {
        for other in [
            "/users/me",
            "/{*all}",
            "/users/{*rest}",
            "/{kind}/{id}",
            "/users/x{name}",
        ] {
            assert_eq!(
                table(&["/users/{id}", other]).get("/users/42"),
                None,
                "{other}"
            );
        }
        // Routes that cannot match `/users/` + one segment leave it in the table.
        for other in [
            "/users/{id}/posts",
            "/users",
            "/users/me/settings",
            "/{a}/{b}/{c}",
        ] {
            assert_eq!(
                table(&["/users/{id}", other]).get("/users/42"),
                Some((0, (7, 9))),
                "{other}"
            );
        }
        // A static sibling routed by exact path first does not shadow the prefix.
        let list = [
            Pattern {
                text: "/users/{id}",
                route: 0,
                exact: false,
            },
            Pattern {
                text: "/users/me",
                route: 1,
                exact: true,
            },
        ];
        assert_eq!(
            LastParamRoutes::build(&list, |_| true).get("/users/42"),
            Some((0, (7, 9)))
        );
        let list = [Pattern {
            text: "/a%7e/{id}",
            route: 0,
            exact: false,
        }];
        let t = LastParamRoutes::build(&list, |p| !p.contains('%'));
        assert_eq!(t.get("/a%7e/1"), None, "a prefix that is not canonical");
    }

    /// Patterns and paths over a small alphabet, so that they collide often.
    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("ab".to_owned()),
            Just("{p}".to_owned()),
            Just("{q}".to_owned()),
            Just("x{r}".to_owned()),
            Just("{*s}".to_owned()),
        ]
    }

    fn pattern() -> impl Strategy<Value = String> {
        prop::collection::vec(segment(), 0..4).prop_map(|segs| format!("/{}", segs.join("/")))
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![Just("a"), Just("b"), Just("ab"), Just("xa"), Just("")],
            0..5,
        )
        .prop_map(|segs| format!("/{}", segs.join("/")))
    }

    /// Paths with the bytes and segments normalisation changes or refuses.
    fn raw_path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("users"),
                Just("a"),
                Just("42"),
                Just(""),
                Just("."),
                Just(".."),
                Just(".x"),
                Just("%34"),
                Just("%2F"),
                Just("%2e"),
                Just("%"),
                Just("\\"),
                Just("\0"),
            ],
            0..5,
        )
        .prop_map(|segs| format!("/{}", segs.concat().replace("users", "users/")))
    }

    proptest! {
        #[test]
        fn a_path_routed_as_sent_is_routed_as_after_normalising(
            path in raw_path(),
            keep in any::<bool>(),
        ) {
            use crate::path::{normalize_with, EncodedSlashes};
            use std::borrow::Cow;
            let slashes = if keep { EncodedSlashes::Keep } else { EncodedSlashes::Refuse };
            let t = table(&["/users/{id}", "/a/{x}", "/{top}"]);
            if let Some(found) = t.get_canonical(&path) {
                let normal = normalize_with(&path, slashes);
                prop_assert!(
                    matches!(normal, Ok(Cow::Borrowed(p)) if p == path),
                    "{:?} normalises to {:?}", path, normal
                );
                prop_assert_eq!(t.get(&path), Some(found));
            } else if let (Ok(Cow::Borrowed(_)), Some(_)) = (normalize_with(&path, slashes), t.get(&path)) {
                // Declined although canonical: only for a last segment with a `%` escape.
                let last = &path[path.rfind('/').unwrap() + 1..];
                prop_assert!(last.contains('%'), "{:?} declined", path);
            }
        }

        #[test]
        fn last_param_routes_agree_with_the_matcher(
            patterns in prop::collection::vec(pattern(), 1..8),
            paths in prop::collection::vec(path(), 1..16),
        ) {
            let mut matcher = matchit::Router::new();
            let mut texts: Vec<(String, u32)> = Vec::new();
            for p in &patterns {
                let route = texts.len() as u32;
                if matcher.insert(p.as_str(), route).is_ok() {
                    texts.push((p.clone(), route));
                }
            }
            // Static patterns are routed by exact path first, as `Routing::route_of` does.
            let exact = |t: &str| !t.contains('{');
            let list: Vec<Pattern<'_>> = texts
                .iter()
                .map(|(t, r)| Pattern { text: t, route: *r, exact: exact(t) })
                .collect();
            let table = LastParamRoutes::build(&list, |_| true);
            for path in &paths {
                if texts.iter().any(|(t, _)| exact(t) && t == path) {
                    continue;
                }
                if let Some((route, (s, e))) = table.get(path) {
                    let m = matcher.at(path).expect("the matcher matches what the table does");
                    prop_assert_eq!(*m.value, route, "{} in {:?}", path, texts);
                    let (_, value) = m.params.iter().last().expect("one parameter");
                    prop_assert_eq!(value, &path[s as usize..e as usize]);
                }
            }
        }
    }
}
