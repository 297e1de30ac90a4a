// Over 600 lines: one tuned function (`parse_fast`, kept whole for its register allocation; see docs/performance.md) and its tests.
//! The fast path: the common request head (a known method, an origin-form target, `HTTP/1.1` or
//! `HTTP/1.0`, ordinary field lines) parsed with as few instructions as possible.
//!
//! It decides nothing on its own. It reports a complete head only when every check of the
//! general parser ([`crate::parse::parse_core`]) has passed, with exactly the values that parser
//! would return and the same field table contents; on anything else (an error, an incomplete
//! head, a limit reached, an unusual but valid shape such as leading empty lines, an
//! absolute-form target, a method it does not know by one word compare) it declines and the
//! caller runs the general parser from the start. So the rules and the error statuses live in
//! one place, and the fast path can only ever be slower to say "no", never different.
//! `tests/fast.rs` and every rules and property test compare it with the general parser alone.

use crate::head::{
    BodyFraming, ConnectionDirective, Expectation, FieldSpan, Method, RequestHead, Span, Version,
};
use crate::parse::{
    name_is, parse_connection, parse_content_length, parse_transfer_encoding, span,
    te_lists_trailers, validate_authority,
};
use crate::scan::{Scan, HOST, TARGET};
use crate::Limits;

/// Little-endian word of the first `N` bytes of `s` (for comparisons with loaded words).
const fn word<const N: usize>(s: &[u8; N]) -> u64 {
    let mut w = 0u64;
    let mut i = 0;
    while i < N {
        w |= (s[i] as u64) << (8 * i);
        i += 1;
    }
    w
}

