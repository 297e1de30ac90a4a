//! The 32-byte path (AVX2 `vpshufb`) and its CPU token.

use super::block::{misses16, tail_end};
use crate::scan::scalar::skip_scalar;
#[cfg(test)]
use crate::scan::Isa;
use crate::scan::{Class, Scan, TCHAR, VALUE};
#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

/// 32-byte path: a value is proof that the CPU has AVX2. Fast only inside functions
/// compiled with `avx2` (`parse_avx2`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2 {
    _detected: (),
}

impl Avx2 {
    /// The token, if this CPU has AVX2.
    #[cfg(test)]
    pub(crate) fn detect() -> Option<Self> {
        Isa::Avx2.is_available().then_some(Avx2 { _detected: () })
    }

    /// The token without a check.
    ///
    /// # Safety
    /// The CPU must support AVX2 (`Isa::Avx2.is_available()`).
    #[inline(always)]
    pub(crate) const unsafe fn new_unchecked() -> Self {
        Avx2 { _detected: () }
    }
}

impl Scan for Avx2 {
    #[inline(always)]
    fn skip(self, buf: &[u8], start: usize, class: &Class) -> usize {
        // SAFETY: an `Avx2` value exists only on a CPU with AVX2.
        unsafe { skip_avx2(buf, start, class) }
    }

    #[inline(always)]
    fn skip_near(self, buf: &[u8], start: usize, class: &Class) -> usize {
        if start + 32 <= buf.len() {
            // SAFETY: as for `skip`; and start + 32 <= len.
            let m = unsafe {
                let (lo_t, hi_t) = tables32(class);
                misses32(buf.as_ptr().add(start), lo_t, hi_t)
            };
            if m != 0 {
                return start + m.trailing_zeros() as usize;
            }
        }
        self.skip(buf, start, class)
    }

    #[inline(always)]
    fn skip_range(self, buf: &[u8], start: usize, end: usize, class: &Class) -> usize {
        let len = buf.len();
        debug_assert!(start <= end && end <= len);
        if end - start <= 32 && len >= 32 {
            // One load of the 32 bytes at `start`, or of the last 32 of `buf` when fewer
            // remain: either way they cover the whole range.
            let base = start.min(len - 32);
            // SAFETY: as for `skip`; and base + 32 <= len.
            let m = unsafe {
                let (lo_t, hi_t) = tables32(class);
                misses32(buf.as_ptr().add(base), lo_t, hi_t)
            };
            // Bit j is now byte start + j (start - base <= 32); a sentinel bit at `end`.
            let m = (u64::from(m) >> (start - base)) | (1u64 << (end - start));
            return start + m.trailing_zeros() as usize;
        }
        self.skip(&buf[..end], start, class)
    }

    #[inline(always)]
    fn field_line(self, buf: &[u8], pos: usize) -> (usize, usize) {
        // Most field lines fit in 32 bytes: one load classified twice gives both ends.
        let len = buf.len();
        if pos + 32 > len && len >= 32 && pos < len {
            // The line runs to the end of what has been read (the last field of a lone
            // request): one load that ends at `len`, classified twice.
            // SAFETY: as for `skip`; and len >= 32, so `len - 32..len` is in bounds.
            let (not_tchar, not_value) = unsafe { misses32_two(buf.as_ptr().add(len - 32)) };
            return (
                tail_end::<32>(not_tchar, len, pos),
                tail_end::<32>(not_value, len, pos),
            );
        }
        if pos + 32 <= len {
            // SAFETY: as for `skip`; and pos + 32 <= len, so the load is in bounds.
            let (not_tchar, not_value) = unsafe { misses32_two(buf.as_ptr().add(pos)) };
            if not_tchar != 0 {
                let name_end = pos + not_tchar.trailing_zeros() as usize;
                let value_end = if not_value != 0 {
                    pos + not_value.trailing_zeros() as usize
                } else {
                    self.skip(buf, pos + 32, &VALUE)
                };
                return (name_end, value_end);
            }
        }
        let name_end = self.skip(buf, pos, &TCHAR);
        (name_end, self.skip(buf, name_end, &VALUE))
    }
}

/// Bitmasks of the 32 bytes at `p` that are not `tchar` and not field-value bytes.
#[inline(always)]
unsafe fn misses32_two(p: *const u8) -> (u32, u32) {
    // SAFETY: the caller guarantees AVX2 and 32 readable bytes at `p`.
    unsafe {
        let m0f = _mm256_set1_epi8(0x0F);
        let v = _mm256_loadu_si256(p as *const __m256i);
        let lo = _mm256_and_si256(v, m0f);
        let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
        (miss32(lo, hi, &TCHAR), miss32(lo, hi, &VALUE))
    }
}

