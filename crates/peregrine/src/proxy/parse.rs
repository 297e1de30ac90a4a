//! Reading the forwarding headers: each one's values, in order, as the proxies wrote them. No
//! trust is decided here (see the parent module).

use super::scheme::Scheme;
use crate::request::Request;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One `Forwarded` element's parameters that matter here.
pub(super) struct Element {
    /// The `for=` node: `None` when absent, `unknown`, obfuscated or not an address.
    pub(super) addr: Option<IpAddr>,
    /// The `proto=` value, as written (`None` when absent).
    pub(super) proto: Option<String>,
    /// The `host=` value, as written (`None` when absent).
    pub(super) host: Option<String>,
}

/// Every field line named `name`, joined with `,` (a list split over lines is one list).
/// `None` when there is no such line or a value is not UTF-8.
pub(super) fn joined(req: &Request, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case(name) {
            let v = std::str::from_utf8(v).ok()?;
            match &mut out {
                Some(s) => {
                    s.push(',');
                    s.push_str(v);
                }
                None => out = Some(v.to_owned()),
            }
        }
    }
    out
}

/// The single field line named `name`; `None` when absent, repeated or not UTF-8 (a header
/// that holds one value cannot be believed when there are two).
pub(super) fn single(req: &Request, name: &str) -> Option<String> {
    let mut lines = req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name));
    let (_, v) = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    std::str::from_utf8(v).ok().map(|v| v.trim().to_owned())
}

/// The comma-separated items of a list header, trimmed.
pub(super) fn items(list: &str) -> Vec<&str> {
    list.split(',').map(str::trim).collect()
}

pub(super) fn parse_scheme(s: &str) -> Option<Scheme> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("https") {
        Some(Scheme::Https)
    } else if s.eq_ignore_ascii_case("http") {
        Some(Scheme::Http)
    } else {
        None
    }
}

/// A host as `X-Forwarded-Host` or `host=` carries it (`example.com`, `example.com:8443`,
/// `[2001:db8::1]:443`); `None` for anything with other bytes, so a forwarded host never
/// carries a path, whitespace or a control byte into a redirect or a log.
pub(super) fn parse_host(s: &str) -> Option<String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(&b));
    ok.then(|| s.to_ascii_lowercase())
}

/// A node as `for=`, `X-Forwarded-For` or `X-Real-IP` carries it: `192.0.2.1`, `192.0.2.1:80`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`, a bare `2001:db8::1`. `None` for `unknown`, obfuscated
/// identifiers and anything else.
pub(super) fn parse_node(s: &str) -> Option<IpAddr> {
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(valid_port)) {
            return None;
        }
        return ip
            .parse::<Ipv6Addr>()
            .ok()
            .map(|ip| IpAddr::V6(ip).to_canonical());
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let (ip, port) = s.rsplit_once(':')?;
    if !valid_port(port) {
        return None;
    }
    ip.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn valid_port(p: &str) -> bool {
    // RFC 7239 allows obfuscated ports (`_abc`) too; the port is not used, only checked.
    (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
        || (p.starts_with('_') && p.len() > 1)
}

/// The elements of every `Forwarded` line, in order; `None` when there is no such header or
/// it is malformed anywhere (a quote left open can swallow the elements after it, so there is
/// no telling which part a proxy wrote: ignored whole rather than half-believed).
pub(super) fn forwarded_elements(req: &Request) -> Option<Vec<Element>> {
    let value = joined(req, "forwarded")?;
    let mut out = Vec::new();
    for element in split_outside_quotes(&value, b',')? {
        let mut el = Element {
            addr: None,
            proto: None,
            host: None,
        };
        let (mut seen_for, mut seen_proto, mut seen_host) = (false, false, false);
        for pair in split_outside_quotes(element, b';')? {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=')?;
            let (k, v) = (k.trim(), unquote(v.trim())?);
            let seen = if k.eq_ignore_ascii_case("for") {
                el.addr = parse_node(&v);
                &mut seen_for
            } else if k.eq_ignore_ascii_case("proto") {
                el.proto = Some(v);
                &mut seen_proto
            } else if k.eq_ignore_ascii_case("host") {
                el.host = Some(v);
                &mut seen_host
            } else {
                continue;
            };
            // RFC 7239 4: a parameter at most once per element.
            if std::mem::replace(seen, true) {
                return None;
            }
        }
        out.push(el);
    }
    Some(out)
}

/// Splits on `sep` where it is not inside a quoted string; `None` if a quote is left open.
fn split_outside_quotes(s: &str, sep: u8) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if b == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    (!quoted).then_some(parts)
}

/// A token or quoted-string value; `None` if a quote is misplaced.
fn unquote(v: &str) -> Option<String> {
    let Some(inner) = v.strip_prefix('"') else {
        return (!v.contains('"')).then(|| v.to_owned());
    };
    let inner = inner.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn nodes_parse_strictly() {
        assert_eq!(parse_node("192.0.2.1:80"), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("[::ffff:192.0.2.1]"), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("::ffff:192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("[2001:db8::1]:_x"), Some(ip("2001:db8::1")));
        assert_eq!(parse_node("unknown"), None);
        assert_eq!(parse_node(""), None);
        assert_eq!(parse_node("192.0.2.1:"), None);
        assert_eq!(parse_node("192.0.2.1:8x"), None);
        assert_eq!(parse_node("[::1"), None);
        assert_eq!(parse_node("example.com"), None);
    }

    #[test]
    fn hosts_and_quotes_parse_strictly() {
        assert_eq!(
            parse_host(" Example.COM:8443 ").as_deref(),
            Some("example.com:8443")
        );
        assert_eq!(
            parse_host("[2001:db8::1]:443").as_deref(),
            Some("[2001:db8::1]:443")
        );
        assert_eq!(parse_host("evil.com/path"), None);
        assert_eq!(parse_host("a b"), None);
        assert_eq!(parse_host(""), None);
        assert_eq!(
            split_outside_quotes(r#"for="a,b", for=c"#, b','),
            Some(vec![r#"for="a,b""#, " for=c"])
        );
        assert_eq!(split_outside_quotes(r#"for="a, for=c"#, b','), None);
        assert_eq!(unquote(r#""a\"b""#).as_deref(), Some("a\"b"));
        assert_eq!(unquote(r#"a"b"#), None);
    }
}
