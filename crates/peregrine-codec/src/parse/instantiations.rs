//! The parser instantiated once per scanning path (scalar, SSE, AVX2), each compiled with its
//! path's target features: the fast path first, then the general parser when it declines.

use super::parse_core;
use crate::head::{FieldSpan, Parsed};
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
use crate::scan::{Avx2, Sse42};
use crate::scan::{Scalar, Scan};
use crate::{Limits, ParseError};

/// The fast path, then (when it declines) the general parser, for one scanning strategy; the
/// result goes to `out`.
///
/// The fast path fills the head in place inside `out`, which is the caller's own result when
/// [`crate::parse_request_head`] is inlined into it: the head is written once, where it is
/// read, instead of being built in registers and copied out through every return.
#[inline(always)]
fn parse_fast_then<S: Scan>(
    s: S,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
    general: impl FnOnce(&[u8], &Limits, &mut [FieldSpan]) -> Result<Parsed, ParseError>,
) {
    *out = Ok(Parsed::Complete(crate::fast::EMPTY_HEAD));
    let done = match out {
        Ok(Parsed::Complete(head)) => crate::fast::parse_fast(s, buf, limits, fields, head),
        _ => false,
    };
    if !done {
        *out = general(buf, limits, fields);
    }
}

/// Scalar instantiation.
pub(crate) fn parse_scalar(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    parse_fast_then(Scalar, buf, limits, fields, out, parse_scalar_general)
}

/// Scalar instantiation of the general parser alone. Kept out of line so that the fast path's
/// function stays small (few registers saved, nothing spilled).
#[inline(never)]
pub(crate) fn parse_scalar_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    parse_core(Scalar, buf, limits, fields)
}

/// SSE instantiation: compiled with SSSE3/SSE4.2 so the scans inline as vector code.
///
/// # Safety
/// The CPU must support SSSE3 and SSE4.2 (`Isa::Sse42.is_available()`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "ssse3,sse4.2")]
pub(crate) unsafe fn parse_sse42(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // SAFETY: this function's own contract (the CPU supports SSSE3 and SSE4.2).
    let s = unsafe { Sse42::new_unchecked() };
    parse_fast_then(s, buf, limits, fields, out, |b, l, f| {
        // SAFETY: as above.
        unsafe { parse_sse42_general(b, l, f) }
    })
}

/// SSE instantiation of the general parser alone.
///
/// # Safety
/// As for [`parse_sse42`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "ssse3,sse4.2")]
#[inline(never)]
pub(crate) unsafe fn parse_sse42_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // SAFETY: this function's own contract.
    parse_core(unsafe { Sse42::new_unchecked() }, buf, limits, fields)
}

/// AVX2 instantiation.
///
/// # Safety
/// The CPU must support AVX2 (`Isa::Avx2.is_available()`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn parse_avx2(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
    out: &mut Result<Parsed, ParseError>,
) {
    // SAFETY: this function's own contract (the CPU supports AVX2).
    let s = unsafe { Avx2::new_unchecked() };
    parse_fast_then(s, buf, limits, fields, out, |b, l, f| {
        // SAFETY: as above.
        unsafe { parse_avx2_general(b, l, f) }
    })
}

/// AVX2 instantiation of the general parser alone.
///
/// # Safety
/// As for [`parse_avx2`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
#[inline(never)]
pub(crate) unsafe fn parse_avx2_general(
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // SAFETY: this function's own contract.
    parse_core(unsafe { Avx2::new_unchecked() }, buf, limits, fields)
}
