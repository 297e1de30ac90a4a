//! Which version a PROXY header is, by its first byte.

use super::header::{ProxyError, Status};
use super::v1::parse_v1;
use super::v2::parse_v2;

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
