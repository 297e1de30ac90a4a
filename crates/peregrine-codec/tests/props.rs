//! Property tests: no input panics; every scanning path gives the same result; a prefix of an
//! input never succeeds where the whole fails; an accepted head's method and target are ASCII;
//! generated valid requests parse as generated (and as httparse reads them); chunked bodies
//! decode the same however they are split.

mod common;
use common::*;
use peregrine_codec::{Limits, Parsed};
use proptest::prelude::*;

/// Valid requests that mutations start from.
const CORPUS: &[&[u8]] = &[
    b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"POST /a/b?c=d%20e HTTP/1.1\r\nHost: x:80\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
    b"PUT http://h/p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
    b"\r\nOPTIONS * HTTP/1.0\r\nX:  v \r\nY:\r\n\r\n",
    b"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\nA: \xe9\r\n\r\n",
];

/// Bytes that matter to the grammar, to make random inputs reach deep states.
const INTERESTING: &[u8] = b"GET /HTP1.0\r\n:;, %aZ\t\x00\x7f\x80\xff?#[]@\"=-_chunkedCL0123456789";

fn interesting_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![3 => prop::sample::select(INTERESTING), 1 => any::<u8>()],
        0..max,
    )
}

/// Checks path agreement and prefix consistency for `buf`.
fn check_consistency(buf: &[u8], limits: &Limits) {
    let (whole, _) = parse_all(buf, limits);
    if let Err(e) = whole {
        assert!(
            matches!(e.status, 400 | 414 | 431 | 501 | 505),
            "unexpected status {e}"
        );
        assert!(!e.reason.is_empty());
    }
    let end = match whole {
        Ok(Parsed::Complete(h)) => {
            // The engine relies on this to hand these out as `&str` without a check.
            for span in [Some(h.method), Some(h.target), Some(h.path), h.query] {
                let text = span.map_or(&b""[..], |s| s.slice(buf));
                assert!(
                    text.is_ascii(),
                    "non-ASCII request line part in {:?}",
                    show(buf)
                );
            }
            h.head_len
        }
        _ => buf.len(),
    };
    for k in 0..end {
        match (parse_all(&buf[..k], limits).0, &whole) {
            (Ok(Parsed::Incomplete), _) => {}
            (Err(_), Err(_)) => {}
            (p, w) => panic!(
                "prefix {k} gave {p:?} but the whole gave {w:?} for {:?}",
                show(buf)
            ),
        }
    }
}

fn mutate(base: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut v = base.to_vec();
    for &(at, byte, op) in edits {
        let at = if v.is_empty() { 0 } else { at % (v.len() + 1) };
        match op % 3 {
            0 if at < v.len() => v[at] = byte,
            1 => v.insert(at, byte),
            _ if at < v.len() => {
                v.remove(at);
            }
            _ => {}
        }
    }
    v
}

