//! Request-body content codings (`Content-Encoding: gzip | deflate | br`), decoded with a hard
//! limit on the decoded size: a small "bomb" never makes the worker allocate past the limit.

use crate::error::Error;
use bytes::Bytes;
use std::io::Read;

/// A content coding the framework decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    Gzip,
    /// HTTP's `deflate` is the zlib format (RFC 9110 §8.4.1.2).
    Deflate,
    Br,
}

/// The coding named by a `Content-Encoding` value: `None` for no coding or `identity`; 415 for
/// a coding we do not decode or for stacked codings (`gzip, br`).
pub(crate) fn coding_of(value: Option<&[u8]>) -> Result<Option<Coding>, Error> {
    let Some(v) = value else { return Ok(None) };
    let v = v.trim_ascii();
    if v.is_empty() || v.eq_ignore_ascii_case(b"identity") {
        return Ok(None);
    }
    if v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip") {
        return Ok(Some(Coding::Gzip));
    }
    if v.eq_ignore_ascii_case(b"deflate") {
        return Ok(Some(Coding::Deflate));
    }
    if v.eq_ignore_ascii_case(b"br") {
        return Ok(Some(Coding::Br));
    }
    Err(Error::new(415)
        .with_detail("unsupported content coding (gzip, deflate and br are accepted)")
        .with_header("accept-encoding", "gzip, deflate, br"))
}

/// Decodes `data`, failing with 413 as soon as the output would pass `limit` bytes and with 400
/// if the data is not valid in that coding.
pub(crate) fn decode(coding: Coding, data: &[u8], limit: usize) -> Result<Bytes, Error> {
    match coding {
        Coding::Gzip => read_limited(flate2::read::MultiGzDecoder::new(data), limit),
        Coding::Deflate => read_limited(flate2::read::ZlibDecoder::new(data), limit),
        Coding::Br => read_limited(brotli::Decompressor::new(data, 4096), limit),
    }
}

/// Reads `r` to its end into a buffer that never grows past `limit + 1` bytes: capacity grows
/// by doubling but is clamped, so the allocation is bounded by the limit, not by what the
/// compressed data claims.
fn read_limited(mut r: impl Read, limit: usize) -> Result<Bytes, Error> {
    let cap = limit.saturating_add(1);
    let mut out: Vec<u8> = Vec::with_capacity(cap.min(8 * 1024));
    let mut chunk = [0u8; 8 * 1024];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(
                    Error::bad_request().with_detail(format!("request body does not decode: {e}"))
                )
            }
        };
        if out.len() + n > limit {
            return Err(Error::new(413).with_detail("decoded request body exceeds the size limit"));
        }
        if out.len() + n > out.capacity() {
            let want = (out.capacity() * 2).max(out.len() + n).min(cap);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_recognised() {
        assert_eq!(coding_of(None).unwrap(), None);
        assert_eq!(coding_of(Some(b"identity")).unwrap(), None);
        assert_eq!(coding_of(Some(b" GZIP ")).unwrap(), Some(Coding::Gzip));
        assert_eq!(coding_of(Some(b"br")).unwrap(), Some(Coding::Br));
        assert_eq!(coding_of(Some(b"deflate")).unwrap(), Some(Coding::Deflate));
        assert_eq!(coding_of(Some(b"zstd")).unwrap_err().status(), 415);
        assert_eq!(coding_of(Some(b"gzip, br")).unwrap_err().status(), 415);
    }

    #[test]
    fn round_trips_and_limits() {
        let data = b"hello hello hello".repeat(100);
        let z = gzip(&data);
        assert_eq!(
            &decode(Coding::Gzip, &z, data.len()).unwrap()[..],
            &data[..]
        );
        assert_eq!(
            decode(Coding::Gzip, &z, data.len() - 1)
                .unwrap_err()
                .status(),
            413
        );
        assert_eq!(
            decode(Coding::Gzip, b"not gzip", 100).unwrap_err().status(),
            400
        );
        let mut br = Vec::new();
        brotli::CompressorWriter::new(&mut br, 4096, 5, 22)
            .write_all(&data)
            .unwrap();
        assert_eq!(&decode(Coding::Br, &br, 1 << 20).unwrap()[..], &data[..]);
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        // 64 MiB of zeros compress to ~64 KiB; the limit is 1 MiB.
        let zeros = vec![0u8; 64 << 20];
        let z = gzip(&zeros);
        assert!(z.len() < 100 * 1024);
        let e = decode(Coding::Gzip, &z, 1 << 20).unwrap_err();
        assert_eq!(e.status(), 413);
    }
}
