//! The request-target: its bytes and `%HH` escapes, then its form (origin, asterisk,
//! authority, absolute; RFC 9112 §3.2) split into path, query and authority.

use super::authority::validate_authority;
use super::span::span;
use crate::grammar::is_hex;
use crate::head::{Method, Span};
use crate::scan::{Scan, TARGET};
use crate::{Limits, ParseError};

/// What the scan of the request-target found.
pub(super) struct Target {
    /// Index of the SP after the target.
    pub(super) end: usize,
    /// Index of the first `?`, if any.
    first_q: Option<usize>,
    /// Whether a `[` or `]` appeared (allowed only in an authority's IP literal).
    brackets: bool,
}

/// The request-target: RFC 3986 characters, `%HH` validated, then exactly one SP.
#[inline(always)]
pub(super) fn request_target<S: Scan>(
    s: S,
    buf: &[u8],
    t_start: usize,
    limits: &Limits,
) -> Result<Option<Target>, ParseError> {
    let len = buf.len();
    let t_bound = len.min(t_start + limits.max_target_len + 1);
    let mut t = t_start;
    let mut first_q: Option<usize> = None;
    let mut brackets = false;
    let t_end = loop {
        t = s.skip(&buf[..t_bound], t, &TARGET);
        // `>=`: skipping a `%HH` may step past a bound that cut the target short.
        if t >= t_bound {
            if t - t_start > limits.max_target_len {
                return Err(ParseError::new(414, "request-target too long"));
            }
            return Ok(None);
        }
        match buf[t] {
            b'%' => {
                // Validate as many of the two hex digits as have arrived.
                for k in 1..=2 {
                    match buf.get(t + k) {
                        None => return Ok(None),
                        Some(&h) if is_hex(h) => {}
                        Some(_) => bad!("'%' not followed by two hex digits in request-target"),
                    }
                }
                t += 3;
            }
            b'?' => {
                if first_q.is_none() {
                    first_q = Some(t);
                }
                t += 1;
            }
            b'[' | b']' => {
                brackets = true;
                t += 1;
            }
            _ => break t,
        }
    };
    if t_end - t_start > limits.max_target_len {
        return Err(ParseError::new(414, "request-target too long"));
    }
    match buf[t_end] {
        b' ' if t_end == t_start => bad!("more than one SP after the method"),
        b' ' => {}
        b'\r' | b'\n' if t_end > t_start => bad!("missing HTTP version"),
        b'\t' | 0x0B | 0x0C => bad!("whitespace other than SP in the request line"),
        _ if t_end == t_start => bad!("empty or invalid request-target"),
        _ => bad!("invalid byte in request-target"),
    }
    Ok(Some(Target {
        end: t_end,
        first_q,
        brackets,
    }))
}

/// The parts of a request-target, by its form (RFC 9112 §3.2).
pub(super) struct TargetForm {
    pub(super) path: Span,
    pub(super) query: Option<Span>,
    /// The authority the target itself carries (absolute-form and authority-form).
    pub(super) authority: Option<Span>,
}

/// Classifies the request-target `buf[t_start..target.end]` (origin-form, asterisk-form,
/// authority-form with CONNECT, absolute-form) and splits it into path, query and authority.
#[inline(always)]
pub(super) fn target_form<S: Scan>(
    s: S,
    buf: &[u8],
    t_start: usize,
    target: &Target,
    method_kind: Method,
) -> Result<TargetForm, ParseError> {
    let t_end = target.end;
    let whole = span(t_start, t_end);
    let tgt = &buf[t_start..t_end];
    let path_and_query = |from: usize| match target.first_q {
        Some(q) => (span(from, q), Some(span(q + 1, t_end))),
        None => (span(from, t_end), None),
    };
    let form = if tgt[0] == b'/' {
        if target.brackets {
            bad!("'[' or ']' in path or query");
        }
        let (path, query) = match target.first_q {
            Some(q) => (span(t_start, q), Some(span(q + 1, t_end))),
            None => (whole, None),
        };
        TargetForm {
            path,
            query,
            authority: None,
        }
    } else if tgt == b"*" {
        if method_kind != Method::Options {
            bad!("asterisk-form request-target with a method other than OPTIONS");
        }
        TargetForm {
            path: whole,
            query: None,
            authority: None,
        }
    } else if method_kind == Method::Connect {
        // authority-form: uri-host ":" port, nothing else.
        validate_authority(s, buf, t_start, t_end, true)?;
        TargetForm {
            path: whole,
            query: None,
            authority: Some(whole),
        }
    } else if let Some(after_scheme) = absolute_form_authority_start(tgt) {
        let a_start = t_start + after_scheme;
        let a_end = buf[a_start..t_end]
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .map_or(t_end, |i| a_start + i);
        validate_authority(s, buf, a_start, a_end, false)?;
        if buf[a_end..t_end].iter().any(|&b| b == b'[' || b == b']') {
            bad!("'[' or ']' in path or query");
        }
        let (path, query) = path_and_query(a_end);
        TargetForm {
            path,
            query,
            authority: Some(span(a_start, a_end)),
        }
    } else {
        bad!("request-target is not origin-form, absolute-form, authority-form with CONNECT or * with OPTIONS");
    };
    if method_kind == Method::Connect && form.authority.is_none() {
        bad!("CONNECT needs an authority-form request-target");
    }
    Ok(form)
}

/// If `t` is absolute-form with an `http` or `https` scheme, the offset of its authority.
fn absolute_form_authority_start(t: &[u8]) -> Option<usize> {
    let colon = t.iter().position(|&b| b == b':')?;
    let scheme = &t[..colon];
    let http = scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https");
    if http && t[colon..].starts_with(b"://") {
        Some(colon + 3)
    } else {
        None
    }
}
