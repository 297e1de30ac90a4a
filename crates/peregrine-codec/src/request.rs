//! Zero-copy request-head parsing.
//!
//! API CONTRACT (fixed; the engine is written against it): `parse_request_head` takes the bytes
//! read so far, the limits, and a caller-provided fixed-capacity table of [`FieldSpan`]s. It
//! returns [`Parsed::Incomplete`] when more bytes are needed, [`Parsed::Complete`] with a
//! [`RequestHead`] whose spans index into `buf`, or a [`ParseError`] carrying the status to answer.

pub use crate::head::{
    BodyFraming, ConnectionDirective, Expectation, FieldSpan, Method, Parsed, RequestHead, Span,
    Version,
};
pub use crate::scan::Isa;
use crate::{parse, Limits, ParseError};

/// Parses one request head from the start of `buf`.
///
/// `fields` is a fixed-capacity table supplied by the caller (no allocation happens here); at
/// most `min(fields.len(), limits.max_fields)` fields are accepted, more → 431.
///
/// Errors are final: the caller answers `err.status` with `Connection: close` and closes.
/// An incomplete head that already breaks a limit or a rule is reported as an error as soon as
/// that is certain, not only when the head completes.
///
/// The scanning path (AVX2, SSE or scalar) is chosen once per process from the CPU; all paths
/// give identical results.
///
/// ```
/// use peregrine_codec::{parse_request_head, BodyFraming, FieldSpan, Limits, Parsed};
///
/// let buf = b"POST /items?id=7 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\n{}";
/// let mut fields = [FieldSpan::default(); 32];
/// let Ok(Parsed::Complete(head)) = parse_request_head(buf, &Limits::default(), &mut fields) else {
///     panic!("a complete, valid head");
/// };
/// assert_eq!(head.path.slice(buf), b"/items");
/// assert_eq!(head.query.unwrap().slice(buf), b"id=7");
/// assert_eq!(head.authority.unwrap().slice(buf), b"example.com");
/// assert_eq!(head.framing, BodyFraming::Length(2));
/// assert_eq!(&buf[head.head_len..], b"{}");
/// assert_eq!(fields[1].name.slice(buf), b"Content-Length");
///
/// // Not enough bytes yet, and a head that breaks a rule:
/// assert_eq!(parse_request_head(&buf[..20], &Limits::default(), &mut fields), Ok(Parsed::Incomplete));
/// let err = parse_request_head(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", &Limits::default(), &mut fields);
/// assert_eq!(err.unwrap_err().status, 400);
/// ```
// Inlined into the caller so that the result is written in the caller's own frame, where it is
// read (see `parse::instantiations::parse_fast_then`); only the dispatch is inlined, the parse is one call.
#[inline]
pub fn parse_request_head(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    let mut out = Ok(Parsed::Incomplete);
    parse_request_head_into(buf, limits, fields, &mut out);
    out
}

/// [`parse_request_head`], writing the result into `out` (whatever it held before).
///
/// The head is written field by field as it is found. A caller that keeps the result where it
/// will live (in a request object, say) and reads it there avoids copying it as a whole right
/// after the parse, a copy whose wide loads of just-written fields stall the processor.
///
/// ```
/// use peregrine_codec::{parse_request_head_into, FieldSpan, Limits, Parsed};
///
/// let mut fields = [FieldSpan::default(); 8];
/// let mut out = Ok(Parsed::Incomplete);
/// parse_request_head_into(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &Limits::default(), &mut fields, &mut out);
/// let Ok(Parsed::Complete(head)) = &out else { panic!("a complete head") };
/// assert_eq!(head.field_count, 1);
/// ```
#[inline]
pub fn parse_request_head_into(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // The usual path in one compare (the `match` below costs a few more per request).
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if Isa::best_is_avx2() {
        // SAFETY: `BEST` holds `Avx2` only once `Isa::best` found the CPU supports it.
        return unsafe { parse::instantiations::parse_avx2(buf, limits, fields, out) };
    }
    match Isa::best() {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `Isa::best` only returns a path the CPU supports.
        Isa::Avx2 => unsafe { parse::instantiations::parse_avx2(buf, limits, fields, out) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above.
        Isa::Sse42 => unsafe { parse::instantiations::parse_sse42(buf, limits, fields, out) },
        _ => parse::instantiations::parse_scalar(buf, limits, fields, out),
    }
}

/// [`parse_request_head`] on a chosen scanning path. Every path gives exactly the same result;
/// this exists so that tests, fuzzers and benchmarks can compare them. A path the CPU cannot run
/// falls back to the scalar one.
#[doc(hidden)]
#[inline]
pub fn parse_request_head_with(
    isa: Isa,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    let mut out = Ok(Parsed::Incomplete);
    match isa {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for AVX2.
        Isa::Avx2 if isa.is_available() => unsafe {
            parse::instantiations::parse_avx2(buf, limits, fields, &mut out)
        },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for SSSE3 and SSE4.2.
        Isa::Sse42 if isa.is_available() => unsafe {
            parse::instantiations::parse_sse42(buf, limits, fields, &mut out)
        },
        _ => parse::instantiations::parse_scalar(buf, limits, fields, &mut out),
    }
    out
}

/// [`parse_request_head_with`] without the fast path: the general parser alone, which decides
/// every rule. The fast path must agree with it on every input it accepts and decline every
/// other; this exists so that tests and fuzzers can check that.
#[doc(hidden)]
pub fn parse_request_head_general_with(
    isa: Isa,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    match isa {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for AVX2.
        Isa::Avx2 if isa.is_available() => unsafe {
            parse::instantiations::parse_avx2_general(buf, limits, fields)
        },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the CPU was checked for SSSE3 and SSE4.2.
        Isa::Sse42 if isa.is_available() => unsafe {
            parse::instantiations::parse_sse42_general(buf, limits, fields)
        },
        _ => parse::instantiations::parse_scalar_general(buf, limits, fields),
    }
}
