//! `Range: bytes=…` (RFC 9110 §14.1.2, §14.2): parsing against a representation length.

use smallvec::SmallVec;

/// At most this many ranges in one request are honoured; past it the header is ignored and
/// the whole file is sent (RFC 9110 §14.2 lets a server ignore a Range it finds excessive; it
/// stops many-tiny-ranges amplification).
pub(crate) const MAX_RANGES: usize = 16;

/// Inclusive byte positions `(first, last)`.
pub(crate) type ByteRange = (u64, u64);

/// What a `Range` header asks of a representation of a given length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ranges {
    /// Not a valid `bytes` range set (or too many ranges): answer as if there were no `Range`.
    Ignore,
    /// Valid, but no range overlaps the representation: 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
    /// The satisfiable ranges, clamped to the representation, in request order; overlapping
    /// ranges are coalesced (§14.2 allows it), and a coalesced set is in ascending order.
    Satisfiable(SmallVec<[ByteRange; 1]>),
}

/// Evaluates `header` (the `Range` field value) against a representation of `len` bytes.
pub(crate) fn parse(header: &str, len: u64) -> Ranges {
    let Some((unit, set)) = header.split_once('=') else {
        return Ranges::Ignore;
    };
    // Range units are case-insensitive (§14.1); only `bytes` is known here.
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Ranges::Ignore;
    }
    let mut specs: SmallVec<[ByteRange; 1]> = SmallVec::new();
    let mut count = 0;
    for spec in set.split(',') {
        let spec = spec.trim_matches([' ', '\t']);
        if spec.is_empty() {
            // The list rule (§5.6.1) lets recipients skip empty elements.
            continue;
        }
        count += 1;
        if count > MAX_RANGES {
            return Ranges::Ignore;
        }
        let Some((first, last)) = spec.split_once('-') else {
            return Ranges::Ignore;
        };
        if first.is_empty() {
            // suffix-range: the last N bytes.
            let Some(n) = digits(last) else {
                return Ranges::Ignore;
            };
            if n > 0 && len > 0 {
                specs.push((len - n.min(len), len - 1));
            }
            continue;
        }
        let Some(first) = digits(first) else {
            return Ranges::Ignore;
        };
        let last = if last.is_empty() {
            u64::MAX
        } else {
            match digits(last) {
                Some(l) if l >= first => l,
                // last < first makes the whole header invalid (§14.1.1).
                _ => return Ranges::Ignore,
            }
        };
        if first < len {
            specs.push((first, last.min(len - 1)));
        }
    }
    if count == 0 {
        return Ranges::Ignore;
    }
    if specs.is_empty() {
        return Ranges::Unsatisfiable;
    }
    Ranges::Satisfiable(coalesce(specs))
}

/// `1*DIGIT`, saturating (a huge last-pos means "to the end", a huge first-pos is past it).
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

/// Coalesces overlapping or touching ranges (sorted) when any overlap; otherwise keeps the
/// request order.
fn coalesce(mut r: SmallVec<[ByteRange; 1]>) -> SmallVec<[ByteRange; 1]> {
    if r.len() < 2 {
        return r;
    }
    let mut sorted = r.clone();
    sorted.sort_unstable();
    let overlaps = sorted
        .windows(2)
        .any(|w| w[1].0 <= w[0].1.saturating_add(1));
    if !overlaps {
        return r;
    }
    r.clear();
    for (a, b) in sorted {
        match r.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => r.push((a, b)),
        }
    }
    r
}

/// Total bytes of `ranges`.
pub(crate) fn total(ranges: &[ByteRange]) -> u64 {
    ranges.iter().map(|&(a, b)| b - a + 1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sat(v: &[ByteRange]) -> Ranges {
        Ranges::Satisfiable(v.iter().copied().collect())
    }

    #[test]
    fn rfc_9110_examples() {
        // §14.1.2, a representation of 10000 bytes.
        assert_eq!(parse("bytes=0-499", 10000), sat(&[(0, 499)]));
        assert_eq!(parse("bytes=500-999", 10000), sat(&[(500, 999)]));
        assert_eq!(parse("bytes=-500", 10000), sat(&[(9500, 9999)]));
        assert_eq!(parse("bytes=9500-", 10000), sat(&[(9500, 9999)]));
        assert_eq!(parse("bytes=0-0,-1", 10000), sat(&[(0, 0), (9999, 9999)]));
        assert_eq!(
            parse("bytes= 0-999, 4500-5499, -1000", 10000),
            sat(&[(0, 999), (4500, 5499), (9000, 9999)])
        );
        assert_eq!(parse("bytes=500-600,601-999", 10000), sat(&[(500, 999)]));
        assert_eq!(parse("bytes=500-700,601-999", 10000), sat(&[(500, 999)]));
    }

    #[test]
    fn clamping_and_satisfiability() {
        assert_eq!(parse("bytes=0-99999999999999999999999", 10), sat(&[(0, 9)]));
        assert_eq!(parse("bytes=-20", 10), sat(&[(0, 9)]));
        assert_eq!(parse("bytes=10-", 10), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=-0", 10), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=0-", 0), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=-5", 0), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=20-30, 5-6", 10), sat(&[(5, 6)]));
        assert_eq!(parse("BYTES=1-2", 10), sat(&[(1, 2)]));
        assert_eq!(parse("bytes=1-2,,", 10), sat(&[(1, 2)]));
    }

    #[test]
    fn invalid_headers_are_ignored() {
        for h in [
            "",
            "bytes",
            "bytes=",
            "bytes=,",
            "items=0-1",
            "bytes=a-b",
            "bytes=5-1",
            "bytes=-",
            "bytes=1",
            "bytes=0x1-2",
            "bytes=+1-2",
            "bytes=1-2;x",
            "bytes=--1",
            "bytes=1--2",
        ] {
            assert_eq!(parse(h, 100), Ranges::Ignore, "{h:?}");
        }
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(parse(&many, 100), Ranges::Ignore);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Every satisfiable answer lies inside the representation, is non-empty, and never
        /// adds up to more than the representation when ranges were coalesced.
        #[test]
        fn ranges_stay_inside(h in "(bytes|BYTES|x)=[-0-9, ]{0,24}", len in 0u64..2000) {
            match parse(&h, len) {
                Ranges::Satisfiable(r) => {
                    prop_assert!(!r.is_empty() && r.len() <= MAX_RANGES);
                    for &(a, b) in &r {
                        prop_assert!(a <= b && b < len, "{} {:?}", h, r);
                    }
                }
                Ranges::Unsatisfiable => prop_assert!(h.starts_with("bytes") || h.starts_with("BYTES")),
                Ranges::Ignore => {}
            }
        }

        #[test]
        fn any_text_is_handled(h in "\\PC*", len in any::<u64>()) {
            if let Ranges::Satisfiable(r) = parse(&h, len) {
                for &(a, b) in &r {
                    prop_assert!(a <= b && b < len);
                }
            }
        }
    }
}
