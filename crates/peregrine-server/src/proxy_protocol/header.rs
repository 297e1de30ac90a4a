//! What a PROXY header says ([`ProxyHeader`], [`Parsed`]), the parse's outcome ([`Status`])
//! and why a header is refused ([`ProxyError`]): shared by both versions.

use std::fmt;
use std::net::SocketAddr;

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

/// Result of [`parse`](super::parse) on the bytes received so far.
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

/// Whether `buf` is a proper prefix of `of`, or starts with it (`Some(true)`: starts with it).
pub(super) fn prefix_state(buf: &[u8], of: &[u8]) -> Result<bool, ProxyError> {
    let n = buf.len().min(of.len());
    if buf[..n] != of[..n] {
        return Err(ProxyError::NotProxy);
    }
    Ok(buf.len() >= of.len())
}

/// Helpers for the v1 and v2 tests: what one version's parser finds in a whole header.
#[cfg(test)]
pub(super) mod testing {
    use super::{Parsed, ProxyError, Status};

    /// A version's parser (`parse_v1`, `parse_v2`).
    pub(crate) type Parse = fn(&[u8]) -> Result<Status, ProxyError>;

    pub(crate) fn complete_by(parse: Parse, buf: &[u8]) -> Parsed {
        match parse(buf) {
            Ok(Status::Complete(p)) => p,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    pub(crate) fn err_by(parse: Parse, buf: &[u8]) -> ProxyError {
        match parse(buf) {
            Err(e) => e,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }
}
