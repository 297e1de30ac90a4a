//! The request-head parser proper. Generic over the scanning strategy so that each path is
//! compiled as one function with its own target features and everything inlined.
//!
//! The parser never looks at a byte twice on the success path, except for the few header fields
//! whose values decide framing or routing (Host, Content-Length, Transfer-Encoding, Connection,
//! Expect). An incomplete buffer is re-parsed from the start on the next call (like httparse and
//! picohttpparser); heads are small, so this is cheaper than carrying state.

use crate::request::{
    BodyFraming, ConnectionDirective, Expectation, FieldSpan, Method, Parsed, RequestHead, Span,
    Version,
};
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
use crate::scan::{Avx2, Sse42};
use crate::scan::{Scalar, Scan, HOST, TARGET, TCHAR, VALUE};
use crate::{Limits, ParseError};

/// Methods longer than this are refused with 501 before the request line completes: no method we
/// could route is anywhere near this long, and it bounds the work done on garbage.
pub(crate) const MAX_METHOD_LEN: usize = 64;

macro_rules! bad {
    ($reason:expr) => {
        return Err(ParseError::new(400, $reason))
    };
}

#[inline(always)]
pub(crate) fn span(start: usize, end: usize) -> Span {
    Span {
        start: start as u32,
        len: (end - start) as u32,
    }
}

#[inline(always)]
fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// `Ok(Some(x))` goes on with `x`; `Ok(None)` means "the head is incomplete" and ends the
/// parse with [`Parsed::Incomplete`]; an error ends it with the error.
macro_rules! need {
    ($step:expr) => {
        match $step? {
            Some(value) => value,
            None => return Ok(Parsed::Incomplete),
        }
    };
}

/// The parse, for one scanning strategy: the request line, then the field lines, then the
/// checks that need the whole head. Each step is a function below, inlined here.
#[inline(always)]
pub(crate) fn parse_core<S: Scan>(
    s: S,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // Spans are u32; refuse to index past that rather than wrap. A head that long broke the
    // limits long before, so treat only the first 4 GiB as visible.
    let buf = &buf[..buf.len().min(u32::MAX as usize)];

    let m_start = need!(skip_leading_empty_lines(buf, limits));
    let (m_end, method_kind) = need!(method(s, buf, m_start));
    let t_start = m_end + 1;
    let target = need!(request_target(s, buf, t_start, limits));
    let t_end = target.end;
    let version = need!(version(buf, t_end + 1));
    let form = target_form(s, buf, t_start, &target, method_kind)?;

    let mut head = HeadFields::new(version);
    let (head_len, field_count) = need!(field_lines(s, buf, t_end + 11, limits, fields, &mut head));
    let authority = head.authority(form.authority)?;
    let framing = head.framing();

    Ok(Parsed::Complete(RequestHead {
        head_len,
        method: span(m_start, m_end),
        method_kind,
        target: span(t_start, t_end),
        path: form.path,
        query: form.query,
        version,
        field_count,
        authority,
        framing,
        connection: head.connection,
        expect: head.expect,
    }))
}

