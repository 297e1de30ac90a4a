//! Cookie parsing through Request::cookie, and SetCookie values read back unchanged.
//! The checks live in `peregrine::fuzzing::cookies`, shared with `tests/fuzz_props.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine::fuzzing::cookies(data));
