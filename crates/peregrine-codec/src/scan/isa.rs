//! Which instruction set a parse uses: what this CPU can run, detected once.

use std::sync::atomic::{AtomicU8, Ordering};

/// [`Isa::best`] as its discriminant, `u8::MAX` until detected.
static BEST: AtomicU8 = AtomicU8::new(u8::MAX);

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

    /// Whether [`Isa::best`] is [`Isa::Avx2`] (once detected): one load and one compare, for
    /// the per-request dispatch of the parse, before the general `match` on [`Isa::best`].
    #[inline(always)]
    pub fn best_is_avx2() -> bool {
        BEST.load(Ordering::Relaxed) == Isa::Avx2 as u8
    }

    /// The fastest path this CPU can run (detected once, then cached).
    #[inline]
    pub fn best() -> Isa {
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
