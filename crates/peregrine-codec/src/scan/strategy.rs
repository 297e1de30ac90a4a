//! The [`Scan`] trait every path implements, apart from the paths, which import it.

use super::class::{Class, TCHAR, VALUE};

/// A scanning strategy. The parser is generic over it so that each instantiation is compiled
/// (and inlined) with the target features of its path.
///
/// The methods take the strategy by value: a value of a vector strategy (`Sse42`, `Avx2`)
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
