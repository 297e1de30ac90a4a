//! A `multipart/byteranges` body (RFC 9110 §14.6) for a request with several satisfiable
//! ranges: one part per range with its own `Content-Type` and `Content-Range`, separated by a
//! random boundary.

use super::open::{self, blocking, Opened};
use super::range::ByteRange;
use super::respond::{miss_response, push};
use bytes::Bytes;
use peregrine_server::{Response, ResponseBody};

/// A `multipart/byteranges` body (RFC 9110 §14.6) for several ranges.
pub(super) async fn multipart(
    mut res: Response,
    file: Opened,
    ranges: &[ByteRange],
    len: u64,
    ctype: &[u8],
    etag: &str,
) -> Response {
    let boundary = boundary(etag);
    let mut heads = Vec::with_capacity(ranges.len());
    for &(a, b) in ranges {
        let mut h = format!("\r\n--{boundary}\r\nContent-Type: ").into_bytes();
        h.extend_from_slice(ctype);
        h.extend_from_slice(format!("\r\nContent-Range: bytes {a}-{b}/{len}\r\n\r\n").as_bytes());
        heads.push(h);
    }
    let ranges = ranges.to_vec();
    let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
    let built = blocking(move || {
        let mut out = Vec::new();
        for (h, &(a, b)) in heads.iter().zip(&ranges) {
            out.extend_from_slice(h);
            out.extend_from_slice(&open::read_at(&file.file, a, b - a + 1)?);
        }
        out.extend_from_slice(&tail);
        Ok(out)
    })
    .await;
    match built {
        Ok(out) => {
            res.status = 206;
            push(
                &mut res,
                "content-type",
                format!("multipart/byteranges; boundary={boundary}").into_bytes(),
            );
            res.body = ResponseBody::Full(Bytes::from(out));
            res
        }
        Err(miss) => miss_response(miss),
    }
}

/// A boundary unlikely to occur in the file: 64 random bits (std's per-process random keys).
fn boundary(etag: &str) -> String {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(etag);
    format!("peregrine-{r:016x}")
}
