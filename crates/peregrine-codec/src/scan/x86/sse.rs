//! The 16-byte path (SSSE3 `pshufb`, selected on CPUs with SSE4.2) and its CPU token.

use super::block::{misses16, tail_end};
use crate::scan::scalar::skip_scalar;
#[cfg(test)]
use crate::scan::Isa;
use crate::scan::{Class, Scan};
#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

/// 16-byte path: a value is proof that the CPU has SSSE3 and SSE4.2. Fast only inside
/// functions compiled with those features (`parse_sse42`), where the scans inline as vector
/// code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sse42 {
    _detected: (),
}

impl Sse42 {
    /// The token, if this CPU has SSSE3 and SSE4.2.
    #[cfg(test)]
    pub(crate) fn detect() -> Option<Self> {
        Isa::Sse42.is_available().then_some(Sse42 { _detected: () })
    }

    /// The token without a check.
    ///
    /// # Safety
    /// The CPU must support SSSE3 and SSE4.2 (`Isa::Sse42.is_available()`).
    #[inline(always)]
    pub(crate) const unsafe fn new_unchecked() -> Self {
        Sse42 { _detected: () }
    }
}

impl Scan for Sse42 {
    #[inline(always)]
    fn skip(self, buf: &[u8], start: usize, class: &Class) -> usize {
        // SAFETY: an `Sse42` value exists only on a CPU with SSSE3 and SSE4.2.
        unsafe { skip_sse(buf, start, class) }
    }
}

#[inline(always)]
unsafe fn skip_sse(buf: &[u8], mut i: usize, class: &Class) -> usize {
    // SAFETY: the caller guarantees SSSE3; every load below is checked against `len`.
    unsafe {
        let lo_t = _mm_loadu_si128(class.lo.as_ptr() as *const __m128i);
        let hi_t = _mm_loadu_si128(class.hi.as_ptr() as *const __m128i);
        let len = buf.len();
        while i + 16 <= len {
            // SAFETY: i + 16 <= len, so the 16-byte load is in bounds.
            let m = misses16(buf.as_ptr().add(i), lo_t, hi_t);
            if m != 0 {
                return i + m.trailing_zeros() as usize;
            }
            i += 16;
        }
        if i < len && len >= 16 {
            // The last bytes: one load that ends at `len` (overlapping bytes already scanned)
            // instead of a byte loop.
            // SAFETY: len >= 16, so `len - 16..len` is in bounds.
            let m = misses16(buf.as_ptr().add(len - 16), lo_t, hi_t);
            return tail_end::<16>(m, len, i);
        }
        skip_scalar(buf, i, class)
    }
}
