//! [`span`], which every part of the parser uses to record where a piece of the head is.

use crate::head::Span;

/// The [`Span`] of `start..end`.
#[inline(always)]
pub(crate) fn span(start: usize, end: usize) -> Span {
    Span {
        start: start as u32,
        len: (end - start) as u32,
    }
}
