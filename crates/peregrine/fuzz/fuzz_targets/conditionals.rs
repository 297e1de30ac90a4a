//! Conditional headers and Range against a real file through ServeDir: 200/206/304/412/416 only, 206 bodies are exactly the ranges named.
//! The checks live in `peregrine::fuzzing::conditionals`, shared with `tests/fuzz_props.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine::fuzzing::conditionals(data));
