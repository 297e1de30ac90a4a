//! The portable path: one table lookup per byte.

use super::{Class, Scan};

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
pub(super) fn skip_scalar(buf: &[u8], i: usize, class: &Class) -> usize {
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
