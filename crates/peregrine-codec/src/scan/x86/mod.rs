//! The x86 vector paths ([`Sse42`], [`Avx2`]) and the helpers they share (`block`). A path's
//! value is a zero-sized proof that the CPU has its features.
//!
//! The helpers carry no `#[target_feature]` (which would forbid `#[inline(always)]`):
//! they are always inlined into `parse_sse42` / `parse_avx2`, which are compiled with the
//! features, so the intrinsics inline there as single instructions. Calling them anywhere
//! else would be unsound on CPUs without the features, hence `unsafe fn`.

mod avx2;
mod block;
mod sse;

pub(crate) use avx2::Avx2;
pub(crate) use sse::Sse42;
