//! Field lines: the header section's lines and its limits, field-name matching, and trailer
//! field lines (for the chunked decoder).

use super::head_fields::HeadFields;
use super::span::span;
use crate::grammar::trim_ows;
use crate::head::FieldSpan;
use crate::scan::{Scan, TCHAR, VALUE};
use crate::{Limits, ParseError};

/// The header section from `hdr_start` to its empty line (RFC 9112 §5): every field line into
/// `fields`, the ones that matter noted in `head`. The head's length and the number of fields.
#[inline(always)]
pub(super) fn field_lines<S: Scan>(
    s: S,
    buf: &[u8],
    hdr_start: usize,
    limits: &Limits,
    fields: &mut [FieldSpan],
    head: &mut HeadFields,
) -> Result<Option<(usize, usize)>, ParseError> {
    let len = buf.len();
    let hdr_limit = limits.max_header_bytes;
    // Sliced to the limit once, so `n < fields.len()` below also proves every store in bounds.
    let max_fields = fields.len().min(limits.max_fields);
    let fields = &mut fields[..max_fields];
    let mut n = 0usize;
    let mut pos = hdr_start;

    // Reports Incomplete, unless the bytes so far already break the header-section limit.
    macro_rules! incomplete {
        () => {{
            if len - hdr_start > hdr_limit {
                return Err(ParseError::new(431, "header section too large"));
            }
            return Ok(None);
        }};
    }

    loop {
        match buf.get(pos) {
            None => incomplete!(),
            Some(b'\r') => match buf.get(pos + 1) {
                None => incomplete!(),
                Some(b'\n') => {
                    if pos + 2 - hdr_start > hdr_limit {
                        return Err(ParseError::new(431, "header section too large"));
                    }
                    return Ok(Some((pos + 2, n)));
                }
                Some(_) => bad!("bare CR in header section"),
            },
            Some(b'\n') => bad!("bare LF in header section"),
            Some(b' ' | b'\t') => {
                if n == 0 {
                    bad!("whitespace before the first header field");
                }
                bad!("obsolete line folding in header field");
            }
            Some(_) => {}
        }
        if n >= fields.len() {
            return Err(ParseError::new(431, "too many header fields"));
        }

        // One field line is at most `max_field_line` bytes before its CRLF.
        let line_bound = len.min(pos + limits.max_field_line + 1);
        let line = &buf[..line_bound];
        // Both ends at once; `value_end` is only meaningful once the name ended with `:`.
        let (name_end, value_end) = s.field_line(line, pos);
        if name_end == line_bound {
            if line_bound - pos > limits.max_field_line {
                return Err(ParseError::new(431, "header field line too long"));
            }
            incomplete!();
        }
        match buf[name_end] {
            b':' if name_end == pos => bad!("empty header field name"),
            b':' => {}
            b' ' | b'\t' => bad!("whitespace between header field name and colon"),
            b'\r' | b'\n' => bad!("header field line without a colon"),
            _ => bad!("invalid byte in header field name"),
        }

        // Leading OWS: usually exactly one SP.
        let mut v_start = name_end + 1;
        if line.get(v_start) == Some(&b' ') {
            v_start += 1;
        }
        while let Some(b' ' | b'\t') = line.get(v_start) {
            v_start += 1;
        }
        let v_end = value_end;
        debug_assert!(v_end >= v_start);
        if v_end == line_bound {
            if line_bound - pos > limits.max_field_line {
                return Err(ParseError::new(431, "header field line too long"));
            }
            incomplete!();
        }
        match buf[v_end] {
            b'\r' => match buf.get(v_end + 1) {
                Some(b'\n') => {}
                None => incomplete!(),
                Some(_) => bad!("bare CR in header field value"),
            },
            b'\n' => bad!("bare LF in header field value"),
            0 => bad!("NUL in header field value"),
            _ => bad!("control character in header field value"),
        }
        let next = v_end + 2;
        if next - hdr_start > hdr_limit {
            return Err(ParseError::new(431, "header section too large"));
        }
        // Trailing OWS is not part of the value (leading OWS was skipped, so a value that is
        // all OWS is empty).
        let mut value = &buf[v_start..v_end];
        while let [rest @ .., b' ' | b'\t'] = value {
            value = rest;
        }
        let vt = v_start + value.len();
        let name = &buf[pos..name_end];
        fields[n] = FieldSpan {
            name: span(pos, name_end),
            value: span(v_start, vt),
        };
        n += 1;
        head.note(s, buf, name, value, (v_start, vt))?;
        pos = next;
    }
}

/// Validates one complete field line (without its CRLF) with the header-field rules; used for
/// trailer fields. Returns the name and the OWS-trimmed value.
pub(crate) fn parse_field_line(line: &[u8]) -> Result<(&[u8], &[u8]), ParseError> {
    match line.first() {
        Some(b' ' | b'\t') => bad!("obsolete line folding in trailer field"),
        None => bad!("empty trailer field line"),
        _ => {}
    }
    let name_end = line
        .iter()
        .position(|&b| !TCHAR.contains(b))
        .unwrap_or(line.len());
    match line.get(name_end) {
        Some(b':') if name_end == 0 => bad!("empty trailer field name"),
        Some(b':') => {}
        Some(b' ' | b'\t') => bad!("whitespace between trailer field name and colon"),
        None => bad!("trailer field line without a colon"),
        Some(_) => bad!("invalid byte in trailer field name"),
    }
    let value = &line[name_end + 1..];
    if let Some(&b) = value.iter().find(|&&b| !VALUE.contains(b)) {
        match b {
            b'\r' => bad!("bare CR in trailer field value"),
            b'\n' => bad!("bare LF in trailer field value"),
            _ => bad!("control character in trailer field value"),
        }
    }
    Ok((&line[..name_end], trim_ows(value)))
}
