//! How a response body is delimited (RFC 9112 §6): what the handler gave ([`BodyKind`]), the
//! framing line it gets ([`Framing`]), and whether its bytes are sent at all ([`sends_body`]).

use super::status::status_forbids_body;
use crate::Version;

/// `Transfer-Encoding: chunked\r\n`.
pub const TRANSFER_ENCODING_CHUNKED: &[u8] = b"Transfer-Encoding: chunked\r\n";

/// Appends `Content-Length: <n>\r\n` to `out` without allocating a temporary string.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// What a handler gave as a response body, as far as framing is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// A body of known length.
    Full(u64),
    /// A body produced piece by piece, length unknown in advance.
    Stream,
    /// A body produced piece by piece (a stream, a file region) whose length is announced in
    /// advance: framed by `Content-Length` like [`BodyKind::Full`], and the sender must hold
    /// it to exactly that many bytes (see [`SizedBody`](super::SizedBody)).
    Sized(u64),
}

/// The framing line a response head carries (RFC 9112 §6.1–§6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No framing line: a status that has no body (1xx, 204, 304), or an HTTP/1.0 stream
    /// delimited by closing the connection.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked` (HTTP/1.1 only).
    Chunked,
}

impl Framing {
    /// The framing of a response with this status and body to a request of this version.
    ///
    /// A status that forbids a body gets no framing line whatever the handler gave; a stream
    /// is chunked for HTTP/1.1 and delimited by close for HTTP/1.0 (which has no chunked
    /// coding; see [`Framing::delimits_by_close`]). A response to HEAD gets the framing the
    /// same response to GET would have (RFC 9110 §9.3.2); only its body is left out (see
    /// [`sends_body`]).
    ///
    /// ```
    /// use peregrine_codec::response::{BodyKind, Framing};
    /// use peregrine_codec::Version;
    ///
    /// assert_eq!(Framing::choose(200, BodyKind::Full(5), Version::Http11), Framing::Length(5));
    /// assert_eq!(Framing::choose(200, BodyKind::Empty, Version::Http11), Framing::Length(0));
    /// assert_eq!(Framing::choose(200, BodyKind::Stream, Version::Http11), Framing::Chunked);
    /// assert_eq!(Framing::choose(200, BodyKind::Stream, Version::Http10), Framing::None);
    /// assert_eq!(Framing::choose(200, BodyKind::Sized(9), Version::Http10), Framing::Length(9));
    /// assert_eq!(Framing::choose(304, BodyKind::Full(5), Version::Http11), Framing::None);
    /// ```
    #[inline]
    pub fn choose(status: u16, body: BodyKind, version: Version) -> Framing {
        if status_forbids_body(status) {
            return Framing::None;
        }
        match body {
            BodyKind::Empty => Framing::Length(0),
            BodyKind::Full(n) | BodyKind::Sized(n) => Framing::Length(n),
            BodyKind::Stream if version == Version::Http11 => Framing::Chunked,
            BodyKind::Stream => Framing::None,
        }
    }

    /// Whether the body of such a response ends only when the connection closes (a stream to
    /// an HTTP/1.0 client), so the connection cannot be kept.
    #[inline]
    pub fn delimits_by_close(status: u16, body: BodyKind, version: Version) -> bool {
        body == BodyKind::Stream && version == Version::Http10 && !status_forbids_body(status)
    }

    /// Appends the framing line (nothing for [`Framing::None`]).
    #[inline]
    pub fn write(self, out: &mut Vec<u8>) {
        match self {
            Framing::None => {}
            Framing::Length(n) => write_content_length(out, n),
            Framing::Chunked => out.extend_from_slice(TRANSFER_ENCODING_CHUNKED),
        }
    }
}

/// Whether the body bytes of a response are sent: never for HEAD, 1xx, 204 or 304.
#[inline]
pub fn sends_body(status: u16, head_request: bool) -> bool {
    !head_request && !status_forbids_body(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_formatting() {
        let mut out = Vec::new();
        write_content_length(&mut out, 0);
        write_content_length(&mut out, u64::MAX);
        assert_eq!(
            out,
            b"Content-Length: 0\r\nContent-Length: 18446744073709551615\r\n"
        );
    }

    #[test]
    fn every_status_gets_its_framing_for_every_body_and_version() {
        let bodies = [
            BodyKind::Empty,
            BodyKind::Full(7),
            BodyKind::Stream,
            BodyKind::Sized(9),
        ];
        for code in 100..=999u16 {
            let bodiless = (100..200).contains(&code) || code == 204 || code == 304;
            assert_eq!(status_forbids_body(code), bodiless, "{code}");
            for version in [Version::Http10, Version::Http11] {
                for body in bodies {
                    let f = Framing::choose(code, body, version);
                    let want = match body {
                        _ if bodiless => Framing::None,
                        BodyKind::Empty => Framing::Length(0),
                        BodyKind::Full(n) | BodyKind::Sized(n) => Framing::Length(n),
                        BodyKind::Stream if version == Version::Http11 => Framing::Chunked,
                        BodyKind::Stream => Framing::None,
                    };
                    assert_eq!(f, want, "{code} {body:?} {version:?}");
                    let by_close = Framing::delimits_by_close(code, body, version);
                    assert_eq!(
                        by_close,
                        !bodiless && body == BodyKind::Stream && version == Version::Http10
                    );
                }
                for head in [false, true] {
                    assert_eq!(sends_body(code, head), !head && !bodiless);
                }
            }
        }
    }

    #[test]
    fn sized_body_is_framed_by_length_even_for_http10_and_head() {
        for version in [Version::Http10, Version::Http11] {
            let f = Framing::choose(200, BodyKind::Sized(20 << 20), version);
            assert_eq!(f, Framing::Length(20 << 20));
            // Never delimited by close: an HTTP/1.0 keep-alive client can keep the connection.
            assert!(!Framing::delimits_by_close(
                200,
                BodyKind::Sized(5),
                version
            ));
        }
        assert_eq!(
            Framing::choose(304, BodyKind::Sized(5), Version::Http11),
            Framing::None
        );
    }
}
