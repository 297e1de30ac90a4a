//! What both vector paths share: the misses of a 16-byte block against a class's nibble tables,
//! and the stop inside a last, overlapping block (see the module above for why these are
//! `#[inline(always)]` without `#[target_feature]`).

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

/// Bitmask of the 16 bytes at `p` that are NOT in the class.
#[inline(always)]
pub(super) unsafe fn misses16(p: *const u8, lo_t: __m128i, hi_t: __m128i) -> u32 {
    // SAFETY: the caller guarantees SSSE3 and 16 readable bytes at `p`.
    unsafe {
        let m0f = _mm_set1_epi8(0x0F);
        let v = _mm_loadu_si128(p as *const __m128i);
        let lo = _mm_and_si128(v, m0f);
        let hi = _mm_and_si128(_mm_srli_epi16(v, 4), m0f);
        let hit = _mm_and_si128(_mm_shuffle_epi8(lo_t, lo), _mm_shuffle_epi8(hi_t, hi));
        _mm_movemask_epi8(_mm_cmpeq_epi8(hit, _mm_setzero_si128())) as u32
    }
}

/// `m`, the miss mask of the `W` bytes that end at `buf.len()` (loaded at `len - W`), seen
/// from `i` (with `len - W < i < len`): the index of the first miss at or after `i`, or `len`.
/// The bits below `i` belong to bytes already scanned and are shifted out; a sentinel bit
/// at `len` stands for "no miss".
#[inline(always)]
pub(super) fn tail_end<const W: usize>(m: u32, len: usize, i: usize) -> usize {
    let k = i - (len - W); // 1..W
    let m = (u64::from(m) >> k) | (1u64 << (W - k));
    i + m.trailing_zeros() as usize
}
