//! Byte-class scanning: "index of the first byte not in this class", with a scalar path, an SSE
//! path (SSSE3 `pshufb`, selected on CPUs with SSE4.2) and an AVX2 path.
//!
//! Every class is described twice: a 256-entry table for the scalar path, and a pair of 16-entry
//! nibble tables for the vector paths. A byte `b` is in the class iff
//! `LO[b & 0xF] & HI[b >> 4] != 0`, which is the classic shuffle-based classification used by
//! simdjson and friends. The nibble tables are derived from the scalar table at compile time, so
//! the paths cannot disagree about what a class contains (and a test checks all 256 bytes).

/// A set of bytes, usable by every scanning path.
#[derive(Debug)]
pub(crate) struct Class {
    table: [bool; 256],
    lo: [u8; 16],
    hi: [u8; 16],
    /// `lo` and `hi` twice each (one copy per 128-bit lane, as `vpshufb` looks up within each
    /// lane), aligned so that the AVX2 path can read them with one aligned load.
    lo2: Lanes,
    hi2: Lanes,
}

/// Two copies of a 16-byte nibble table, 32-byte aligned.
#[derive(Debug)]
#[repr(C, align(32))]
struct Lanes([u8; 32]);

const fn twice(t: [u8; 16]) -> Lanes {
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = t[i % 16];
        i += 1;
    }
    Lanes(out)
}

impl Class {
    /// Builds the nibble tables from a membership table. Panics (at compile time, since every
    /// class is a `const`) if the set needs more than 8 distinct rows, which none of ours does.
    const fn new(table: [bool; 256]) -> Class {
        let mut rows = [0u16; 16];
        let mut h = 0;
        while h < 16 {
            let mut l = 0;
            while l < 16 {
                if table[h * 16 + l] {
                    rows[h] |= 1 << l;
                }
                l += 1;
            }
            h += 1;
        }
        // Assign one bit per distinct non-empty row.
        let mut distinct = [0u16; 8];
        let mut n = 0;
        let mut hi = [0u8; 16];
        let mut h = 0;
        while h < 16 {
            if rows[h] != 0 {
                let mut k = 0;
                while k < n && distinct[k] != rows[h] {
                    k += 1;
                }
                if k == n {
                    assert!(n < 8, "byte class needs more than 8 distinct rows");
                    distinct[n] = rows[h];
                    n += 1;
                }
                hi[h] = 1 << k;
            }
            h += 1;
        }
        let mut lo = [0u8; 16];
        let mut l = 0;
        while l < 16 {
            let mut k = 0;
            while k < n {
                if distinct[k] & (1 << l) != 0 {
                    lo[l] |= 1 << k;
                }
                k += 1;
            }
            l += 1;
        }
        Class {
            table,
            lo,
            hi,
            lo2: twice(lo),
            hi2: twice(hi),
        }
    }

    /// Scalar membership test.
    #[inline(always)]
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.table[b as usize]
    }

    /// Membership computed the way the vector paths compute it (for the consistency test).
    #[cfg(test)]
    fn contains_nibble(&self, b: u8) -> bool {
        self.lo[(b & 0xF) as usize] & self.hi[(b >> 4) as usize] != 0
    }
}

use crate::grammar::{field_value_byte, reg_name, target_plain, tchar};

/// The membership table of one of the grammar's classes (`const fn` pointers cannot be called
/// in a constant, hence the index).
const fn table_of(kind: u8) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match kind {
            0 => tchar(b),
            1 => field_value_byte(b),
            2 => target_plain(b),
            _ => reg_name(b),
        };
        i += 1;
    }
    t
}

/// Method and field-name bytes.
pub(crate) static TCHAR: Class = Class::new(table_of(0));
/// Field-value bytes.
pub(crate) static VALUE: Class = Class::new(table_of(1));
/// Plain request-target bytes.
pub(crate) static TARGET: Class = Class::new(table_of(2));
/// Host (reg-name) bytes.
pub(crate) static HOST: Class = Class::new(table_of(3));

/// Which instruction set a scan (and a whole parse) uses.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Table lookups, one byte at a time. Always available.
    Scalar,
    /// 16 bytes at a time with SSSE3 `pshufb`; chosen on CPUs that report SSE4.2.
    Sse42,
    /// 32 bytes at a time with AVX2.
    Avx2,
}

impl Isa {
    /// Whether this CPU can run `self`.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Isa::Sse42 => {
                std::is_x86_feature_detected!("sse4.2") && std::is_x86_feature_detected!("ssse3")
            }
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Isa::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
            _ => false,
        }
    }

    /// Every path this CPU can run, slowest first.
    pub fn available() -> impl Iterator<Item = Isa> {
        [Isa::Scalar, Isa::Sse42, Isa::Avx2]
            .into_iter()
            .filter(|i| i.is_available())
    }

    /// The fastest path this CPU can run (detected once, then cached).
    #[inline]
    pub fn best() -> Isa {
        use std::sync::atomic::{AtomicU8, Ordering};
        static BEST: AtomicU8 = AtomicU8::new(u8::MAX);
        match BEST.load(Ordering::Relaxed) {
            0 => Isa::Scalar,
            1 => Isa::Sse42,
            2 => Isa::Avx2,
            _ => {
                let best = if Isa::Avx2.is_available() {
                    Isa::Avx2
                } else if Isa::Sse42.is_available() {
                    Isa::Sse42
                } else {
                    Isa::Scalar
                };
                BEST.store(best as u8, Ordering::Relaxed);
                best
            }
        }
    }
}

