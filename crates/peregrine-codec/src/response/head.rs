//! The lines that end a response head: pre-encoded constant lines, the `Connection` line and
//! [`finish_head`].

use super::framing::Framing;
use crate::Version;

/// `Connection: close\r\n`, sent with every error response and when either side closes.
pub const CONNECTION_CLOSE: &[u8] = b"Connection: close\r\n";
/// `Connection: keep-alive\r\n`, sent to HTTP/1.0 clients that asked to keep the connection.
pub const CONNECTION_KEEP_ALIVE: &[u8] = b"Connection: keep-alive\r\n";
/// The complete interim response sent before reading a body announced with
/// `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The `Connection` line a response needs, per http1-rules.md G: `close` when the connection
/// will be closed after this response (always after an error, or when the client asked); for an
/// HTTP/1.0 client that asked for `keep-alive` and will get it, `keep-alive`; otherwise nothing
/// (persistence is the HTTP/1.1 default).
///
/// ```
/// use peregrine_codec::{response::{connection_header, CONNECTION_CLOSE}, Version};
/// assert_eq!(connection_header(Version::Http11, false), Some(CONNECTION_CLOSE));
/// assert_eq!(connection_header(Version::Http11, true), None);
/// ```
pub fn connection_header(version: Version, keep_open: bool) -> Option<&'static [u8]> {
    match (keep_open, version) {
        (false, _) => Some(CONNECTION_CLOSE),
        (true, Version::Http10) => Some(CONNECTION_KEEP_ALIVE),
        (true, Version::Http11 | Version::Http2 | Version::Http3) => None,
    }
}

/// Which `Connection` line a response head carries (RFC 9112 §9.3, §9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionLine {
    /// None: persistence is the HTTP/1.1 default.
    Default,
    /// `Connection: close`: this is the last response on the connection.
    Close,
    /// `Connection: keep-alive`: an HTTP/1.0 client asked to keep the connection and will.
    KeepAlive,
}

impl ConnectionLine {
    /// The line's bytes (empty for [`ConnectionLine::Default`]).
    #[inline]
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            ConnectionLine::Default => b"",
            ConnectionLine::Close => CONNECTION_CLOSE,
            ConnectionLine::KeepAlive => CONNECTION_KEEP_ALIVE,
        }
    }
}

/// Appends the `Connection` and framing lines and the empty line that ends a head.
///
/// ```
/// use peregrine_codec::response::{finish_head, ConnectionLine, Framing};
/// let mut out = Vec::new();
/// finish_head(&mut out, ConnectionLine::Close, Framing::Length(2));
/// assert_eq!(out, b"Connection: close\r\nContent-Length: 2\r\n\r\n");
/// ```
#[inline]
pub fn finish_head(out: &mut Vec<u8>, conn: ConnectionLine, framing: Framing) {
    out.extend_from_slice(conn.as_bytes());
    framing.write(out);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::{reason_phrase, sends_body, status_line, BodyKind};

    #[test]
    fn a_sized_body_head_ends_with_its_length() {
        for version in [Version::Http10, Version::Http11] {
            let f = Framing::choose(200, BodyKind::Sized(20 << 20), version);
            let mut out = status_line(200).to_vec();
            finish_head(&mut out, ConnectionLine::Default, f);
            assert!(out.ends_with(b"Content-Length: 20971520\r\n\r\n"));
        }
    }

    #[test]
    fn connection_lines() {
        assert_eq!(
            connection_header(Version::Http10, true),
            Some(CONNECTION_KEEP_ALIVE)
        );
        assert_eq!(
            connection_header(Version::Http10, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(
            connection_header(Version::Http11, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(connection_header(Version::Http11, true), None);
    }

    #[test]
    fn head_204_and_304_heads_are_encoded_without_a_body() {
        // HEAD: the framing GET would get, no body bytes.
        let mut out = status_line(200).to_vec();
        let f = Framing::choose(200, BodyKind::Full(13), Version::Http11);
        finish_head(&mut out, ConnectionLine::Default, f);
        assert!(!sends_body(200, true));
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n");
        for code in [204, 304] {
            let mut out = status_line(code).to_vec();
            let f = Framing::choose(code, BodyKind::Full(13), Version::Http11);
            finish_head(&mut out, ConnectionLine::Close, f);
            assert!(!sends_body(code, false));
            let want = format!(
                "HTTP/1.1 {code} {}\r\nConnection: close\r\n\r\n",
                reason_phrase(code)
            );
            assert_eq!(out, want.as_bytes());
        }
        let mut out = Vec::new();
        finish_head(&mut out, ConnectionLine::KeepAlive, Framing::Chunked);
        assert_eq!(
            out,
            b"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
    }
}
