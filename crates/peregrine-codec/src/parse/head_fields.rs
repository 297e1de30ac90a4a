//! The fields that decide framing, routing and the connection (Host, Expect, Connection,
//! Content-Length, Transfer-Encoding), noted as the field lines are parsed, and the decisions
//! taken from them once the head is complete.

use super::authority::validate_authority;
use super::span::span;
use crate::grammar::{name_is, trim_ows};
use crate::head::{BodyFraming, ConnectionDirective, Expectation, Span, Version};
use crate::scan::Scan;
use crate::ParseError;

/// What the header section says about framing, routing and the connection, gathered field by
/// field (RFC 9112 §5–§7, RFC 9110 §7.2, §10.1.1).
pub(super) struct HeadFields {
    version: Version,
    host: Option<Span>,
    content_length: Option<u64>,
    chunked: bool,
    pub(super) connection: ConnectionDirective,
    /// Stays `None` for HTTP/1.0 (see [`HeadFields::note`]).
    pub(super) expect: Expectation,
    /// A `TE` field listed `trailers` (HTTP/1.1).
    pub(super) te_trailers: bool,
}

impl HeadFields {
    #[inline(always)]
    pub(super) fn new(version: Version) -> Self {
        HeadFields {
            version,
            host: None,
            content_length: None,
            chunked: false,
            connection: ConnectionDirective::default(),
            expect: Expectation::None,
            te_trailers: false,
        }
    }

    /// Takes note of one field, whose `value` is `buf[v_start..vt]`. Only the fields that
    /// decide framing, routing or connection handling matter; dispatching on the name's length
    /// first makes every other field cost one comparison.
    #[inline(always)]
    pub(super) fn note<S: Scan>(
        &mut self,
        s: S,
        buf: &[u8],
        name: &[u8],
        value: &[u8],
        (v_start, vt): (usize, usize),
    ) -> Result<(), ParseError> {
        match name.len() {
            4 if name_is(name, b"host") => {
                if self.host.is_some() {
                    bad!("more than one Host header field");
                }
                if !value.is_empty() {
                    validate_authority(s, buf, v_start, vt, false)?;
                }
                self.host = Some(span(v_start, vt));
            }
            // A server MUST ignore a 100-continue expectation from HTTP/1.0 (RFC 9110 §10.1.1);
            // we ignore any expectation from 1.0 clients, which never had the mechanism.
            6 if self.version == Version::Http11 && name_is(name, b"expect") => {
                self.expect = if value.eq_ignore_ascii_case(b"100-continue")
                    && self.expect != Expectation::Unknown
                {
                    Expectation::Continue
                } else {
                    Expectation::Unknown
                };
            }
            2 if name.eq_ignore_ascii_case(b"te") => {
                self.te_trailers |= te_lists_trailers(self.version, value);
            }
            10 if name_is(name, b"connection") => {
                parse_connection(value, &mut self.connection);
            }
            14 if name_is(name, b"content-length") => {
                if self.content_length.is_some() {
                    bad!("more than one Content-Length header field");
                }
                if self.chunked {
                    bad!("both Transfer-Encoding and Content-Length");
                }
                self.content_length = Some(parse_content_length(value)?);
            }
            17 if name_is(name, b"transfer-encoding") => {
                if self.version == Version::Http10 {
                    bad!("Transfer-Encoding in an HTTP/1.0 request");
                }
                if self.chunked {
                    bad!("more than one Transfer-Encoding header field");
                }
                if self.content_length.is_some() {
                    bad!("both Transfer-Encoding and Content-Length");
                }
                parse_transfer_encoding(value)?;
                self.chunked = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// Host (RFC 9112 §3.2) and the effective authority: the target's own, else a non-empty
    /// Host.
    #[inline(always)]
    pub(super) fn authority(
        &self,
        target_authority: Option<Span>,
    ) -> Result<Option<Span>, ParseError> {
        if self.version == Version::Http11 && self.host.is_none() {
            bad!("HTTP/1.1 request without Host");
        }
        Ok(match (target_authority, self.host) {
            (Some(_), Some(h)) if h.is_empty() => {
                bad!("empty Host with a request-target that has an authority")
            }
            (Some(a), _) => Some(a),
            (None, Some(h)) if !h.is_empty() => Some(h),
            (None, _) => None,
        })
    }

    /// How the body is delimited.
    #[inline(always)]
    pub(super) fn framing(&self) -> BodyFraming {
        if self.chunked {
            BodyFraming::Chunked
        } else {
            match self.content_length {
                Some(n) => BodyFraming::Length(n),
                None => BodyFraming::None,
            }
        }
    }
}

/// `Content-Length = 1*DIGIT`, no list, no sign, no whitespace, no overflow.
pub(crate) fn parse_content_length(v: &[u8]) -> Result<u64, ParseError> {
    if v.is_empty() {
        bad!("empty Content-Length");
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            bad!("Content-Length is not a decimal number");
        }
        n = match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
        {
            Some(n) => n,
            None => bad!("Content-Length overflows"),
        };
    }
    Ok(n)
}

/// Accepts exactly one coding, `chunked` (case-insensitive). `chunked` twice or not last is 400;
/// any other coding, parameters, or odd separators is 501 (never a fallback to Content-Length).
pub(crate) fn parse_transfer_encoding(v: &[u8]) -> Result<(), ParseError> {
    if v.is_empty() {
        return Err(ParseError::new(501, "empty Transfer-Encoding"));
    }
    let mut chunked = false;
    let mut unsupported = false;
    for element in v.split(|&b| b == b',') {
        let element = trim_ows(element);
        if element.is_empty() {
            bad!("empty element in Transfer-Encoding");
        }
        if chunked {
            if element.eq_ignore_ascii_case(b"chunked") {
                bad!("chunked applied twice");
            }
            bad!("chunked is not the final transfer coding");
        }
        if element.eq_ignore_ascii_case(b"chunked") {
            chunked = true;
        } else {
            unsupported = true;
        }
    }
    if unsupported {
        return Err(ParseError::new(501, "unsupported transfer coding"));
    }
    Ok(())
}

/// Whether a `TE` value lists the `trailers` token (RFC 9110 §10.1.4), which only an
/// HTTP/1.1 request's counts for: an HTTP/1.0 client cannot take a chunked response at all.
pub(crate) fn te_lists_trailers(version: Version, v: &[u8]) -> bool {
    version == Version::Http11
        && v.split(|&b| b == b',').any(|t| {
            // A transfer coding may carry parameters (`gzip;q=0.5`); `trailers` has none.
            trim_ows(t).eq_ignore_ascii_case(b"trailers")
        })
}

pub(crate) fn parse_connection(v: &[u8], c: &mut ConnectionDirective) {
    for token in v.split(|&b| b == b',') {
        let token = trim_ows(token);
        if token.eq_ignore_ascii_case(b"close") {
            c.close = true;
        } else if token.eq_ignore_ascii_case(b"keep-alive") {
            c.keep_alive = true;
        } else if token.eq_ignore_ascii_case(b"upgrade") {
            c.upgrade = true;
        }
    }
}
