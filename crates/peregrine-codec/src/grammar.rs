//! The byte classes of the HTTP grammar (RFC 9110 §5, RFC 3986), defined once for the parser,
//! the response encoder, the engine and the framework's router.
//!
//! Each class is a `const fn` definition (readable, used to build tables at compile time) and,
//! for the classes tested per byte on hot paths, a 256-entry table behind the public predicate:
//! one load per byte, no branches on the byte's value.
//!
//! ```
//! use peregrine_codec::grammar;
//!
//! assert!(grammar::is_token(b"Content-Type"));
//! assert!(!grammar::is_token(b"Content Type"));
//! assert!(grammar::is_field_value(b"text/plain; charset=utf-8"));
//! assert!(!grammar::is_field_value(b"a\r\nInjected: yes"));
//! ```

/// `tchar` (RFC 9110 §5.6.2), by definition: the bytes of a method or a field name.
pub(crate) const fn tchar(b: u8) -> bool {
    matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`'
        | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

/// Field-value bytes (RFC 9110 §5.5), by definition: HTAB, SP, VCHAR and obs-text. Excludes
/// every other CTL (NUL, CR, LF...) and DEL. The same set `http::HeaderValue` accepts, so an
/// HTTP/2 response never refuses a value HTTP/1.1 sends, nor the reverse.
pub(crate) const fn field_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7F)
}

/// Request-target bytes that need no further attention: RFC 3986 unreserved, sub-delims, `:`,
/// `@` and `/`. `%`, `?`, `[` and `]` are legal in places but stop the parser's fast scan so
/// that it can validate percent-encoding, find the query and police brackets.
pub(crate) const fn target_plain(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
        | b':' | b'@' | b'/')
}

/// RFC 3986 reg-name bytes other than `%`: unreserved and sub-delims, minus `,` (a comma in a
/// Host value is a list, which the rules reject).
pub(crate) const fn reg_name(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b';' | b'=')
}

static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = tchar(i as u8);
        i += 1;
    }
    t
};

static FIELD_VALUE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = field_value_byte(i as u8);
        i += 1;
    }
    t
};

/// Whether `b` is a `tchar` (RFC 9110 §5.6.2): a byte of a token, that is of a method or a
/// field name.
///
/// ```
/// use peregrine_codec::grammar::is_tchar;
/// assert!(is_tchar(b'a') && is_tchar(b'-') && is_tchar(b'~'));
/// assert!(!is_tchar(b':') && !is_tchar(b' ') && !is_tchar(b'"'));
/// ```
#[inline]
pub fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// Whether `s` is a token (`1*tchar`): a valid method or field name.
#[inline]
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Whether `b` may appear in a field value (RFC 9110 §5.5): HTAB, SP, visible ASCII and
/// obs-text (`0x80..=0xFF`); never NUL, CR, LF, another control or DEL. This is the one rule
/// for every response field value, on HTTP/1.1 and HTTP/2 alike (`docs/http1-rules.md`).
///
/// ```
/// use peregrine_codec::grammar::is_field_value_byte;
/// assert!(is_field_value_byte(b'a') && is_field_value_byte(b'\t') && is_field_value_byte(0xE9));
/// assert!(!is_field_value_byte(b'\r') && !is_field_value_byte(0x01) && !is_field_value_byte(0x7F));
/// ```
#[inline]
pub fn is_field_value_byte(b: u8) -> bool {
    FIELD_VALUE[b as usize]
}

/// Whether every byte of `v` may appear in a field value (see [`is_field_value_byte`]).
///
/// Eight bytes at a time: a word with no byte below `0x20` and none equal to `0x7F` is all
/// field-value bytes (the classic "has a byte less than n" and "has a zero byte" tests); only a
/// word that fails them (a control, or just an HTAB) is looked at byte by byte. Response heads
/// are encoded with this check, so it stays word-wise; it is tested equal to the per-byte rule
/// for every byte at every position.
///
/// ```
/// use peregrine_codec::grammar::is_field_value;
/// assert!(is_field_value(b"text/plain; charset=utf-8"));
/// assert!(is_field_value(b"caf\xc3\xa9\tok"));
/// assert!(!is_field_value(b"text/plain\r\nX: y"));
/// assert!(!is_field_value(b"bell\x07"));
/// ```
#[inline]
pub fn is_field_value(v: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Exact as a yes/no for n <= 0x80 (a borrow only follows a byte that is itself below n).
    #[inline(always)]
    fn has_byte_below(w: u64, n: u64) -> bool {
        w.wrapping_sub(ONES * n) & !w & HIGHS != 0
    }
    let mut words = v.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        if (has_byte_below(w, 0x20) || has_byte_below(w ^ (ONES * 0x7F), 1))
            && !chunk.iter().all(|&b| is_field_value_byte(b))
        {
            return false;
        }
    }
    words.remainder().iter().all(|&b| is_field_value_byte(b))
}