/// Leading empty lines (RFC 9112 §2.2): at most `max_leading_empty_lines` CRLFs. The index of
/// the request line's first byte.
#[inline(always)]
fn skip_leading_empty_lines(buf: &[u8], limits: &Limits) -> Result<Option<usize>, ParseError> {
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
fn method<S: Scan>(
    s: S,
    buf: &[u8],
    m_start: usize,
) -> Result<Option<(usize, Method)>, ParseError> {
    // Most requests are GETs: recognise `GET ` with one comparison and skip the scan.
    if buf.len() >= m_start + 4 && &buf[m_start..m_start + 4] == b"GET " {
        return Ok(Some((m_start + 3, Method::Get)));
    }
    Ok(scan_method(s, buf, m_start)?.map(|m_end| (m_end, method_kind(&buf[m_start..m_end]))))
}

/// What the scan of the request-target found.
struct Target {
    /// Index of the SP after the target.
    end: usize,
    /// Index of the first `?`, if any.
    first_q: Option<usize>,
    /// Whether a `[` or `]` appeared (allowed only in an authority's IP literal).
    brackets: bool,
}

/// The request-target: RFC 3986 characters, `%HH` validated, then exactly one SP.
#[inline(always)]
fn request_target<S: Scan>(
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

/// The version at `v`: exactly `HTTP/1.1` or `HTTP/1.0`, then CRLF (10 bytes in all).
#[inline(always)]
fn version(buf: &[u8], v: usize) -> Result<Option<Version>, ParseError> {
    let len = buf.len();
    if len >= v + 10 && &buf[v..v + 10] == b"HTTP/1.1\r\n" {
        return Ok(Some(Version::Http11));
    }
    parse_version(&buf[v..len.min(v + 10)])
}

/// The parts of a request-target, by its form (RFC 9112 §3.2).
struct TargetForm {
    path: Span,
    query: Option<Span>,
    /// The authority the target itself carries (absolute-form and authority-form).
    authority: Option<Span>,
}

/// Classifies the request-target `buf[t_start..target.end]` (origin-form, asterisk-form,
/// authority-form with CONNECT, absolute-form) and splits it into path, query and authority.
#[inline(always)]
fn target_form<S: Scan>(
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

/// What the header section says about framing, routing and the connection, gathered field by
/// field (RFC 9112 §5–§7, RFC 9110 §7.2, §10.1.1).
struct HeadFields {
    version: Version,
    host: Option<Span>,
    content_length: Option<u64>,
    chunked: bool,
    connection: ConnectionDirective,
    /// Stays `None` for HTTP/1.0 (see [`HeadFields::note`]).
    expect: Expectation,
}

impl HeadFields {
    #[inline(always)]
    fn new(version: Version) -> Self {
        HeadFields {
            version,
            host: None,
            content_length: None,
            chunked: false,
            connection: ConnectionDirective::default(),
            expect: Expectation::None,
        }
    }

    /// Takes note of one field, whose `value` is `buf[v_start..vt]`. Only the fields that
    /// decide framing, routing or connection handling matter; dispatching on the name's length
    /// first makes every other field cost one comparison.
    #[inline(always)]
    fn note<S: Scan>(
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
    fn authority(&self, target_authority: Option<Span>) -> Result<Option<Span>, ParseError> {
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
    fn framing(&self) -> BodyFraming {
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

/// The header section from `hdr_start` to its empty line (RFC 9112 §5): every field line into
/// `fields`, the ones that matter noted in `head`. The head's length and the number of fields.
#[inline(always)]
fn field_lines<S: Scan>(
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

#[inline(always)]
fn method_kind(m: &[u8]) -> Method {
    match m {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        b"POST" => Method::Post,
        b"PUT" => Method::Put,
        b"DELETE" => Method::Delete,
        b"OPTIONS" => Method::Options,
        b"PATCH" => Method::Patch,
        b"CONNECT" => Method::Connect,
        b"TRACE" => Method::Trace,
        _ => Method::Other,
    }
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

/// Validates `uri-host [ ":" port ]` (a Host value, the authority of an absolute-form target, or
/// with `need_port` an authority-form target). Rejects userinfo, path, query, fragment,
/// whitespace, controls, list separators, empty hosts, and ports that are empty, non-numeric or
/// above 65535.
///
/// The authority is `buf[start..end]`; taking the whole buffer lets the vector scan read past
/// `end` (the result is clipped), so a short Host value still gets a full-width scan.
#[inline(always)]
pub(crate) fn validate_authority<S: Scan>(
    s: S,
    buf: &[u8],
    start: usize,
    end: usize,
    need_port: bool,
) -> Result<(), ParseError> {
    let a = &buf[start..end];
    // One pass: the host (IP literal, or reg-name/IPv4 by table lookup), then `:` and the port.
    let host_end = if a.first() == Some(&b'[') {
        let close = match a.iter().position(|&b| b == b']') {
            Some(c) => c,
            None => bad!("unterminated IP literal in authority"),
        };
        let inner = &a[1..close];
        if inner.is_empty()
            || !inner.iter().all(|&b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b':' | b'.' | b'-' | b'_' | b'~' | b'!' | b'$' | b'&')
                    || matches!(b, b'\'' | b'(' | b')' | b'*' | b'+' | b';' | b'=')
            })
        {
            bad!("invalid IP literal in authority");
        }
        if !matches!(a.get(close + 1), None | Some(b':')) {
            bad!("invalid bytes after IP literal in authority");
        }
        close + 1
    } else {
        let mut i = 0;
        loop {
            i = s.skip(buf, start + i, &HOST).min(end) - start;
            let Some(&b) = a.get(i) else { break };
            match b {
                b':' => break,
                b'%' => {
                    if i + 2 >= a.len() || !is_hex(a[i + 1]) || !is_hex(a[i + 2]) {
                        bad!("'%' not followed by two hex digits in host");
                    }
                    i += 3;
                }
                b'@' => bad!("userinfo in authority"),
                b',' => bad!("list value where one host is expected"),
                _ => bad!("invalid byte in host"),
            }
        }
        if i == 0 {
            bad!("empty host in authority");
        }
        i
    };
    if host_end == a.len() {
        if need_port {
            bad!("authority-form request-target without a port");
        }
        return Ok(());
    }
    // a[host_end] == b':'
    let port = &a[host_end + 1..];
    if port.is_empty() {
        bad!("empty port in authority");
    }
    if port.len() > 5 {
        bad!("invalid port in authority");
    }
    if !port.iter().all(u8::is_ascii_digit) {
        bad!("invalid port in authority");
    }
    // Up to 4 digits always fit; 5 digits compare as strings of equal length (leading zeros
    // included, as before: `00080` is 80).
    if port.len() == 5 && port > &b"65535"[..] {
        bad!("invalid port in authority");
    }
    Ok(())
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

#[inline]
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
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

/// The fast path, then (when it declines) the general parser, for one scanning strategy; the
/// result goes to `out`.
///
/// The fast path fills the head in place inside `out`, which is the caller's own result when
/// [`crate::parse_request_head`] is inlined into it: the head is written once, where it is
/// read, instead of being built in registers and copied out through every return.
#[inline(always)]
fn parse_fast_then<S: Scan>(
    s: S,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
    general: impl FnOnce(&[u8], &Limits, &mut [FieldSpan]) -> Result<Parsed, ParseError>,
) {
    *out = Ok(Parsed::Complete(crate::fast::EMPTY_HEAD));
    let done = match out {
        Ok(Parsed::Complete(head)) => crate::fast::parse_fast(s, buf, limits, fields, head),
        _ => false,
    };
    if !done {
        *out = general(buf, limits, fields);
    }
}

/// Scalar instantiation.
pub(crate) fn parse_scalar(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    parse_fast_then(Scalar, buf, limits, fields, out, parse_scalar_general)
}

/// Scalar instantiation of the general parser alone. Kept out of line so that the fast path's
/// function stays small (few registers saved, nothing spilled).
#[inline(never)]
pub(crate) fn parse_scalar_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    parse_core(Scalar, buf, limits, fields)
}

/// SSE instantiation: compiled with SSSE3/SSE4.2 so the scans inline as vector code.
///
/// # Safety
/// The CPU must support SSSE3 and SSE4.2 (`Isa::Sse42.is_available()`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "ssse3,sse4.2")]
pub(crate) unsafe fn parse_sse42(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // SAFETY: this function's own contract (the CPU supports SSSE3 and SSE4.2).
    let s = unsafe { Sse42::new_unchecked() };
    parse_fast_then(s, buf, limits, fields, out, |b, l, f| {
        // SAFETY: as above.
        unsafe { parse_sse42_general(b, l, f) }
    })
}

/// SSE instantiation of the general parser alone.
///
/// # Safety
/// As for [`parse_sse42`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "ssse3,sse4.2")]
#[inline(never)]
pub(crate) unsafe fn parse_sse42_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // SAFETY: this function's own contract.
    parse_core(unsafe { Sse42::new_unchecked() }, buf, limits, fields)
}

/// AVX2 instantiation.
///
/// # Safety
/// The CPU must support AVX2 (`Isa::Avx2.is_available()`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn parse_avx2(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // SAFETY: this function's own contract (the CPU supports AVX2).
    let s = unsafe { Avx2::new_unchecked() };
    parse_fast_then(s, buf, limits, fields, out, |b, l, f| {
        // SAFETY: as above.
        unsafe { parse_avx2_general(b, l, f) }
    })
}

/// AVX2 instantiation of the general parser alone.
///
/// # Safety
/// As for [`parse_avx2`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
#[inline(never)]
pub(crate) unsafe fn parse_avx2_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // SAFETY: this function's own contract.
    parse_core(unsafe { Avx2::new_unchecked() }, buf, limits, fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::is_tchar;

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
    fn port_bounds_are_checked_by_value_on_every_length() {
        for (authority, ok) in [
            (&b"a:0"[..], true),
            (b"a:8080", true),
            (b"a:00080", true),
            (b"a:09999", true),
            (b"a:65535", true),
            (b"a:65536", false),
            (b"a:70000", false),
            (b"a:99999", false),
            (b"a:000080", false),
            (b"a:8a", false),
            (b"a:", false),
        ] {
            let got = validate_authority(Scalar, authority, 0, authority.len(), false);
            assert_eq!(got.is_ok(), ok, "{:?}", std::str::from_utf8(authority));
        }
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