/// Bitmask of the bytes (given as nibble vectors) that are not in `class`.
#[inline(always)]
unsafe fn miss32(lo: __m256i, hi: __m256i, class: &Class) -> u32 {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let (lo_t, hi_t) = tables32(class);
        let hit = _mm256_and_si256(_mm256_shuffle_epi8(lo_t, lo), _mm256_shuffle_epi8(hi_t, hi));
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(hit, _mm256_setzero_si256())) as u32
    }
}

/// The class's two nibble tables for 16-byte vectors, read like [`tables32`].
#[inline(always)]
unsafe fn tables16(class: &Class) -> (__m128i, __m128i) {
    // SAFETY: the first 16 bytes of a 32-byte aligned `Lanes` are 16-byte aligned.
    unsafe {
        (
            core::ptr::read_volatile(class.lo2.0.as_ptr() as *const __m128i),
            core::ptr::read_volatile(class.hi2.0.as_ptr() as *const __m128i),
        )
    }
}

/// The class's two nibble tables for 32-byte vectors, read from memory at each use.
///
/// The reads are volatile so that the compiler does not hoist them: hoisted, the tables
/// of the four classes the fast path uses stay live in eight of the sixteen vector
/// registers across the whole parse, and get copied between registers at every join of
/// its control flow, which measured as more instructions than one load per table per scan.
#[inline(always)]
unsafe fn tables32(class: &Class) -> (__m256i, __m256i) {
    // SAFETY: `Lanes` is 32 bytes, 32-byte aligned, and lives in a `static` `Class`.
    unsafe {
        (
            core::ptr::read_volatile(class.lo2.0.as_ptr() as *const __m256i),
            core::ptr::read_volatile(class.hi2.0.as_ptr() as *const __m256i),
        )
    }
}

#[inline(always)]
unsafe fn skip_avx2(buf: &[u8], mut i: usize, class: &Class) -> usize {
    // SAFETY: the caller guarantees AVX2; every load below is checked against `len`.
    unsafe {
        let len = buf.len();
        if len >= 32 {
            if i >= len {
                return i;
            }
            // vpshufb shuffles within each 128-bit lane, so both lanes get the same table.
            let (lo_t, hi_t) = tables32(class);
            while i + 32 <= len {
                // SAFETY: i + 32 <= len, so the 32-byte load is in bounds.
                let m = misses32(buf.as_ptr().add(i), lo_t, hi_t);
                if m != 0 {
                    return i + m.trailing_zeros() as usize;
                }
                i += 32;
            }
            if i == len {
                return i;
            }
            // The last bytes: one load that ends at `len` (overlapping bytes already scanned,
            // or before `start`) instead of a 16-byte step and a byte loop.
            // SAFETY: len >= 32, so `len - 32..len` is in bounds.
            let m = misses32(buf.as_ptr().add(len - 32), lo_t, hi_t);
            return tail_end::<32>(m, len, i);
        }
        // SAFETY: this function is only reached with AVX2 available (see above).
        skip_avx2_short(buf, i, class)
    }
}

/// [`skip_avx2`] for buffers shorter than 32 bytes: rare (a request is rarely that short),
/// so out of line, where its code does not take registers from the hot paths.
///
/// # Safety
/// The CPU must support AVX2 (as for every AVX2 helper here).
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
unsafe fn skip_avx2_short(buf: &[u8], mut i: usize, class: &Class) -> usize {
    // SAFETY: this function's contract (AVX2); every load below is checked against `len`.
    unsafe {
        let len = buf.len();
        let (lo_128, hi_128) = tables16(class);
        if i + 16 <= len {
            // SAFETY: i + 16 <= len.
            let m = misses16(buf.as_ptr().add(i), lo_128, hi_128);
            if m != 0 {
                return i + m.trailing_zeros() as usize;
            }
            i += 16;
        }
        if i < len && len >= 16 {
            // SAFETY: len >= 16, so `len - 16..len` is in bounds.
            let m = misses16(buf.as_ptr().add(len - 16), lo_128, hi_128);
            return tail_end::<16>(m, len, i);
        }
        skip_scalar(buf, i, class)
    }
}

/// Bitmask of the 32 bytes at `p` that are NOT in the class (tables broadcast to both lanes).
#[inline(always)]
unsafe fn misses32(p: *const u8, lo_t: __m256i, hi_t: __m256i) -> u32 {
    // SAFETY: the caller guarantees AVX2 and 32 readable bytes at `p`.
    unsafe {
        let m0f = _mm256_set1_epi8(0x0F);
        let v = _mm256_loadu_si256(p as *const __m256i);
        let lo = _mm256_and_si256(v, m0f);
        let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
        let hit = _mm256_and_si256(_mm256_shuffle_epi8(lo_t, lo), _mm256_shuffle_epi8(hi_t, hi));
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(hit, _mm256_setzero_si256())) as u32
    }
}
