//! Query strings and form bodies through Request::query / Request::form (200 or 400, never a failure) and the urlencoded round trip.
//! The checks live in `peregrine::fuzzing::query_and_form`, shared with `tests/fuzz_props.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine::fuzzing::query_and_form(data));