/// The low `n` bytes of a word.
const fn mask(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

/// The method, the SP after it and the `/` that starts an origin-form target, from the first
/// 8 bytes as one word: the method kind and the index of that SP.
#[inline(always)]
fn method(w: u64) -> Option<(usize, Method)> {
    // `GET /` first: the overwhelmingly common case costs one compare.
    if w & mask(5) == word(b"GET /") {
        return Some((3, Method::Get));
    }
    if w & mask(6) == word(b"POST /") {
        return Some((4, Method::Post));
    }
    if w & mask(5) == word(b"PUT /") {
        return Some((3, Method::Put));
    }
    if w & mask(6) == word(b"HEAD /") {
        return Some((4, Method::Head));
    }
    if w & mask(7) == word(b"PATCH /") {
        return Some((5, Method::Patch));
    }
    if w == word(b"DELETE /") {
        return Some((6, Method::Delete));
    }
    None
}

#[inline(always)]
fn load_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

#[inline(always)]
fn load_u16(buf: &[u8], at: usize) -> u16 {
    let mut b = [0u8; 2];
    b.copy_from_slice(&buf[at..at + 2]);
    u16::from_le_bytes(b)
}

const CRLF: u16 = u16::from_le_bytes(*b"\r\n");

/// `buf[at..at + 2]` is a CRLF (one bounds check, one 16-bit compare).
#[inline(always)]
fn crlf_at(buf: &[u8], at: usize) -> bool {
    buf.get(at..at + 2) == Some(&b"\r\n"[..])
}

/// `buf[i]` without a bounds check.
///
/// # Safety
/// `i < buf.len()`.
#[inline(always)]
unsafe fn byte(buf: &[u8], i: usize) -> u8 {
    debug_assert!(i < buf.len());
    // SAFETY: the caller's contract.
    unsafe { *buf.get_unchecked(i) }
}

/// The first byte at or after `i` that is not SP or HTAB (the CR of the line at the latest).
#[cold]
#[inline(never)]
fn skip_ows(buf: &[u8], mut i: usize) -> usize {
    while matches!(buf.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// `end` moved back over trailing SP and HTAB, not before `start`.
#[cold]
#[inline(never)]
fn trim_ows_end(buf: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && matches!(buf[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    end
}

/// `buf[start..end]` (not empty) is a reg-name or IPv4 address of plain bytes (no `%HH`),
/// optionally followed by `:` and a port of 1 to 5 digits up to 65535: the common Host value,
/// which [`validate_authority`] accepts. `false` means "not this shape", not "invalid": the
/// caller then asks [`validate_authority`].
#[inline(always)]
fn host_is_plain<S: Scan>(s: S, buf: &[u8], start: usize, end: usize) -> bool {
    let i = s.skip_range(buf, start, end, &HOST);
    if i == end {
        return true;
    }
    if i == start || buf[i] != b':' {
        return false;
    }
    port_is_valid(buf, i + 1, end)
}

/// The value of a `Host: ` line, from `start` (just after the SP): a non-empty reg-name or IPv4
/// address of plain bytes, optionally `:` and a port of 1 to 5 digits up to 65535, then CRLF.
/// Returns the index of the CR. Such a value is a valid field value without surrounding OWS
/// and a valid Host for [`validate_authority`], so the field line and the Host check of the
/// general parser both accept it. `None` is "not this shape" (the caller declines).
#[inline(always)]
fn plain_host_line<S: Scan>(s: S, buf: &[u8], start: usize) -> Option<usize> {
    let i = s.skip_near(buf, start, &HOST);
    if i == start {
        return None;
    }
    match buf.get(i) {
        Some(b'\r') => return crlf_at(buf, i).then_some(i),
        Some(b':') => {}
        _ => return None,
    }
    // The port: find the CR among the next 8 bytes (a byte equal to CR is a zero byte of
    // `x ^ CRs`; the lowest set bit of the classic zero-byte test marks the first one).
    let p = i + 1;
    if p + 8 > buf.len() {
        return None;
    }
    let x = load_u64(buf, p) ^ 0x0D0D_0D0D_0D0D_0D0D;
    let zero = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
    let cr = p + (zero.trailing_zeros() / 8) as usize;
    if zero == 0 || !crlf_at(buf, cr) || !port_is_valid(buf, p, cr) {
        return None;
    }
    Some(cr)
}

/// `buf[start..end]` is 1 to 5 ASCII digits with a value up to 65535 (leading zeros allowed),
/// as [`validate_authority`] requires of a port. With 8 bytes readable from `start`, the digits
/// are checked and compared at once in one word (SWAR), with a byte loop otherwise.
#[inline(always)]
pub(crate) fn port_is_valid(buf: &[u8], start: usize, end: usize) -> bool {
    let n = end - start;
    if n.wrapping_sub(1) >= 5 {
        return false;
    }
    if start + 8 <= buf.len() {
        // The port's `n` bytes moved to the top of the word, `0` digits filling the bytes below:
        // an 8-digit decimal string with leading zeros, the last digit in the top byte.
        let fill = word(b"00000000") >> (8 * n);
        let x = load_u64(buf, start) << (64 - 8 * n) | fill;
        // A byte is a digit iff its high nibble is 3 and adding 6 keeps it 3 (0x30..=0x39;
        // 0x3A..=0x3F become 0x40..=0x45). After the first test every byte is at most 0x3F,
        // so adding 6 never carries into the next byte.
        const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
        const THREES: u64 = 0x3030_3030_3030_3030;
        if x & HIGH != THREES || (x + 0x0606_0606_0606_0606) & HIGH != THREES {
            return false;
        }
        // Byte-reversed, the first digit is the most significant: equal-length digit strings
        // compare as numbers, and with the leading zeros every port is 8 digits long.
        return x.swap_bytes() <= word(b"00065535").swap_bytes();
    }
    buf[start..end].iter().all(u8::is_ascii_digit) && (n < 5 || buf[start..end] <= b"65535"[..])
}

/// Lengths of the field names that [`special_field`] handles (Expect, Connection,
/// Content-Length, Transfer-Encoding), as a bit set.
const SPECIAL_LENGTHS: u32 = 1 << 2 | 1 << 6 | 1 << 10 | 1 << 14 | 1 << 17;

/// A head to fill in: [`parse_fast`] sets every field it finds a value for; the others keep
/// these values, which are what a head without Host, body framing, Connection or Expect
/// fields has.
pub(crate) const EMPTY_HEAD: RequestHead = RequestHead {
    head_len: 0,
    method: Span { start: 0, len: 0 },
    method_kind: Method::Other,
    target: Span { start: 0, len: 0 },
    path: Span { start: 0, len: 0 },
    query: None,
    version: Version::Http11,
    field_count: 0,
    authority: None,
    framing: BodyFraming::None,
    connection: ConnectionDirective {
        close: false,
        keep_alive: false,
        upgrade: false,
    },
    expect: Expectation::None,
    te_trailers: false,
};

/// A field named TE, Expect, Connection, Content-Length or Transfer-Encoding (told apart by
/// `name_len`), value `buf[v_start..vt]`, treated exactly as the general parser treats it, with
/// the outcome kept in `head` (`framing` stands for the general parser's `content_length`,
/// `te_seen` and `chunked`); `false` where the general parser would answer an error (the fast
/// path then declines and lets it). Out of line: most requests have none of these, and the
/// common one (Connection) is cheap enough through a call.
#[inline(never)]
fn special_field(
    buf: &[u8],
    name_len: usize,
    v_start: usize,
    vt: usize,
    head: &mut RequestHead,
) -> bool {
    let value = &buf[v_start..vt];
    match name_len {
        // A server MUST ignore a 100-continue expectation from HTTP/1.0 (see parse/head_fields.rs).
        6 if head.version == Version::Http11 => {
            head.expect = if value.eq_ignore_ascii_case(b"100-continue")
                && head.expect != Expectation::Unknown
            {
                Expectation::Continue
            } else {
                Expectation::Unknown
            };
        }
        6 => {}
        2 => head.te_trailers |= te_lists_trailers(head.version, value),
        10 => parse_connection(value, &mut head.connection),
        14 => {
            // A second Content-Length, or one after Transfer-Encoding, is an error.
            if head.framing != BodyFraming::None {
                return false;
            }
            match parse_content_length(value) {
                Ok(n) => head.framing = BodyFraming::Length(n),
                Err(_) => return false,
            }
        }
        // 17: Transfer-Encoding. In HTTP/1.0, twice, or with Content-Length: an error.
        _ => {
            if head.version == Version::Http10 || head.framing != BodyFraming::None {
                return false;
            }
            if parse_transfer_encoding(value).is_err() {
                return false;
            }
            head.framing = BodyFraming::Chunked;
        }
    }
    true
}

/// See the module documentation. Fills `head` (which must start as [`EMPTY_HEAD`]) and the
/// field table and returns `true`, or returns `false` with both in any state. `fields` must be
/// the caller's whole table (the field-count limit is applied here, as the general parser
/// does).
///
/// Results are stored into `head` as soon as they are known rather than kept in registers to
/// the end: the function then has few values live across its loop, and building the result
/// costs one store per field.
#[inline(always)]
pub(crate) fn parse_fast<S: Scan>(
    s: S,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    head: &mut RequestHead,
) -> bool {
    let buf = &buf[..buf.len().min(u32::MAX as usize)];
    let len = buf.len();
    // The shortest complete head is longer than this (`GET / HTTP/1.1\r\n\r\n` is 18 bytes),
    // and it lets the method word be read without a check.
    if len < 16 {
        return false;
    }

    // --- Request line. A first byte of CR or LF (leading empty lines) matches no method. ---
    let Some((m_end, method_kind)) = method(load_u64(buf, 0)) else {
        return false;
    };
    let t_start = m_end + 1;
    let mut first_q: Option<usize> = None;
    let mut t = t_start + 1;
    // Unbounded scans here and below: a stop found past a limit is checked against the limit
    // afterwards (and declined), which is the same as a scan cut at the limit.
    let t_end = loop {
        t = s.skip_near(buf, t, &TARGET);
        if t >= len {
            return false;
        }
        let b = buf[t];
        if b == b' ' {
            break t;
        }
        match b {
            b'?' => {
                if first_q.is_none() {
                    first_q = Some(t);
                }
                t += 1;
            }
            b'%' if t + 2 < len
                && buf[t + 1].is_ascii_hexdigit()
                && buf[t + 2].is_ascii_hexdigit() =>
            {
                t += 3;
            }
            _ => return false,
        }
    };
    if t_end - t_start > limits.max_target_len {
        return false;
    }
    let v = t_end + 1;
    if len < v + 10 || load_u16(buf, v + 8) != CRLF {
        return false;
    }
    head.version = match load_u64(buf, v) {
        w if w == word(b"HTTP/1.1") => Version::Http11,
        w if w == word(b"HTTP/1.0") => Version::Http10,
        _ => return false,
    };
    head.method = span(0, m_end);
    head.method_kind = method_kind;
    head.target = span(t_start, t_end);
    (head.path, head.query) = match first_q {
        Some(q) => (span(t_start, q), Some(span(q + 1, t_end))),
        None => (head.target, None),
    };

    // --- Header fields. ---
    let hdr_start = v + 10;
    let max_field_line = limits.max_field_line;
    // `n < fields.len()` is checked per field (it bounds the store); `n <= max_fields` once,
    // at the end (the count only grows, so the general parser's per-field 431 happens iff the
    // final count is over).
    let mut pos = hdr_start;
    let mut n = 0usize;
    // Host value as `start..end`; `end == 0` (no value can end at 0) means no Host yet.
    let (mut host_start, mut host_end) = (0usize, 0usize);
    head.head_len = loop {
        match buf.get(pos) {
            None => return false,
            Some(b'\r') => {
                // The end of the head (a CR starts no field line), if it is a CRLF within the
                // limit.
                if crlf_at(buf, pos) && pos + 2 - hdr_start <= limits.max_header_bytes {
                    break pos + 2;
                }
                return false;
            }
            Some(_) => {}
        }
        // `Host: ` (any case) with a plain host[:port] value: the line and the value's rules
        // in one pass (see `plain_host_line`). Any other Host line takes the general way below.
        if host_end == 0
            && pos + 8 <= len
            && (load_u64(buf, pos) | 0x2020_2020) & mask(6) == word(b"host: ")
        {
            if let Some(value_end) = plain_host_line(s, buf, pos + 6) {
                if value_end - pos > max_field_line || n >= fields.len() {
                    return false;
                }
                fields[n] = FieldSpan {
                    name: span(pos, pos + 4),
                    value: span(pos + 6, value_end),
                };
                n += 1;
                (host_start, host_end) = (pos + 6, value_end);
                head.authority = Some(span(pos + 6, value_end));
                pos = value_end + 2;
                continue;
            }
        }
        let (name_end, value_end) = s.field_line(buf, pos);
        // `value_end` is the first byte from `pos` that is no field-value byte: it must be the
        // CR of a CRLF, inside the field-line limit. (The header-section limit is checked once,
        // at the end of the head: every line ends before it.) Then `name_end` (<= value_end:
        // every tchar is a value byte) is inside the buffer, and it must be the colon of a
        // non-empty name (a line that starts with whitespace has an empty name).
        let next = value_end + 2;
        if value_end - pos > max_field_line
            || !crlf_at(buf, value_end)
            || name_end == pos
            // SAFETY: name_end <= value_end < value_end + 2 <= len (crlf_at above).
            || unsafe { byte(buf, name_end) } != b':'
            || n >= fields.len()
        {
            return false;
        }
        // Leading OWS: usually exactly one SP; more goes out of line (a loop here costs more
        // in register moves than it ever runs). Every index below is at most `value_end`
        // (OWS and `:` are value bytes, so the value runs at least past them), which is in
        // bounds as shown above.
        let mut v_start = name_end + 1;
        // SAFETY: buf[name_end] is `:`, a value byte, so name_end + 1 <= value_end.
        if unsafe { byte(buf, v_start) } == b' ' {
            v_start += 1;
        }
        // SAFETY: if buf[name_end + 1] is SP (a value byte), then name_end + 2 <= value_end.
        if matches!(unsafe { byte(buf, v_start) }, b' ' | b'\t') {
            v_start = skip_ows(buf, v_start);
        }
        let mut vt = value_end;
        // SAFETY: v_start < vt = value_end, so 0 <= vt - 1 < len.
        if vt > v_start && matches!(unsafe { byte(buf, vt - 1) }, b' ' | b'\t') {
            vt = trim_ows_end(buf, v_start, vt);
        }
        fields[n] = FieldSpan {
            name: span(pos, name_end),
            value: span(v_start, vt),
        };
        n += 1;
        // Fields that decide framing, routing or connection handling, by length first so that
        // an ordinary field costs one test. Host is only recorded here and checked after the
        // loop (the fast path declines on any failure, so the order of checks does not matter,
        // and after the loop fewer values are live); the rarer ones go out of line.
        let name_len = name_end - pos;
        // SAFETY (both reads): name_end <= value_end < len, as shown above.
        if name_len == 4 && name_is(unsafe { buf.get_unchecked(pos..name_end) }, b"host") {
            if host_end != 0 {
                return false;
            }
            (host_start, host_end) = (v_start, vt);
        } else if name_len < 32 && (SPECIAL_LENGTHS >> name_len) & 1 != 0 {
            let name = unsafe { buf.get_unchecked(pos..name_end) };
            let special = match name_len {
                2 => name.eq_ignore_ascii_case(b"te"),
                6 => name_is(name, b"expect"),
                10 => name_is(name, b"connection"),
                14 => name_is(name, b"content-length"),
                17 => name_is(name, b"transfer-encoding"),
                _ => false,
            };
            if special && !special_field(buf, name_len, v_start, vt, head) {
                return false;
            }
        }
        pos = next;
    };
    if n > limits.max_fields {
        return false;
    }
    head.field_count = n;

    // --- Host and the effective authority (origin-form: from Host only). ---
    if host_end == 0 {
        // No Host field: only HTTP/1.0 may omit it.
        return head.version == Version::Http10;
    }
    // Already checked by `plain_host_line`, or to be checked now.
    if head.authority.is_none() && host_end > host_start {
        if !host_is_plain(s, buf, host_start, host_end)
            && validate_authority(s, buf, host_start, host_end, false).is_err()
        {
            return false;
        }
        head.authority = Some(span(host_start, host_end));
    }
    true
}

/// The benchmark inputs, for the test that the fast path takes them.
#[cfg(test)]
#[path = "../benches/support/inputs.rs"]
mod inputs;

#[cfg(test)]
mod tests {
    use super::inputs;
    use super::*;
    use crate::scan::{Isa, Scalar};

    fn fast_on_every_path(buf: &[u8]) -> bool {
        let limits = Limits::default();
        let mut fields = [FieldSpan::default(); 16];
        let mut head = EMPTY_HEAD;
        let scalar = parse_fast(Scalar, buf, &limits, &mut fields, &mut head);
        for isa in Isa::available() {
            let r = match isa {
                Isa::Scalar => scalar,
                #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                Isa::Sse42 => {
                    let mut head = EMPTY_HEAD;
                    parse_fast(
                        crate::scan::Sse42::detect().unwrap(),
                        buf,
                        &limits,
                        &mut fields,
                        &mut head,
                    )
                }
                #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                Isa::Avx2 => {
                    let mut head = EMPTY_HEAD;
                    parse_fast(
                        crate::scan::Avx2::detect().unwrap(),
                        buf,
                        &limits,
                        &mut fields,
                        &mut head,
                    )
                }
                #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
                _ => scalar,
            };
            assert_eq!(r, scalar, "{isa:?}");
        }
        scalar
    }

    #[test]
    fn takes_the_common_requests() {
        // The benchmark inputs and the engine's usual traffic must not fall back: that would
        // only show as lost speed, never as a failed test elsewhere.
        for buf in [
            &b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:18080\r\n\r\n"[..],
            b"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\n\r\nGET /plaintext HTTP/1.1\r\n",
            b"POST /users?x=%20 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
            b"PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
            b"DELETE /d HTTP/1.0\r\nX:  v \t\r\n\r\n",
            b"HEAD / HTTP/1.1\r\nHost:\r\n\r\n",
            b"PATCH /p HTTP/1.1\r\nHost: a%41:80\r\n\r\n",
            inputs::MINIMAL,
            inputs::WRK,
            inputs::BROWSER,
        ] {
            assert!(fast_on_every_path(buf), "{:?}", String::from_utf8_lossy(buf));
        }
    }

    #[test]
    fn declines_what_it_does_not_handle() {
        for buf in [
            &b"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n\r",
            b"GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\nX: y\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h:65536\r\n\r\n",
            b"GET /a%4 HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            assert!(
                !fast_on_every_path(buf),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
    }

    #[test]
    fn port_is_valid_by_word_and_by_bytes() {
        for (port, ok) in [
            ("0", true),
            ("65535", true),
            ("00080", true),
            ("65536", false),
            ("99999", false),
            ("000080", false),
            ("", false),
            ("/", false),
            (":", false),
            ("8a", false),
            ("a8", false),
        ] {
            // With room for a word load after the port, and without (the byte loop).
            for pad in ["", "\r\n\r\n\r\n\r\n"] {
                let buf = format!("{port}{pad}");
                let got = port_is_valid(buf.as_bytes(), 0, port.len());
                assert_eq!(got, ok, "{port:?} with {} bytes after", pad.len());
            }
        }
        // Every byte value in every position of a 1- to 5-digit port, word and bytes agreeing.
        for n in 1..=5 {
            for at in 0..n {
                for b in 0..=255u8 {
                    let mut word = vec![b'1'; n + 8];
                    word[at] = b;
                    let want = b.is_ascii_digit() && (n < 5 || word[..5] <= b"65535"[..]);
                    assert_eq!(port_is_valid(&word, 0, n), want, "{n} {at} {b:#x}");
                    assert_eq!(port_is_valid(&word[..n], 0, n), want, "{n} {at} {b:#x}");
                }
            }
        }
    }
}
