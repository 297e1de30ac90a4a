//! Accept-Encoding negotiation, directly and through the Compression layer (the coding sent is the one negotiated and decodes to the original).
//! The checks live in `peregrine::fuzzing::negotiation`, shared with `tests/fuzz_props.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine::fuzzing::negotiation(data));
