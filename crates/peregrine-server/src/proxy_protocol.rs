// Over 600 lines: both PROXY versions, their reader and acceptor in one place; the last 40% is the malformed-header tests.
//! The PROXY protocol (HAProxy's, versions 1 and 2): the header a load balancer sends first on
//! a connection to tell the server who the real client is. Pure functions over bytes, no I/O,
//! so the listener that reads it and the tests that fuzz it share one parser.
//!
//! Only listeners configured for it may parse it: a header accepted from an untrusted client
//! lets that client choose its own address.
//!
//! ```
//! use peregrine_server::proxy_protocol::{parse, ProxyHeader, Status};
//! let buf = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET / HTTP/1.1\r\n";
//! let Ok(Status::Complete(p)) = parse(buf) else { panic!() };
//! assert_eq!(p.version, 1);
//! assert_eq!(&buf[p.consumed..p.consumed + 3], b"GET");
//! let ProxyHeader::Proxied { source, .. } = p.header else { panic!() };
//! assert_eq!(source, "203.0.113.7:51234".parse().unwrap());
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The version 2 signature (12 bytes).
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest version 1 header, `\r\n` included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;
const V1_PREFIX: &[u8] = b"PROXY ";

/// What the header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHeader {
    /// Use the socket's own addresses: a v2 `LOCAL` command (the proxy's health check), a v1
    /// `UNKNOWN`, or a v2 family this type does not carry (`UNSPEC`, `UNIX`).
    Local,
    /// The connection was relayed for `source` (the client) to `destination`.
    Proxied {
        /// The client.
        source: SocketAddr,
        /// The address the client connected to.
        destination: SocketAddr,
    },
}

/// A complete header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// 1 or 2.
    pub version: u8,
    /// The addresses.
    pub header: ProxyHeader,
    /// Bytes the header took: the connection's data starts after them.
    pub consumed: usize,
    /// Version 2 type-length-value extensions (ALPN, authority, ...), type and value, as sent.
    pub tlvs: Vec<(u8, Vec<u8>)>,
}

/// Result of [`parse`] on the bytes received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// A whole header.
    Complete(Parsed),
    /// A valid beginning: read more and call again.
    Partial,
}

/// Why a header was refused. The connection must be closed: nothing after a bad header can be
/// trusted to be in sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyError {
    /// The bytes start with neither the v1 `PROXY ` nor the v2 signature.
    NotProxy,
    /// A v1 header longer than 107 bytes without its `\r\n`.
    V1TooLong,
    /// A v1 header whose fields are not `PROXY TCP4|TCP6|UNKNOWN src dst sport dport\r\n`.
    V1Malformed,
    /// A v2 version nibble other than 2.
    V2Version,
    /// A v2 command other than `LOCAL` (0) or `PROXY` (1).
    V2Command,
    /// A v2 address family or transport protocol byte that is not defined.
    V2Family,
    /// A v2 length shorter than the address block its family needs.
    V2Length,
    /// A v2 TLV that runs past the end of the header.
    V2Tlv,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProxyError::NotProxy => "no PROXY protocol header",
            ProxyError::V1TooLong => "PROXY v1 header too long",
            ProxyError::V1Malformed => "malformed PROXY v1 header",
            ProxyError::V2Version => "unsupported PROXY v2 version",
            ProxyError::V2Command => "unknown PROXY v2 command",
            ProxyError::V2Family => "unknown PROXY v2 address family or protocol",
            ProxyError::V2Length => "PROXY v2 length too short for its addresses",
            ProxyError::V2Tlv => "malformed PROXY v2 TLV",
        })
    }
}

impl std::error::Error for ProxyError {}

/// Parses a PROXY protocol header (either version) at the start of `buf`.
pub fn parse(buf: &[u8]) -> Result<Status, ProxyError> {
    if buf.is_empty() {
        return Ok(Status::Partial);
    }
    if buf[0] == b'P' {
        return parse_v1(buf);
    }
    if buf[0] == b'\r' {
        return parse_v2(buf);
    }
    Err(ProxyError::NotProxy)
}

/// Whether `buf` is a proper prefix of `of`, or starts with it (`Some(true)`: starts with it).
fn prefix_state(buf: &[u8], of: &[u8]) -> Result<bool, ProxyError> {
    let n = buf.len().min(of.len());
    if buf[..n] != of[..n] {
        return Err(ProxyError::NotProxy);
    }
    Ok(buf.len() >= of.len())
}

