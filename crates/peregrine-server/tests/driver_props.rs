//! The connection driver fed by arbitrary split reads: random pipelined batches of
//! requests (no body, Content-Length, chunked with extensions and trailers; bodies read, echoed
//! or left for the engine to drain) are cut at random points and sent piece by piece over a
//! real socket. Every request must get exactly its own response, in order, whatever the cuts:
//! this covers body reads that straddle reads, pipelining, the drain of unread bodies and the
//! re-parse shortcut (a head is re-parsed only when a line end arrives). Bounded: a few dozen
//! cases of at most a few kilobytes.
//!
//! The fuzz target `crates/peregrine-server/fuzz/fuzz_targets/driver.rs` feeds the same driver
//! arbitrary bytes with arbitrary cuts (nightly, `cargo fuzz`).

mod common;
use common::*;
use proptest::prelude::*;
use std::io::Write;
use std::net::Shutdown;
use std::time::Duration;

/// One request of a batch, and what its response must be.
#[derive(Debug, Clone)]
struct Req {
    bytes: Vec<u8>,
    expect_body: Vec<u8>,
}

fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..2000)
}

/// Chunked encoding of `body` cut into chunks at `cuts`, some with extensions, with or
/// without a trailer.
fn chunked(body: &[u8], cuts: &[usize], ext: bool, trailer: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.push(0);
    points.push(body.len());
    points.sort_unstable();
    points.dedup();
    for w in points.windows(2) {
        let piece = &body[w[0]..w[1]];
        if piece.is_empty() {
            continue;
        }
        out.extend_from_slice(format!("{:x}", piece.len()).as_bytes());
        if ext {
            out.extend_from_slice(b";name=\"v a\"");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    if trailer {
        out.extend_from_slice(b"X-Sum: 1\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `POST path` with `body`, framed by Content-Length (`by_length`) or chunked at `cuts` (with
/// chunk extensions and trailers as asked).
fn post(
    path: &str,
    body: &[u8],
    by_length: bool,
    cuts: &[usize],
    ext: bool,
    trailer: bool,
) -> Vec<u8> {
    let mut bytes = format!("POST {path} HTTP/1.1\r\nHost: t\r\n").into_bytes();
    if by_length {
        bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        bytes.extend_from_slice(body);
    } else {
        bytes.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        bytes.extend(chunked(body, cuts, ext, trailer));
    }
    bytes
}

fn request() -> impl Strategy<Value = Req> {
    (
        0..5u8,
        body_bytes(),
        prop::collection::vec(any::<usize>(), 0..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(kind, body, cuts, ext, trailer)| match kind {
            0 => Req {
                bytes: get("/plaintext"),
                expect_body: b"Hello, World!".to_vec(),
            },
            // Echoed: Content-Length or chunked.
            1 | 2 => Req {
                bytes: post("/echo", &body, kind == 1, &cuts, ext, trailer),
                expect_body: body,
            },
            // Not read by the handler: the engine drains it.
            _ => Req {
                bytes: post("/ignore", &body, kind == 3, &cuts, ext, trailer),
                expect_body: b"ignored".to_vec(),
            },
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_split_of_a_pipelined_batch_gets_every_response_in_order(
        reqs in prop::collection::vec(request(), 1..6),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (h, _) = start(config());
        let mut c = Client::new(h.local_addr());
        let wire: Vec<u8> = reqs.iter().flat_map(|r| r.bytes.iter().copied()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|p| p % (wire.len() + 1)).collect();
        points.push(0);
        points.push(wire.len());
        points.sort_unstable();
        points.dedup();
        for w in points.windows(2) {
            c.stream.write_all(&wire[w[0]..w[1]]).unwrap();
            // Give the server time to read this piece on its own.
            std::thread::sleep(Duration::from_micros(300));
        }
        c.stream.shutdown(Shutdown::Write).unwrap();
        for (i, r) in reqs.iter().enumerate() {
            let method = if r.bytes.starts_with(b"GET") { "GET" } else { "POST" };
            let resp = c.read_response_for(method);
            let resp = resp.unwrap_or_else(|| panic!("no response to request {i} of {}", reqs.len()));
            prop_assert_eq!(resp.status, 200, "request {}: {:?}", i, resp.body_str());
            prop_assert_eq!(&resp.body, &r.expect_body, "request {}", i);
        }
        prop_assert!(c.at_eof(), "a response more than requests");
        h.shutdown();
    }
}
