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
/// every other CTL (NUL, CR, LF...) and DEL.
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
/// obs-text (`0x80..=0xFF`); never NUL, CR, LF, another control or DEL.
#[inline]
pub fn is_field_value_byte(b: u8) -> bool {
    FIELD_VALUE[b as usize]
}

/// Whether every byte of `v` may appear in a field value (see [`is_field_value_byte`]).
#[inline]
pub fn is_field_value(v: &[u8]) -> bool {
    v.iter().all(|&b| is_field_value_byte(b))
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

/// Whether `value` contains CR, LF or NUL: the bytes that would end a field line early or
/// truncate the message in a C peer (response splitting), eight bytes at a time with the
/// classic "has a zero byte" test on the word XORed with each of them.
///
/// This is what the engine refuses in a handler's field values; other controls are passed on
/// as given (they cannot change the message's structure).
///
/// ```
/// use peregrine_codec::grammar::has_line_break_or_nul;
/// assert!(has_line_break_or_nul(b"text/plain\r\nX: y"));
/// assert!(!has_line_break_or_nul(b"text/plain; charset=utf-8"));
/// ```
pub fn has_line_break_or_nul(value: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    #[inline]
    fn has_zero_byte(w: u64) -> bool {
        w.wrapping_sub(ONES) & !w & HIGHS != 0
    }
    let mut words = value.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        if has_zero_byte(w) || has_zero_byte(w ^ (ONES * 0x0d)) || has_zero_byte(w ^ (ONES * 0x0a))
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b == b'\r' || b == b'\n' || b == 0)
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

    #[test]
    fn line_breaks_and_nul_are_found_at_every_position() {
        for len in 0..40 {
            let clean = vec![b'a'; len];
            assert!(!has_line_break_or_nul(&clean), "clean value of {len} bytes");
            for pos in 0..len {
                for bad in [b'\r', b'\n', 0u8] {
                    let mut v = clean.clone();
                    v[pos] = bad;
                    assert!(has_line_break_or_nul(&v), "{bad:#x} at {pos} of {len}");
                }
            }
        }
        // Bytes next to the forbidden ones (and high bytes) are allowed.
        assert!(!has_line_break_or_nul(
            b"\x0b\x0c\x0e\x09\x01\x80\xff text/plain; q=1"
        ));
    }

    #[test]
    fn ows_is_trimmed_on_both_sides_only() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
    }
}
