//! The request line around its target: leading empty lines, the method, the version.

use crate::head::{Method, Version};
use crate::scan::{Scan, TCHAR};
use crate::{Limits, ParseError};

/// Methods longer than this are refused with 501 before the request line completes: no method we
/// could route is anywhere near this long, and it bounds the work done on garbage.
pub(crate) const MAX_METHOD_LEN: usize = 64;

/// Leading empty lines (RFC 9112 §2.2): at most `max_leading_empty_lines` CRLFs. The index of
/// the request line's first byte.
#[inline(always)]
pub(super) fn skip_leading_empty_lines(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<usize>, ParseError> {
    let mut pos = 0;
    let mut empties = 0;
    loop {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'\r') => match buf.get(pos + 1) {
                None => return Ok(None),
                Some(b'\n') => {
                    empties += 1;
                    if empties > limits.max_leading_empty_lines {
                        bad!("too many empty lines before the request line");
                    }
                    pos += 2;
                }
                Some(_) => bad!("bare CR before the request line"),
            },
            Some(b'\n') => bad!("bare LF before the request line"),
            Some(_) => return Ok(Some(pos)),
        }
    }
}

/// The method (`1*tchar`, then exactly one SP): the index of the SP and the method's kind.
#[inline(always)]
pub(super) fn method<S: Scan>(
    s: S,
    buf: &[u8],
    m_start: usize,
) -> Result<Option<(usize, Method)>, ParseError> {
    // Most requests are GETs: recognise `GET ` with one comparison and skip the scan.
    if buf.len() >= m_start + 4 && &buf[m_start..m_start + 4] == b"GET " {
        return Ok(Some((m_start + 3, Method::Get)));
    }
    Ok(
        scan_method(s, buf, m_start)?
            .map(|m_end| (m_end, Method::from_token(&buf[m_start..m_end]))),
    )
}

/// Scans `1*tchar SP` from `m_start`; `Ok(Some(end))` is the index of the SP.
#[inline(always)]
fn scan_method<S: Scan>(s: S, buf: &[u8], m_start: usize) -> Result<Option<usize>, ParseError> {
    let len = buf.len();
    let m_bound = len.min(m_start + MAX_METHOD_LEN + 1);
    let m_end = s.skip(&buf[..m_bound], m_start, &TCHAR);
    if m_end - m_start > MAX_METHOD_LEN {
        return Err(ParseError::new(501, "method too long"));
    }
    if m_end == len {
        return Ok(None);
    }
    if buf[m_end] != b' ' {
        if m_end == m_start {
            bad!("invalid byte before the request line");
        }
        bad!("invalid byte in method");
    }
    if m_end == m_start {
        bad!("empty method");
    }
    Ok(Some(m_end))
}

/// The version at `v`: exactly `HTTP/1.1` or `HTTP/1.0`, then CRLF (10 bytes in all).
#[inline(always)]
pub(super) fn version(buf: &[u8], v: usize) -> Result<Option<Version>, ParseError> {
    let len = buf.len();
    if len >= v + 10 && &buf[v..v + 10] == b"HTTP/1.1\r\n" {
        return Ok(Some(Version::Http11));
    }
    parse_version(&buf[v..len.min(v + 10)])
}

/// Checks what has arrived of `HTTP/D.D\r\n`. `Ok(None)` means "valid so far, need more".
/// A well-formed version other than 1.0/1.1 is 505; anything else malformed is 400.
fn parse_version(v: &[u8]) -> Result<Option<Version>, ParseError> {
    const PREFIX: &[u8] = b"HTTP/";
    for (i, &b) in v.iter().take(5).enumerate() {
        if b != PREFIX[i] {
            bad!("invalid HTTP version");
        }
    }
    let at = |i: usize| v.get(i).copied();
    if let Some(b) = at(5) {
        if !b.is_ascii_digit() {
            bad!("invalid HTTP version");
        }
    }
    if let Some(b) = at(6) {
        if b != b'.' {
            bad!("invalid HTTP version");
        }
    }
    if let Some(b) = at(7) {
        if !b.is_ascii_digit() {
            bad!("invalid HTTP version");
        }
    }
    match at(8) {
        None => return Ok(None),
        Some(b'\r') => {}
        Some(b' ') => bad!("trailing whitespace after the HTTP version"),
        Some(b'\n') => bad!("bare LF after the request line"),
        Some(_) => bad!("invalid HTTP version"),
    }
    match at(9) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => bad!("bare CR after the request line"),
    }
    match (v[5], v[7]) {
        (b'1', b'1') => Ok(Some(Version::Http11)),
        (b'1', b'0') => Ok(Some(Version::Http10)),
        _ => Err(ParseError::new(505, "HTTP version not supported")),
    }
}
