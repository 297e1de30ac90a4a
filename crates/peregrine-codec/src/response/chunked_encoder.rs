//! The encoder for `Transfer-Encoding: chunked` response bodies (RFC 9112 §7.1).

use super::fields::{check_field, is_engine_owned, FieldError};

/// The last chunk and the empty trailer section that end a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Encoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1): each piece of data becomes
/// a chunk; [`ChunkedEncoder::end`] (or [`ChunkedEncoder::end_with_trailers`]) writes the last
/// chunk. Empty pieces are skipped, since an empty chunk would end the body.
///
/// The data may be written by the caller itself (from its own buffer, without a copy) between
/// [`ChunkedEncoder::chunk_head`] and [`ChunkedEncoder::chunk_tail`].
///
/// ```
/// use peregrine_codec::response::ChunkedEncoder;
/// let mut out = Vec::new();
/// let mut enc = ChunkedEncoder::new();
/// enc.chunk(&mut out, b"Hello, ");
/// enc.chunk(&mut out, b"");
/// enc.chunk(&mut out, b"World!");
/// enc.end_with_trailers(&mut out, &[(b"X-Checksum".as_slice(), b"42".as_slice())]).unwrap();
/// assert_eq!(out, b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\nX-Checksum: 42\r\n\r\n");
/// ```
#[derive(Debug, Default)]
pub struct ChunkedEncoder {
    ended: bool,
}

impl ChunkedEncoder {
    /// An encoder at the start of a body.
    pub fn new() -> Self {
        ChunkedEncoder { ended: false }
    }

    /// Appends a whole chunk holding `data` (nothing when `data` is empty).
    #[inline]
    pub fn chunk(&mut self, out: &mut Vec<u8>, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.chunk_head(out, data.len());
        out.extend_from_slice(data);
        self.chunk_tail(out);
    }

    /// Appends the size line of a chunk of `len` bytes (`len > 0`), in lowercase hex.
    #[inline]
    pub fn chunk_head(&mut self, out: &mut Vec<u8>, len: usize) {
        debug_assert!(len > 0 && !self.ended, "an empty chunk would end the body");
        let mut buf = [0u8; 16];
        let mut i = buf.len();
        let mut n = len;
        loop {
            i -= 1;
            buf[i] = b"0123456789abcdef"[n & 15];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[i..]);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the CRLF that follows a chunk's data.
    #[inline]
    pub fn chunk_tail(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\r\n");
    }

    /// Ends the body: the last chunk and an empty trailer section.
    #[inline]
    pub fn end(&mut self, out: &mut Vec<u8>) {
        debug_assert!(!self.ended, "a chunked body ends once");
        self.ended = true;
        out.extend_from_slice(LAST_CHUNK);
    }

    /// Ends the body with trailer fields (RFC 9112 §7.1.2). Each field is checked as by
    /// [`check_field`]; fields that frame or route a message (and may not be trailers, RFC 9110
    /// §6.5.1) are refused as [`FieldError::Name`]. On an error nothing is written and the body
    /// is not ended.
    pub fn end_with_trailers(
        &mut self,
        out: &mut Vec<u8>,
        trailers: &[(&[u8], &[u8])],
    ) -> Result<(), FieldError> {
        for (name, value) in trailers {
            check_field(name, value)?;
            if is_engine_owned(name)
                || name.eq_ignore_ascii_case(b"host")
                || name.eq_ignore_ascii_case(b"trailer")
            {
                return Err(FieldError::Name);
            }
        }
        debug_assert!(!self.ended, "a chunked body ends once");
        self.ended = true;
        out.extend_from_slice(b"0\r\n");
        for (name, value) in trailers {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Whether the last chunk was written.
    pub fn is_ended(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_lowercase_hex_and_trailers_are_checked() {
        for n in [1usize, 9, 10, 15, 16, 255, 4096, 0xdead_beef, usize::MAX] {
            let mut out = Vec::new();
            ChunkedEncoder::new().chunk_head(&mut out, n);
            assert_eq!(out, format!("{n:x}\r\n").as_bytes());
        }
        let mut enc = ChunkedEncoder::new();
        let mut out = Vec::new();
        enc.chunk(&mut out, b"abc");
        assert!(!enc.is_ended());
        for bad in [
            (&b"Content-Length"[..], &b"3"[..]),
            (b"Transfer-Encoding", b"chunked"),
            (b"Host", b"x"),
            (b"Trailer", b"x"),
            (b"X Y", b"1"),
            (b"X", b"1\r\n"),
        ] {
            assert!(enc.end_with_trailers(&mut out, &[bad]).is_err(), "{bad:?}");
            assert!(!enc.is_ended());
        }
        assert_eq!(out, b"3\r\nabc\r\n");
        enc.end(&mut out);
        assert!(enc.is_ended());
        assert_eq!(out, b"3\r\nabc\r\n0\r\n\r\n");
        // Decoded by the codec's own decoder, the encoder's output is the data it was given.
        let mut enc = ChunkedEncoder::new();
        let mut wire = Vec::new();
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(777) {
            enc.chunk(&mut wire, piece);
        }
        enc.end_with_trailers(&mut wire, &[(b"X-Sum", b"1")])
            .unwrap();
        let mut dec = crate::ChunkedDecoder::new();
        let limits = crate::Limits::default();
        let (mut at, mut got) = (0, Vec::new());
        loop {
            match dec.decode(&wire[at..], &limits).unwrap() {
                crate::ChunkedStep::Data {
                    consumed,
                    data_start,
                    data_len,
                } => {
                    got.extend_from_slice(&wire[at + data_start..at + data_start + data_len]);
                    at += consumed;
                }
                crate::ChunkedStep::Done { consumed } => {
                    at += consumed;
                    break;
                }
                crate::ChunkedStep::NeedMore { .. } => panic!("complete body"),
            }
        }
        assert_eq!((got, at), (data, wire.len()));
    }
}
