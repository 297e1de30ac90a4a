//! Request-body content codings (`Content-Encoding: gzip | deflate | br`), decoded with a hard
//! limit on the decoded size: a small "bomb" never makes the worker allocate past the limit.
//! gzip and deflate need the `compression` feature, br the `brotli` feature; a build without
//! them answers 415 to those codings, naming the ones it decodes.

use crate::error::Error;
use bytes::Bytes;
#[cfg(feature = "compression")]
use std::io::Read;

/// A content coding the framework decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    #[cfg(feature = "compression")]
    Gzip,
    /// HTTP's `deflate` is the zlib format (RFC 9110 §8.4.1.2).
    #[cfg(feature = "compression")]
    Deflate,
    #[cfg(feature = "brotli")]
    Br,
}

/// The codings this build decodes, for the 415's detail and `Accept-Encoding`.
#[cfg(feature = "brotli")]
const DECODED: &str = "gzip, deflate, br";
#[cfg(all(feature = "compression", not(feature = "brotli")))]
const DECODED: &str = "gzip, deflate";
#[cfg(not(feature = "compression"))]
const DECODED: &str = "identity";

/// The coding named by a `Content-Encoding` value: `None` for no coding or `identity`; 415 for
/// a coding we do not decode or for stacked codings (`gzip, br`).
pub(crate) fn coding_of(value: Option<&[u8]>) -> Result<Option<Coding>, Error> {
    let Some(v) = value else { return Ok(None) };
    let v = v.trim_ascii();
    if v.is_empty() || v.eq_ignore_ascii_case(b"identity") {
        return Ok(None);
    }
    #[cfg(feature = "compression")]
    if v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip") {
        return Ok(Some(Coding::Gzip));
    }
    #[cfg(feature = "compression")]
    if v.eq_ignore_ascii_case(b"deflate") {
        return Ok(Some(Coding::Deflate));
    }
    #[cfg(feature = "brotli")]
    if v.eq_ignore_ascii_case(b"br") {
        return Ok(Some(Coding::Br));
    }
    Err(Error::new(415)
        .with_detail(format!(
            "unsupported content coding (this server decodes: {DECODED})"
        ))
        .with_header("accept-encoding", DECODED))
}

/// Decodes `data`, failing with 413 as soon as the output would pass `limit` bytes and with 400
/// if the data is not valid in that coding.
// Without `compression`, `Coding` has no values and this is never called.
#[cfg_attr(not(feature = "compression"), allow(unused_variables))]
pub(crate) fn decode(coding: Coding, data: &[u8], limit: usize) -> Result<Bytes, Error> {
    match coding {
        #[cfg(feature = "compression")]
        Coding::Gzip => read_limited(flate2::read::MultiGzDecoder::new(data), limit),
        #[cfg(feature = "compression")]
        Coding::Deflate => read_limited(flate2::read::ZlibDecoder::new(data), limit),
        #[cfg(feature = "brotli")]
        Coding::Br => read_limited(brotli::Decompressor::new(data, 4096), limit),
    }
}

/// Reads `r` to its end into a buffer that never grows past `limit + 1` bytes: capacity grows
/// by doubling but is clamped, so the allocation is bounded by the limit, not by what the
/// compressed data claims.
#[cfg(feature = "compression")]
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

#[cfg(all(test, feature = "compression"))]
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
    }

    #[cfg(feature = "brotli")]
    #[test]
    fn brotli_round_trips() {
        let data = b"hello hello hello".repeat(100);
        assert_eq!(coding_of(Some(b"br")).unwrap(), Some(Coding::Br));
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

/// The codings a build without them refuses: 415, naming what it does decode.
#[cfg(all(test, not(feature = "brotli")))]
mod refused {
    use super::*;

    fn accept_encoding(e: Error) -> Option<String> {
        let res = crate::IntoResponse::into_response(e);
        crate::response::header_value(&res, "accept-encoding")
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    #[test]
    fn br_is_refused_without_the_brotli_feature() {
        let e = coding_of(Some(b"br")).unwrap_err();
        assert_eq!(e.status(), 415);
        assert_eq!(accept_encoding(e).as_deref(), Some(DECODED));
    }

    #[cfg(not(feature = "compression"))]
    #[test]
    fn gzip_and_deflate_are_refused_without_the_compression_feature() {
        for coding in [&b"gzip"[..], b"x-gzip", b"deflate"] {
            let e = coding_of(Some(coding)).unwrap_err();
            assert_eq!(e.status(), 415);
            assert_eq!(accept_encoding(e).as_deref(), Some("identity"));
        }
        assert_eq!(coding_of(Some(b"identity")).unwrap(), None);
    }
}