/// A scanning strategy. The parser is generic over it so that each instantiation is compiled
/// (and inlined) with the target features of its path.
///
/// The methods take the strategy by value: a value of a vector strategy ([`Sse42`], [`Avx2`])
/// is a zero-sized proof that the CPU has its features, obtainable only from runtime detection
/// (or from an `unsafe` promise), so calling a vector scan from safe code is always sound.
pub(crate) trait Scan: Copy {
    /// Index of the first byte of `buf[start..]` that is not in `class`, or `buf.len()`.
    fn skip(self, buf: &[u8], start: usize, class: &Class) -> usize;

    /// [`Scan::skip`] for a stop that is usually near: paths may look at one block first and
    /// only then run the general scan.
    #[inline(always)]
    fn skip_near(self, buf: &[u8], start: usize, class: &Class) -> usize {
        self.skip(buf, start, class)
    }

    /// Index of the first byte of `buf[start..end]` that is not in `class`, or `end`
    /// (`start <= end <= buf.len()`). Bytes of `buf` outside the range may be read (and their
    /// classes ignored), so that a short range costs one vector step.
    #[inline(always)]
    fn skip_range(self, buf: &[u8], start: usize, end: usize, class: &Class) -> usize {
        self.skip(&buf[..end], start, class)
    }

    /// For a field line starting at `pos`: the index of the first byte that is not `tchar` (the
    /// end of the name) and of the first byte that is not a field-value byte (where the value
    /// ends). Every `tchar`, `:` and OWS byte is a value byte, so the second is the end of the
    /// value whenever the name is followed by `:`. Paths may compute both from the same loads.
    #[inline(always)]
    fn field_line(self, buf: &[u8], pos: usize) -> (usize, usize) {
        let name_end = self.skip(buf, pos, &TCHAR);
        (name_end, self.skip(buf, name_end, &VALUE))
    }
}

/// The portable path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scalar;

impl Scan for Scalar {
    #[inline(always)]
    fn skip(self, buf: &[u8], start: usize, class: &Class) -> usize {
        skip_scalar(buf, start, class)
    }
}

