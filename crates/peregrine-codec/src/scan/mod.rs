//! Byte-class scanning: "index of the first byte not in this class", with a scalar path, an SSE
//! path (SSSE3 `pshufb`, selected on CPUs with SSE4.2) and an AVX2 path.
//!
//! Every class is described twice: a 256-entry table for the scalar path, and a pair of 16-entry
//! nibble tables for the vector paths. A byte `b` is in the class iff
//! `LO[b & 0xF] & HI[b >> 4] != 0`, which is the classic shuffle-based classification used by
//! simdjson and friends. The nibble tables are derived from the scalar table at compile time, so
//!
//! One job per module: `class` (the byte classes and their tables), `isa` (which path this CPU
//! runs), `scalar`, `x86` (the SSE and AVX2 paths), `strategy` (the [`Scan`] trait they
//! implement); below, the tests that run every input through every path and compare.

mod class;
mod isa;
mod scalar;
mod strategy;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86;

pub(crate) use class::{Class, HOST, TARGET, TCHAR, VALUE};
pub use isa::Isa;
pub(crate) use scalar::Scalar;
pub(crate) use strategy::Scan;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) use x86::{Avx2, Sse42};

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
