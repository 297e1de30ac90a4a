//! Bounded property-test twins of the fuzz targets in `crates/peregrine/fuzz`: the
//! same checks (`peregrine::fuzzing`), run on generated inputs by `cargo test`, so that
//! `./scripts/test` catches regressions without nightly. Each property runs a fixed number of
//! cases (set below); the fuzz targets explore far more.

use peregrine::fuzzing;
use proptest::prelude::*;

/// Path-like targets: the pieces that matter to normalisation and routing.
fn target() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("/".to_owned()),
        Just("//".to_owned()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("static".to_owned()),
        Just("private".to_owned()),
        Just("users".to_owned()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("x.txt".to_owned()),
        Just("?q=1".to_owned()),
        Just("%".to_owned()),
        (0u8..=255).prop_map(|v| format!("%{v:02x}")),
        (0u8..=255).prop_map(|v| format!("%{v:02X}")),
        "[a-zA-Z0-9._~-]{1,3}",
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat().into_bytes())
}

/// A value made of a few structural characters and short words.
fn list_value(words: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::sample::select(words).prop_map(|w| w.to_owned()),
        1 => "[ ,;=q0-9.\"*/W-]{1,3}",
        1 => any::<u8>().prop_map(|b| (b as char).to_string()),
    ];
    proptest::collection::vec(piece, 0..10).prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn routing(policy in any::<u8>(), t in target()) {
        let mut data = vec![policy];
        data.extend_from_slice(&t);
        fuzzing::routing(&data);
    }

    #[test]
    fn routing_raw_bytes(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        fuzzing::routing(&data);
    }

    #[test]
    fn query_and_form(data in list_value(&["a", "b", "c", "d", "=", "&", "+", "%20", "%", "%zz", "%ff", "1", "true", "-1.5"])) {
        fuzzing::query_and_form(&data);
    }

    #[test]
    fn cookies(data in list_value(&["sid", "a", "=", "; ", ";", "\"", "x=1", "v", "\t", " "])) {
        fuzzing::cookies(&data);
    }

    #[test]
    fn negotiation(data in list_value(&["gzip", "br", "x-gzip", "identity", "*", ";q=", "0", "1", "0.5", "1.0", ", ", "Q", "deflate"])) {
        fuzzing::negotiation(&data);
    }
}

proptest! {
    // Each case is a few requests against a real file (blocking-pool hops): fewer cases.
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn conditionals(data in list_value(&[
        "\n", "*", "\"x\"", "W/", ", ", "bytes=", "0-", "-5", "10-20", "99-", "100-", ",", "5-1",
        "Sat, 01 Jan 2000 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "junk",
    ])) {
        fuzzing::conditionals(&data);
    }
}