fn small_limits() -> Limits {
    Limits {
        max_target_len: 24,
        max_field_line: 24,
        max_header_bytes: 64,
        max_fields: 3,
        max_leading_empty_lines: 1,
        ..Limits::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_and_all_paths_agree(buf in interesting_bytes(200)) {
        check_consistency(&buf, &Limits::default());
        check_consistency(&buf, &small_limits());
    }

    #[test]
    fn mutated_requests_never_panic_and_all_paths_agree(
        which in 0..CORPUS.len(),
        edits in prop::collection::vec((any::<usize>(), prop::sample::select(INTERESTING), any::<u8>()), 1..4),
    ) {
        let buf = mutate(CORPUS[which], &edits);
        check_consistency(&buf, &Limits::default());
        check_consistency(&buf, &small_limits());
    }

    #[test]
    fn long_inputs_agree_across_paths(
        prefix in 0..CORPUS.len(),
        fill in prop::sample::select(INTERESTING),
        n in 0usize..200,
        at in any::<usize>(),
    ) {
        // Long runs exercise the 32- and 16-byte loops of the vector paths.
        let base = CORPUS[prefix];
        let at = at % base.len();
        let mut buf = base[..at].to_vec();
        buf.extend(std::iter::repeat_n(b'a', n));
        buf.push(fill);
        buf.extend_from_slice(&base[at..]);
        check_consistency(&buf, &Limits::default());
        check_consistency(&buf, &small_limits());
    }

    #[test]
    fn generated_valid_requests_parse_as_generated(
        method in prop_oneof![
            Just("GET".to_string()), Just("POST".to_string()), Just("DELETE".to_string()),
            "[A-Z!#$%&'*+.^_`|~-]{1,12}",
        ],
        path in "(/[a-zA-Z0-9._~!$&'()*+,;=:@-]{0,12}(%[0-9a-fA-F]{2})?){1,5}",
        query in proptest::option::of("[a-zA-Z0-9._~!$&'()*+,;=:@/?-]{0,20}"),
        http10 in any::<bool>(),
        headers in prop::collection::vec(
            ("X-[a-zA-Z0-9!#$%&'*+.^_`|~-]{0,15}",
             prop::collection::vec(prop_oneof![0x21u8..0x7f, 0x80u8..=0xff, Just(b' '), Just(b'\t')], 0..40)),
            0..20),
    ) {
        let mut buf = format!("{method} {path}").into_bytes();
        if let Some(q) = &query {
            buf.push(b'?');
            buf.extend_from_slice(q.as_bytes());
        }
        buf.extend_from_slice(if http10 { b" HTTP/1.0\r\n" } else { b" HTTP/1.1\r\nHost: example.com\r\n" });
        let mut expected = Vec::new();
        for (name, value) in &headers {
            // Values are stored without surrounding whitespace.
            let v: Vec<u8> = peregrine_trim(value).to_vec();
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b": ");
            buf.extend_from_slice(value);
            buf.extend_from_slice(b"\r\n");
            expected.push((name.as_bytes().to_vec(), v));
        }
        buf.extend_from_slice(b"\r\n");

        let (r, fields) = parse_all(&buf, &Limits::default());
        let h = match r { Ok(Parsed::Complete(h)) => h, other => panic!("{other:?} for {:?}", show(&buf)) };
        // Fed one byte at a time (every prefix), it is incomplete until the last byte.
        check_consistency(&buf, &Limits::default());
        prop_assert_eq!(h.head_len, buf.len());
        prop_assert_eq!(h.method.slice(&buf), method.as_bytes());
        prop_assert_eq!(h.path.slice(&buf), path.as_bytes());
        prop_assert_eq!(h.query.map(|q| q.slice(&buf).to_vec()), query.map(String::into_bytes));
        let skip = usize::from(!http10); // the Host line
        let got: Vec<(Vec<u8>, Vec<u8>)> = fields[skip..]
            .iter()
            .map(|f| (f.name.slice(&buf).to_vec(), f.value.slice(&buf).to_vec()))
            .collect();
        prop_assert_eq!(&got, &expected);

        // httparse agrees on what it reads.
        let mut hh = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut hh);
        if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
            prop_assert_eq!(n, h.head_len);
            prop_assert_eq!(req.method.unwrap().as_bytes(), method.as_bytes());
            prop_assert_eq!(req.headers.len(), h.field_count);
        }
    }

    #[test]
    fn chunked_random_bytes_never_panic_and_splits_agree(buf in interesting_bytes(120), piece in 1usize..8) {
        let limits = Limits { max_chunk_ext_len: 16, max_trailer_bytes: 40, max_field_line: 20, ..Limits::default() };
        // Whether it fails, and what it decodes, cannot depend on the split. (Which limit or rule
        // is reported first may: a partial line can already be too long before its bare CR.)
        let whole = common::feed_chunked(&buf, buf.len(), &limits);
        let split = common::feed_chunked(&buf, piece, &limits);
        match (&whole, &split) {
            (Err(_), Err(_)) => {}
            _ => prop_assert_eq!(whole, split),
        }
    }

    #[test]
    fn chunked_generated_bodies_roundtrip(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 0..8),
        ext in prop::sample::select(&["", ";a", ";a=b", ";a=\"x y\"", " ;k=v;z"][..]),
        upper in any::<bool>(),
        trailers in prop::sample::select(&["", "X: 1\r\n", "A: b\r\nC:\t d \r\n"][..]),
        piece in 1usize..16,
    ) {
        let mut wire = Vec::new();
        let mut body = Vec::new();
        for c in &chunks {
            let size = if upper { format!("{:X}", c.len()) } else { format!("{:x}", c.len()) };
            wire.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
            wire.extend_from_slice(c);
            wire.extend_from_slice(b"\r\n");
            body.extend_from_slice(c);
        }
        wire.extend_from_slice(format!("0{ext}\r\n{trailers}\r\nNEXT").as_bytes());
        let r = common::feed_chunked(&wire, piece, &Limits::default());
        prop_assert_eq!(r, Ok(Some((body, b"NEXT".to_vec()))));
    }
}

fn peregrine_trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}