fn parse_v1(buf: &[u8]) -> Result<Status, ProxyError> {
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

fn parse_v2(buf: &[u8]) -> Result<Status, ProxyError> {
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

/// Largest header [`read_header`] accepts: both versions' addresses and the TLVs load
/// balancers send (ALPN, authority, a unique id, TLS details) fit with room to spare.
pub const READ_MAX: usize = 4096;

/// Why [`read_header`] gave up.
#[derive(Debug)]
pub enum ReadError {
    /// The header is malformed (or missing).
    Invalid(ProxyError),
    /// The header did not arrive whole within the deadline.
    Timeout,
    /// The header is longer than [`READ_MAX`].
    TooLarge,
    /// The client closed, or the socket failed.
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Invalid(e) => e.fmt(f),
            ReadError::Timeout => f.write_str("PROXY header timed out"),
            ReadError::TooLarge => f.write_str("PROXY header too large"),
            ReadError::Io(e) => write!(f, "reading the PROXY header: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads the PROXY header at the start of `stream` and nothing more: the bytes are peeked until
/// the header is whole, then exactly the header is consumed, so the connection's first request
/// stays in the socket for the connection driver. For the accept path of a listener that
/// requires the header; `timeout` bounds the wait (use the header timeout).
pub async fn read_header(
    stream: &tokio::net::TcpStream,
    timeout: std::time::Duration,
) -> Result<Parsed, ReadError> {
    let work = async {
        let mut buf = vec![0u8; READ_MAX];
        let mut seen = 0;
        loop {
            let n = stream.peek(&mut buf).await.map_err(ReadError::Io)?;
            if n == 0 {
                return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            match parse(&buf[..n]).map_err(ReadError::Invalid)? {
                Status::Complete(p) => {
                    // Through `readable` + `try_read`: reading needs only `&TcpStream`.
                    let mut taken = 0;
                    while taken < p.consumed {
                        stream.readable().await.map_err(ReadError::Io)?;
                        match stream.try_read(&mut buf[taken..p.consumed]) {
                            Ok(0) => {
                                return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()))
                            }
                            Ok(k) => taken += k,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(ReadError::Io(e)),
                        }
                    }
                    return Ok(p);
                }
                Status::Partial if n == buf.len() => return Err(ReadError::TooLarge),
                Status::Partial => {
                    // Peeking again returns at once while the same bytes wait: pause instead
                    // of spinning (a header split over packets is rare).
                    if n == seen {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    seen = n;
                }
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(ReadError::Timeout),
    }
}

/// An [`Acceptor`](crate::transport::Acceptor) for a listener behind a load balancer that
/// speaks the PROXY protocol (HAProxy `send-proxy` / `send-proxy-v2`, AWS NLB, ...): every TCP
/// connection must start with a v1 or v2 header, read (within `timeout`) in the connection's
/// own task; the header's source address becomes the connection's peer (`Request::peer_addr`),
/// then `inner` (plain, or TLS) takes the stream. A connection without a valid header is closed
/// without a response. Unix-socket connections are passed to `inner` as they are.
///
/// Only put it on a listener that only the balancer can reach: the header is believed.
///
/// ```no_run
/// use peregrine_server::proxy_protocol::ProxyProtocolAcceptor;
/// use peregrine_server::transport::PlainAcceptor;
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let handle = Server::new(ServerConfig::default())
///     .with_acceptor(ProxyProtocolAcceptor::new(PlainAcceptor))
///     .serve(service_fn(|req: Request| async move { Response::text(req.peer_addr().to_string()) }))
///     .unwrap();
/// # handle.shutdown();
/// ```
#[derive(Debug, Clone)]
pub struct ProxyProtocolAcceptor<A> {
    inner: A,
    timeout: std::time::Duration,
}

impl<A: crate::transport::Acceptor> ProxyProtocolAcceptor<A> {
    /// Requires the header (5 s to arrive), then hands the stream to `inner`.
    pub fn new(inner: A) -> Self {
        ProxyProtocolAcceptor {
            inner,
            timeout: std::time::Duration::from_secs(5),
        }
    }

    /// How long the header may take to arrive.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<A: crate::transport::Acceptor> crate::transport::Acceptor for ProxyProtocolAcceptor<A> {
    fn accept(&self, conn: crate::transport::Accepted) -> crate::transport::Accept {
        use crate::transport::{Accept, Accepted, Stream};
        let Stream::Tcp(tcp) = conn.stream else {
            return self.inner.accept(conn);
        };
        let (inner, timeout, peer) = (self.inner.clone(), self.timeout, conn.peer);
        Accept::Proxied(Box::pin(async move {
            let parsed = match read_header(&tcp, timeout).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "PROXY protocol header refused; closing");
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
                }
            };
            let source = match parsed.header {
                ProxyHeader::Proxied { source, .. } => Some(source),
                ProxyHeader::Local => None,
            };
            let next = Accepted {
                stream: Stream::Tcp(tcp),
                peer: source.unwrap_or(peer),
            };
            let stream = match inner.accept(next) {
                Accept::Ready(s) => s,
                Accept::Handshake(h) => h.await?,
                Accept::Proxied(p) => p.await?.0,
            };
            Ok((stream, source))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(buf: &[u8]) -> Parsed {
        match parse(buf) {
            Ok(Status::Complete(p)) => p,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    fn err(buf: &[u8]) -> ProxyError {
        match parse(buf) {
            Err(e) => e,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
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

    #[test]
    fn no_panic_on_arbitrary_bytes() {
        // Mutations of valid headers and random bytes: any result but a panic.
        let seeds: Vec<Vec<u8>> = vec![
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".to_vec(),
            b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n".to_vec(),
            encode_v2(
                "192.0.2.1:1".parse().unwrap(),
                "192.0.2.2:2".parse().unwrap(),
            ),
            encode_v2("[::1]:1".parse().unwrap(), "[::2]:2".parse().unwrap()),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for seed in &seeds {
            for _ in 0..20_000 {
                let mut b = seed.clone();
                for _ in 0..(rnd() % 4 + 1) {
                    let i = (rnd() as usize) % b.len();
                    b[i] = rnd() as u8;
                }
                let cut = (rnd() as usize) % (b.len() + 1);
                let _ = parse(&b[..cut]);
                let _ = parse(&b);
            }
        }
        for _ in 0..20_000 {
            let n = (rnd() % 64) as usize;
            let b: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let _ = parse(&b);
        }
    }

    /// `read_header` over a real loopback connection: the header arrives in pieces, exactly
    /// the header is consumed, the request behind it stays in the socket.
    async fn over_socket(
        pieces: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> (Result<Parsed, ReadError>, Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            for p in pieces {
                c.write_all(&p).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        });
        let (mut s, _) = listener.accept().await.unwrap();
        let r = read_header(&s, std::time::Duration::from_millis(timeout_ms)).await;
        let mut rest = vec![0; 64];
        let n = if r.is_ok() {
            s.read(&mut rest).await.unwrap()
        } else {
            0
        };
        rest.truncate(n);
        client.await.unwrap();
        (r, rest)
    }

    #[test]
    fn read_header_consumes_exactly_the_header() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let v1 = b"PROXY TCP4 203.0.113.1 10.0.0.1 4000 80\r\n".to_vec();
            let (r, rest) = over_socket(
                vec![v1[..9].to_vec(), v1[9..].to_vec(), b"GET /".to_vec()],
                2000,
            )
            .await;
            let p = r.unwrap();
            assert_eq!(p.consumed, v1.len());
            assert_eq!(rest, b"GET /");
            let mut v2 = encode_v2(
                "[2001:db8::1]:1".parse().unwrap(),
                "[2001:db8::2]:2".parse().unwrap(),
            );
            v2.extend_from_slice(b"GET /x");
            let (r, rest) = over_socket(vec![v2[..20].to_vec(), v2[20..].to_vec()], 2000).await;
            assert_eq!(r.unwrap().version, 2);
            assert_eq!(rest, b"GET /x");
            // Malformed, missing, cut short, too large.
            let (r, _) = over_socket(
                vec![b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n".to_vec()],
                2000,
            )
            .await;
            assert!(
                matches!(r, Err(ReadError::Invalid(ProxyError::V1Malformed))),
                "{r:?}"
            );
            let (r, _) = over_socket(vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()], 2000).await;
            assert!(
                matches!(r, Err(ReadError::Invalid(ProxyError::NotProxy))),
                "{r:?}"
            );
            let (r, _) = over_socket(vec![b"PROXY TCP4 1.2.3.4".to_vec()], 100).await;
            assert!(matches!(r, Err(ReadError::Timeout)), "{r:?}");
            let mut big = V2_SIGNATURE.to_vec();
            big.extend_from_slice(&[0x21, 0x11, 0x20, 0x00]);
            big.resize(16 + 0x2000, 0);
            let (r, _) = over_socket(vec![big], 2000).await;
            assert!(matches!(r, Err(ReadError::TooLarge)), "{r:?}");
        });
    }
}
