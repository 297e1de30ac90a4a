//! Path normalisation, routing and parameter decoding: canonical and stable normal form, a refused path is 400, no spelling reaches /static/private/ content except through its protected route (first byte picks the encoded-slash policy).
//! The checks live in `peregrine::fuzzing::routing`, shared with `tests/fuzz_props.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine::fuzzing::routing(data));
