//! Helpers shared by the integration tests: run a parse through every scanning path, check they
//! agree, and check that splitting the input never changes the outcome.
#![allow(dead_code)]

use peregrine_codec::{
    parse_request_head_general_with, parse_request_head_with, ChunkedDecoder, ChunkedStep,
    FieldSpan, Isa, Limits, ParseError, Parsed, RequestHead,
};

pub const TABLE: usize = 128;

/// Parses `buf` on every available path, each with the fast path and with the general parser
/// alone; asserts they all return the same thing (including the filled part of the field table)
/// and returns it.
pub fn parse_all(buf: &[u8], limits: &Limits) -> (Result<Parsed, ParseError>, Vec<FieldSpan>) {
    let mut first: Option<(Result<Parsed, ParseError>, Vec<FieldSpan>)> = None;
    for isa in Isa::available() {
        for general in [false, true] {
            let mut fields = [FieldSpan::default(); TABLE];
            let r = if general {
                parse_request_head_general_with(isa, buf, limits, &mut fields)
            } else {
                parse_request_head_with(isa, buf, limits, &mut fields)
            };
            let filled = match r {
                Ok(Parsed::Complete(h)) => fields[..h.field_count].to_vec(),
                _ => Vec::new(),
            };
            let which = if general {
                "general parser"
            } else {
                "fast path"
            };
            match &first {
                None => first = Some((r, filled)),
                Some((r0, f0)) => {
                    assert_eq!(&r, r0, "{isa:?} {which} disagrees on {:?}", show(buf));
                    assert_eq!(
                        &filled,
                        f0,
                        "{isa:?} {which} fields disagree on {:?}",
                        show(buf)
                    );
                }
            }
        }
    }
    first.unwrap()
}

pub fn show(buf: &[u8]) -> String {
    String::from_utf8_lossy(&buf[..buf.len().min(200)]).into_owned()
}

/// Parses a complete valid request, checking on every path that every proper prefix of the head
/// is `Incomplete` (one byte at a time), that every two-piece split gives the same result, and
/// that bytes after the head do not change it. Returns the head and its fields.
pub fn accept_with(buf: &[u8], limits: &Limits) -> (RequestHead, Vec<FieldSpan>) {
    let (r, fields) = parse_all(buf, limits);
    let head = match r {
        Ok(Parsed::Complete(h)) => h,
        other => panic!(
            "expected a complete head for {:?}, got {other:?}",
            show(buf)
        ),
    };
    // One byte at a time == every prefix, since the caller re-parses its accumulated buffer.
    for k in 0..head.head_len {
        let (p, _) = parse_all(&buf[..k], limits);
        assert_eq!(
            p,
            Ok(Parsed::Incomplete),
            "prefix of {k} bytes of {:?}",
            show(buf)
        );
    }
    // Split at every boundary: first piece, then the rest appended; and trailing bytes of a
    // following request must not matter.
    for k in 0..=buf.len() {
        let mut acc = buf[..k].to_vec();
        let (p, _) = parse_all(&acc, limits);
        if k >= head.head_len {
            assert_eq!(p, Ok(Parsed::Complete(head)));
        }
        acc.extend_from_slice(&buf[k..]);
        acc.extend_from_slice(b"GET /next HTTP/1.1\r\n");
        let (again, f2) = parse_all(&acc, limits);
        assert_eq!(again, Ok(Parsed::Complete(head)), "split at {k}");
        assert_eq!(f2, fields);
    }
    (head, fields)
}

pub fn accept(buf: &[u8]) -> (RequestHead, Vec<FieldSpan>) {
    accept_with(buf, &Limits::default())
}

/// Asserts `buf` is rejected with `status` on every path, and that no prefix of it is rejected
/// with a different status (an early error must be the error).
pub fn reject_with(buf: &[u8], limits: &Limits, status: u16) -> ParseError {
    let (r, _) = parse_all(buf, limits);
    let err = match r {
        Err(e) => e,
        Ok(p) => panic!("expected {status} for {:?}, got {p:?}", show(buf)),
    };
    assert_eq!(err.status, status, "{:?}: {err}", show(buf));
    // Prefixes: step through all of them for short inputs, sample long ones.
    let step = (buf.len() / 512).max(1);
    for k in (0..buf.len()).step_by(step) {
        match parse_all(&buf[..k], limits).0 {
            Ok(Parsed::Incomplete) => {}
            Err(e) => assert_eq!(e.status, status, "prefix {k} of {:?}: {e}", show(buf)),
            Ok(p) => panic!("prefix {k} of a rejected input parsed: {p:?}"),
        }
    }
    err
}

pub fn reject(buf: &[u8], status: u16) -> ParseError {
    reject_with(buf, &Limits::default(), status)
}

/// The decoded body and the bytes after it, or `None` if the input ended first.
pub type ChunkedOutcome = Result<Option<(Vec<u8>, Vec<u8>)>, ParseError>;

/// Feeds `input` in pieces (the caller keeps unconsumed bytes and appends the next piece, as a
/// connection driver does). Returns the body and the bytes left after the chunked body, or the
/// error. `Ok(None)` if the input ended before the body did.
pub fn feed_chunked(input: &[u8], piece: usize, limits: &Limits) -> ChunkedOutcome {
    let mut dec = ChunkedDecoder::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut body = Vec::new();
    let mut chunks = input.chunks(piece.max(1));
    loop {
        match dec.decode(&pending, limits)? {
            ChunkedStep::Data {
                consumed,
                data_start,
                data_len,
            } => {
                assert!(data_len > 0, "empty data step");
                assert!(
                    data_start + data_len <= consumed && consumed <= pending.len(),
                    "data step outside what it consumed"
                );
                body.extend_from_slice(&pending[data_start..data_start + data_len]);
                pending.drain(..consumed);
            }
            ChunkedStep::NeedMore { consumed } => {
                pending.drain(..consumed);
                match chunks.next() {
                    Some(c) => pending.extend_from_slice(c),
                    None => return Ok(None),
                }
            }
            ChunkedStep::Done { consumed } => {
                pending.drain(..consumed);
                assert!(dec.is_done());
                for c in chunks {
                    pending.extend_from_slice(c);
                }
                return Ok(Some((body, pending)));
            }
        }
    }
}