/// Optional whitespace (`OWS`, RFC 9110 §5.6.3): SP or HTAB.
#[inline]
pub const fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `s` without leading and trailing [`OWS`](is_ows).
#[inline]
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// `name` (a field name, so only `tchar` bytes) equals `lower` (lowercase letters and `-`),
/// ignoring ASCII case. Setting bit 5 lowercases letters and leaves `-` alone; the only other
/// byte it could turn into a letter or `-` is a control byte, and those are not `tchar`.
///
/// Every name we look for is 4 to 17 bytes long, so two overlapping word loads (the first and
/// the last 4 or 8 bytes) cover it: each byte is compared independently, so overlap is harmless,
/// and the lengths are constants, so this compiles to a handful of instructions.
#[inline(always)]
pub(crate) fn name_is<const N: usize>(name: &[u8], lower: &[u8; N]) -> bool {
    debug_assert!(lower.iter().all(|&b| b.is_ascii_lowercase() || b == b'-'));
    const { assert!(N >= 4 && N <= 24) };
    let Ok(name) = <&[u8; N]>::try_from(name) else {
        return false;
    };
    if N >= 8 {
        let w = |s: &[u8; N], at: usize| {
            u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8])) | 0x2020_2020_2020_2020
        };
        w(name, 0) == w(lower, 0)
            && w(name, N - 8) == w(lower, N - 8)
            && (N <= 16 || w(name, 8) == w(lower, 8))
    } else {
        let w = |s: &[u8; N], at: usize| {
            u32::from_le_bytes(s[at..at + 4].try_into().unwrap_or([0; 4])) | 0x2020_2020
        };
        w(name, 0) == w(lower, 0) && w(name, N - 4) == w(lower, N - 4)
    }
}

/// `HEXDIG` (RFC 5234 B.1), either case.
#[inline(always)]
pub(crate) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tchar_is_exactly_the_rfc_set() {
        let rfc: Vec<u8> = (0..=255u8)
            .filter(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
            .collect();
        let ours: Vec<u8> = (0..=255u8).filter(|&b| is_tchar(b)).collect();
        assert_eq!(ours, rfc);
        assert!(is_token(b"GET") && !is_token(b"") && !is_token(b"a b"));
    }

    #[test]
    fn field_value_bytes_exclude_controls_and_del_only() {
        for b in 0..=255u8 {
            let want = b == b'\t' || (0x20..=0x7E).contains(&b) || b >= 0x80;
            assert_eq!(is_field_value_byte(b), want, "{b:#04x}");
        }
    }

    /// The word-wise check is the per-byte rule: every byte, at every position of values of
    /// 0 to 24 bytes, among fillers that are allowed but sit next to the refused ones.
    #[test]
    fn word_wise_check_is_the_per_byte_rule_for_every_byte_at_every_position() {
        for filler in [b'a', b'\t', b' ', 0x7E, 0x80, 0xFF, 0x21] {
            for len in 0..=24 {
                let clean = vec![filler; len];
                assert!(is_field_value(&clean), "{filler:#04x} x {len}");
                for pos in 0..len {
                    for b in 0..=255u8 {
                        let mut v = clean.clone();
                        v[pos] = b;
                        assert_eq!(
                            is_field_value(&v),
                            is_field_value_byte(b),
                            "{b:#04x} at {pos} of {len} among {filler:#04x}"
                        );
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Any value: the word-wise answer is the per-byte one.
        #[test]
        fn word_wise_check_agrees_with_the_per_byte_rule(v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            proptest::prop_assert_eq!(is_field_value(&v), v.iter().all(|&b| field_value_byte(b)));
        }
    }

    #[test]
    fn ows_is_trimmed_on_both_sides_only() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
    }

    fn check_name_is<const N: usize>(word: &[u8; N]) {
        let mut name = word.to_vec();
        for i in 0..N {
            for b in (0..=255u8).filter(|&b| is_tchar(b)) {
                name[i] = b;
                assert_eq!(
                    name_is(&name, word),
                    name.eq_ignore_ascii_case(word),
                    "{name:?}"
                );
            }
            name[i] = word[i];
        }
        assert!(name_is(&word.to_ascii_uppercase(), word));
        assert!(!name_is(&word[1..], word));
        let mut longer = word.to_vec();
        longer.push(b'x');
        assert!(!name_is(&longer, word));
    }

    #[test]
    fn name_is_matches_eq_ignore_ascii_case_for_every_tchar_substitution() {
        check_name_is(b"host");
        check_name_is(b"expect");
        check_name_is(b"connection");
        check_name_is(b"content-length");
        check_name_is(b"transfer-encoding");
    }
}
