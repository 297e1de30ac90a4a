//! Version 1: the text header (`PROXY TCP4|TCP6|UNKNOWN src dst sport dport\r\n`).

use super::header::prefix_state;
use super::{Parsed, ProxyError, ProxyHeader, Status};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Longest version 1 header, `\r\n` included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;
const V1_PREFIX: &[u8] = b"PROXY ";

pub(super) fn parse_v1(buf: &[u8]) -> Result<Status, ProxyError> {
    if !prefix_state(buf, V1_PREFIX)? {
        return Ok(Status::Partial);
    }
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        return if buf.len() >= V1_MAX_LEN {
            Err(ProxyError::V1TooLong)
        } else if window.contains(&b'\n') {
            Err(ProxyError::V1Malformed)
        } else {
            Ok(Status::Partial)
        };
    };
    match buf.get(cr + 1) {
        None if cr + 1 < V1_MAX_LEN => return Ok(Status::Partial),
        Some(b'\n') => {}
        _ => return Err(ProxyError::V1Malformed),
    }
    let line = &buf[V1_PREFIX.len()..cr];
    let line = std::str::from_utf8(line).map_err(|_| ProxyError::V1Malformed)?;
    let consumed = cr + 2;
    let mut parts = line.split(' ');
    let proto = parts.next().ok_or(ProxyError::V1Malformed)?;
    if proto == "UNKNOWN" {
        // The rest of the line is to be ignored (the specification says so).
        return Ok(Status::Complete(Parsed {
            version: 1,
            header: ProxyHeader::Local,
            consumed,
            tlvs: Vec::new(),
        }));
    }
    let (src, dst, sport, dport) = match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some(a), Some(b), Some(c), Some(d), None) => (a, b, c, d),
        _ => return Err(ProxyError::V1Malformed),
    };
    let ip = |s: &str| -> Result<IpAddr, ProxyError> {
        match proto {
            "TCP4" => s.parse::<Ipv4Addr>().map(IpAddr::V4),
            "TCP6" => s.parse::<Ipv6Addr>().map(IpAddr::V6),
            _ => return Err(ProxyError::V1Malformed),
        }
        .map_err(|_| ProxyError::V1Malformed)
    };
    let source = SocketAddr::new(ip(src)?, v1_port(sport)?);
    let destination = SocketAddr::new(ip(dst)?, v1_port(dport)?);
    Ok(Status::Complete(Parsed {
        version: 1,
        header: ProxyHeader::Proxied {
            source,
            destination,
        },
        consumed,
        tlvs: Vec::new(),
    }))
}

/// A port: 1 to 5 digits, no sign, no leading zero (strict, as the rest of the server).
fn v1_port(s: &str) -> Result<u16, ProxyError> {
    let ok = !s.is_empty()
        && s.len() <= 5
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'));
    if !ok {
        return Err(ProxyError::V1Malformed);
    }
    s.parse().map_err(|_| ProxyError::V1Malformed)
}

#[cfg(test)]
mod tests {
    use super::super::header::testing::{complete_by, err_by};
    use super::parse_v1 as parse;
    use super::*;

    fn complete(buf: &[u8]) -> Parsed {
        complete_by(parse, buf)
    }

    fn err(buf: &[u8]) -> ProxyError {
        err_by(parse, buf)
    }

    #[test]
    fn v1_tcp4_tcp6_and_unknown() {
        let p = complete(b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET");
        assert_eq!(p.consumed, 45);
        assert_eq!(
            p.header,
            ProxyHeader::Proxied {
                source: "192.0.2.1:56324".parse().unwrap(),
                destination: "198.51.100.2:443".parse().unwrap(),
            }
        );
        let p = complete(b"PROXY TCP6 2001:db8::1 2001:db8::2 65535 0\r\n");
        let ProxyHeader::Proxied { source, .. } = p.header else {
            panic!()
        };
        assert_eq!(source, "[2001:db8::1]:65535".parse().unwrap());
        let p = complete(b"PROXY UNKNOWN ffff::1 whatever\r\n");
        assert_eq!(p.header, ProxyHeader::Local);
        assert_eq!(complete(b"PROXY UNKNOWN\r\n").header, ProxyHeader::Local);
    }

    #[test]
    fn v1_every_proper_prefix_is_partial() {
        let full = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n";
        for n in 0..full.len() {
            assert_eq!(parse(&full[..n]), Ok(Status::Partial), "{n}");
        }
    }

    #[test]
    fn v1_malformed_headers_are_refused() {
        for bad in [
            &b"PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n"[..], // a field missing
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 1\r\n", // one too many
            b"PROXY TCP4  192.0.2.1 198.51.100.2 56324 443\r\n", // two spaces
            b"PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n",      // v6 in TCP4
            b"PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n",         // v4 in TCP6
            b"PROXY TCP4 192.0.2.256 198.51.100.2 1 2\r\n",      // octet too large
            b"PROXY TCP4 192.0.2.1 198.51.100.2 65536 2\r\n",    // port too large
            b"PROXY TCP4 192.0.2.1 198.51.100.2 080 2\r\n",      // leading zero
            b"PROXY TCP4 192.0.2.1 198.51.100.2 +80 2\r\n",      // sign
            b"PROXY TCP4 192.0.2.1 198.51.100.2 -1 2\r\n",       // negative
            b"PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n",        // protocol
            b"PROXY TCP4 192.0.2.1 198.51.100.2 1 2\n",          // bare LF
            b"PROXY TCP4 192.0.2.1 198.51.100.2 1 2\rX",         // CR without LF
            b"PROXY TCP4 \xff.0.2.1 198.51.100.2 1 2\r\n",       // not UTF-8
            b"PROXY \r\n",                                       // empty
        ] {
            assert_eq!(
                err(bad),
                ProxyError::V1Malformed,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(200, b'a');
        assert_eq!(err(&long), ProxyError::V1TooLong);
        assert_eq!(err(b"GET / HTTP/1.1\r\n"), ProxyError::NotProxy);
        assert_eq!(err(b"PROXX TCP4"), ProxyError::NotProxy);
        assert_eq!(err(b"proxy TCP4"), ProxyError::NotProxy);
    }
}