#[inline(always)]
fn skip_scalar(buf: &[u8], i: usize, class: &Class) -> usize {
    let Some(rest) = buf.get(i..) else {
        return i;
    };
    // Four at a time keeps the loop-carried dependency short on long values; exact chunks
    // let the compiler drop every bounds check.
    let mut at = i;
    let mut chunks = rest.chunks_exact(4);
    for c in &mut chunks {
        if !class.contains(c[0]) {
            return at;
        }
        if !class.contains(c[1]) {
            return at + 1;
        }
        if !class.contains(c[2]) {
            return at + 2;
        }
        if !class.contains(c[3]) {
            return at + 3;
        }
        at += 4;
    }
    for &b in chunks.remainder() {
        if !class.contains(b) {
            return at;
        }
        at += 1;
    }
    at
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) use x86::{Avx2, Sse42};

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86 {
    #[cfg(test)]
    use super::Isa;
    use super::{skip_scalar, Class, Scan, TCHAR, VALUE};
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

    /// 32-byte path: a value is proof that the CPU has AVX2. Fast only inside functions
    /// compiled with `avx2` (`parse_avx2`).
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Avx2 {
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

    impl Scan for Sse42 {
        #[inline(always)]
        fn skip(self, buf: &[u8], start: usize, class: &Class) -> usize {
            // SAFETY: an `Sse42` value exists only on a CPU with SSSE3 and SSE4.2.
            unsafe { skip_sse(buf, start, class) }
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
            let hit =
                _mm256_and_si256(_mm256_shuffle_epi8(lo_t, lo), _mm256_shuffle_epi8(hi_t, hi));
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

    // The helpers below carry no `#[target_feature]` (which would forbid `#[inline(always)]`):
    // they are always inlined into `parse_sse42` / `parse_avx2`, which are compiled with the
    // features, so the intrinsics inline there as single instructions. Calling them anywhere
    // else would be unsound on CPUs without the features, hence `unsafe fn`.

    /// Bitmask of the 16 bytes at `p` that are NOT in the class.
    #[inline(always)]
    unsafe fn misses16(p: *const u8, lo_t: __m128i, hi_t: __m128i) -> u32 {
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
    fn tail_end<const W: usize>(m: u32, len: usize, i: usize) -> usize {
        let k = i - (len - W); // 1..W
        let m = (u64::from(m) >> k) | (1u64 << (W - k));
        i + m.trailing_zeros() as usize
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
            let hit =
                _mm256_and_si256(_mm256_shuffle_epi8(lo_t, lo), _mm256_shuffle_epi8(hi_t, hi));
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(hit, _mm256_setzero_si256())) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    fn sse() -> Sse42 {
        Sse42::detect().expect("only called for a path in Isa::available()")
    }

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    fn avx2() -> Avx2 {
        Avx2::detect().expect("only called for a path in Isa::available()")
    }

    #[test]
    fn nibble_tables_match_scalar_tables_for_all_bytes() {
        for class in [&TCHAR, &VALUE, &TARGET, &HOST] {
            for b in 0..=255u8 {
                assert_eq!(class.contains(b), class.contains_nibble(b), "byte {b:#04x}");
            }
        }
    }

    fn skip_with(isa: Isa, buf: &[u8], start: usize, class: &Class) -> usize {
        match isa {
            Isa::Scalar => Scalar.skip(buf, start, class),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Isa::Sse42 => sse().skip(buf, start, class),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Isa::Avx2 => avx2().skip(buf, start, class),
            #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
            _ => unreachable!(),
        }
    }

    #[test]
    fn field_line_gives_the_same_ends_on_every_path() {
        // Lines of every shape around the 32-byte block: name length, value length, terminator.
        for name_len in 0..40 {
            for value_len in 0..40 {
                for stop in [&b"\r\n"[..], b"\n", b"\0", b"", b"\x7f"] {
                    let mut line = vec![b'n'; name_len];
                    line.extend_from_slice(b": ");
                    line.extend(std::iter::repeat_n(b'v', value_len));
                    line.extend_from_slice(stop);
                    for pos in [0, 1] {
                        if pos > line.len() {
                            continue;
                        }
                        let want = Scalar.field_line(&line, pos);
                        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                        for isa in Isa::available() {
                            let got = match isa {
                                Isa::Scalar => Scalar.field_line(&line, pos),
                                Isa::Sse42 => sse().field_line(&line, pos),
                                Isa::Avx2 => avx2().field_line(&line, pos),
                            };
                            assert_eq!(got, want, "{isa:?} name {name_len} value {value_len}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn skip_range_stops_at_the_first_miss_or_the_end_on_every_path() {
        // Ranges of every length up to 40 at every start of buffers of 0 to 72 bytes, with a
        // stop byte inside, at, or beyond the range end (beyond must not count).
        for len in 0..72usize {
            for start in 0..=len {
                for end in (start..=len).filter(|e| e - start <= 40) {
                    for stop_at in [
                        start,
                        (start + end) / 2,
                        end,
                        end + 1,
                        len.saturating_sub(1),
                    ] {
                        let mut buf = vec![b'a'; len];
                        if stop_at < len {
                            buf[stop_at] = b':';
                        }
                        let want = (start..end).find(|&i| buf[i] == b':').unwrap_or(end);
                        for isa in Isa::available() {
                            let got = match isa {
                                Isa::Scalar => Scalar.skip_range(&buf, start, end, &HOST),
                                #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                                Isa::Sse42 => sse().skip_range(&buf, start, end, &HOST),
                                #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                                Isa::Avx2 => avx2().skip_range(&buf, start, end, &HOST),
                                #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
                                _ => unreachable!(),
                            };
                            assert_eq!(
                                got, want,
                                "{isa:?} len {len} {start}..{end} stop {stop_at}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_finds_the_same_stop_byte_at_every_position() {
        // A stop byte at every offset of buffers of every length up to 80, for every byte value:
        // covers the 32-, 16- and scalar-tail parts of every path.
        for class in [&TCHAR, &VALUE, &TARGET, &HOST] {
            let fill = (0..=255u8).find(|&b| class.contains(b)).unwrap();
            for len in 0..80usize {
                for stop_at in 0..=len {
                    for stop in [0u8, b' ', b'\r', b'\n', b':', b'%', 0x7F, 0x80, 0xFF, b'"'] {
                        let mut buf = vec![fill; len];
                        if stop_at < len {
                            buf[stop_at] = stop;
                        }
                        // Starts that put the end-aligned tail load at every overlap.
                        for start in [0, 1, 3, 15, 17, 31, 33, 47, 50, 63, 79] {
                            if start > len {
                                continue;
                            }
                            // The definition, one byte at a time.
                            let want = (start..len)
                                .find(|&i| !class.contains(buf[i]))
                                .unwrap_or(len);
                            for isa in Isa::available() {
                                assert_eq!(skip_with(isa, &buf, start, class), want, "{isa:?}");
                                let near = match isa {
                                    Isa::Scalar => Scalar.skip_near(&buf, start, class),
                                    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                                    Isa::Sse42 => sse().skip_near(&buf, start, class),
                                    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
                                    Isa::Avx2 => avx2().skip_near(&buf, start, class),
                                    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
                                    _ => unreachable!(),
                                };
                                assert_eq!(near, want, "{isa:?} skip_near");
                            }
                        }
                    }
                }
            }
        }
    }
}
