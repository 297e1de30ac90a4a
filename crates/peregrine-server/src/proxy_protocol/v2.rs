//! Version 2: the binary header (signature, command, family, addresses, TLVs), parsed and
//! encoded.

use super::header::prefix_state;
use super::{Parsed, ProxyError, ProxyHeader, Status};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The version 2 signature (12 bytes).
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

pub(super) fn parse_v2(buf: &[u8]) -> Result<Status, ProxyError> {
    if !prefix_state(buf, &V2_SIGNATURE)? || buf.len() < 16 {
        return Ok(Status::Partial);
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(ProxyError::V2Version);
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(ProxyError::V2Command),
    };
    let fam = buf[13];
    let addr_len = match fam >> 4 {
        0 => 0,
        1 => 12,
        2 => 36,
        3 => 216,
        _ => return Err(ProxyError::V2Family),
    };
    if fam & 0x0f > 2 {
        return Err(ProxyError::V2Family);
    }
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if len < addr_len {
        return Err(ProxyError::V2Length);
    }
    let total = 16 + len;
    if buf.len() < total {
        return Ok(Status::Partial);
    }
    let body = &buf[16..total];
    let (addrs, mut rest) = body.split_at(addr_len);
    let mut tlvs = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 3 {
            return Err(ProxyError::V2Tlv);
        }
        let n = u16::from_be_bytes([rest[1], rest[2]]) as usize;
        let value = rest.get(3..3 + n).ok_or(ProxyError::V2Tlv)?;
        tlvs.push((rest[0], value.to_vec()));
        rest = &rest[3 + n..];
    }
    let header = match fam >> 4 {
        _ if local => ProxyHeader::Local,
        1 => {
            let ip = |o: usize| Ipv4Addr::new(addrs[o], addrs[o + 1], addrs[o + 2], addrs[o + 3]);
            let port = |o: usize| u16::from_be_bytes([addrs[o], addrs[o + 1]]);
            ProxyHeader::Proxied {
                source: SocketAddr::new(ip(0).into(), port(8)),
                destination: SocketAddr::new(ip(4).into(), port(10)),
            }
        }
        2 => {
            let ip = |o: usize| {
                let b: [u8; 16] = addrs[o..o + 16].try_into().expect("16 bytes");
                Ipv6Addr::from(b)
            };
            let port = |o: usize| u16::from_be_bytes([addrs[o], addrs[o + 1]]);
            ProxyHeader::Proxied {
                source: SocketAddr::new(ip(0).into(), port(32)),
                destination: SocketAddr::new(ip(16).into(), port(34)),
            }
        }
        // UNSPEC and UNIX: nothing an IP socket address can carry.
        _ => ProxyHeader::Local,
    };
    Ok(Status::Complete(Parsed {
        version: 2,
        header,
        consumed: total,
        tlvs,
    }))
}

/// Encodes a version 2 `PROXY` header for `source` → `destination` (tests, and proxies written
/// with this crate). Mixed families are encoded as IPv6 with IPv4-mapped addresses.
pub fn encode_v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x21);
    match (source.ip(), destination.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.extend_from_slice(&[0x11, 0, 12]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        (s, d) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            out.extend_from_slice(&[0x21, 0, 36]);
            out.extend_from_slice(&v6(s).octets());
            out.extend_from_slice(&v6(d).octets());
        }
    }
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::super::header::testing::{complete_by, err_by};
    use super::parse_v2 as parse;
    use super::*;

    fn complete(buf: &[u8]) -> Parsed {
        complete_by(parse, buf)
    }

    fn err(buf: &[u8]) -> ProxyError {
        err_by(parse, buf)
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut b = V2_SIGNATURE.to_vec();
        b.push(cmd);
        b.push(fam);
        b.extend_from_slice(&(body.len() as u16).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn v2_ipv4_ipv6_local_and_tlvs() {
        let src: SocketAddr = "203.0.113.9:40000".parse().unwrap();
        let dst: SocketAddr = "10.1.2.3:8080".parse().unwrap();
        let mut buf = encode_v2(src, dst);
        let n = buf.len();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let p = complete(&buf);
        assert_eq!((p.version, p.consumed), (2, n));
        assert_eq!(
            p.header,
            ProxyHeader::Proxied {
                source: src,
                destination: dst
            }
        );
        let src6: SocketAddr = "[2001:db8::7]:1".parse().unwrap();
        let p = complete(&encode_v2(src6, dst));
        let ProxyHeader::Proxied {
            source,
            destination,
        } = p.header
        else {
            panic!()
        };
        assert_eq!(source, src6);
        assert_eq!(
            destination.ip(),
            "::ffff:10.1.2.3".parse::<IpAddr>().unwrap()
        );
        // LOCAL (health check): addresses ignored, even with an address block.
        assert_eq!(
            complete(&v2(0x20, 0x11, &[0; 12])).header,
            ProxyHeader::Local
        );
        assert_eq!(complete(&v2(0x20, 0x00, &[])).header, ProxyHeader::Local);
        // UNIX family carries nothing an IP address can hold.
        assert_eq!(
            complete(&v2(0x21, 0x31, &[0; 216])).header,
            ProxyHeader::Local
        );
        // TLVs after the addresses: ALPN "h2" and an empty NOOP.
        let mut body = vec![127, 0, 0, 1, 127, 0, 0, 2, 0, 1, 0, 2];
        body.extend_from_slice(&[0x01, 0, 2, b'h', b'2', 0x04, 0, 0]);
        let p = complete(&v2(0x21, 0x11, &body));
        assert_eq!(p.tlvs, vec![(0x01, b"h2".to_vec()), (0x04, Vec::new())]);
    }

    #[test]
    fn v2_every_proper_prefix_is_partial() {
        let full = encode_v2(
            "[2001:db8::1]:5".parse().unwrap(),
            "[2001:db8::2]:6".parse().unwrap(),
        );
        for n in 0..full.len() {
            assert_eq!(parse(&full[..n]), Ok(Status::Partial), "{n}");
        }
    }

    #[test]
    fn v2_malformed_headers_are_refused() {
        assert_eq!(err(&v2(0x11, 0x11, &[0; 12])), ProxyError::V2Version);
        assert_eq!(err(&v2(0x31, 0x11, &[0; 12])), ProxyError::V2Version);
        assert_eq!(err(&v2(0x22, 0x11, &[0; 12])), ProxyError::V2Command);
        assert_eq!(err(&v2(0x21, 0x41, &[0; 12])), ProxyError::V2Family);
        assert_eq!(err(&v2(0x21, 0x13, &[0; 12])), ProxyError::V2Family);
        assert_eq!(err(&v2(0x21, 0x11, &[0; 11])), ProxyError::V2Length);
        assert_eq!(err(&v2(0x21, 0x21, &[0; 12])), ProxyError::V2Length);
        let mut body = vec![0; 12];
        body.extend_from_slice(&[0x01, 0, 5, b'h']); // TLV says 5 bytes, 1 follows
        assert_eq!(err(&v2(0x21, 0x11, &body)), ProxyError::V2Tlv);
        let mut body = vec![0; 12];
        body.extend_from_slice(&[0x01, 0]); // TLV header cut short
        assert_eq!(err(&v2(0x21, 0x11, &body)), ProxyError::V2Tlv);
        let mut sig = V2_SIGNATURE.to_vec();
        sig[11] = b'X';
        assert_eq!(err(&sig), ProxyError::NotProxy);
    }
}
