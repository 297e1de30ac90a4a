//! Request-head parsing: peregrine-codec (best path, and each path forced) against httparse, on a
//! minimal request, wrk's request, a typical browser request (13 header fields) and a batch of 16 pipelined
//! minimal requests. Criterion reports time per request (throughput in elements = requests).
//!
//! `cargo bench -p peregrine-codec --bench parse`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use peregrine_codec::{
    parse_request_head, parse_request_head_with, FieldSpan, Isa, Limits, ParseError, Parsed,
};

#[path = "support/inputs.rs"]
mod inputs;
use inputs::{BROWSER, MINIMAL, WRK};

/// Parses every request in `buf` with peregrine on `isa` (or the best path); returns the count.
#[inline(always)]
fn peregrine_all(isa: Option<Isa>, buf: &[u8], fields: &mut [FieldSpan]) -> usize {
    let limits = Limits::default();
    let mut rest = buf;
    let mut n = 0;
    while !rest.is_empty() {
        let r: Result<Parsed, ParseError> = match isa {
            None => parse_request_head(rest, &limits, fields),
            Some(isa) => parse_request_head_with(isa, rest, &limits, fields),
        };
        match r {
            // Only `head_len` is read (the next request starts there): `black_box(&h)` would
            // copy the whole head through memory and measure a store-forwarding stall instead
            // of the parser. The parse itself cannot be elided: it is an out-of-line call that
            // writes the caller's field table.
            Ok(Parsed::Complete(h)) => {
                rest = &rest[h.head_len..];
                n += 1;
            }
            other => panic!("bench input did not parse: {other:?}"),
        }
    }
    n
}

/// Same with httparse (which validates tokens and line endings, but not the rules of
/// http1-rules.md sections C–E).
#[inline(always)]
fn httparse_all(buf: &[u8]) -> usize {
    let mut rest = buf;
    let mut n = 0;
    // One header array for the whole batch, as peregrine reuses its field table: neither side
    // pays for initialising a table per request.
    let mut headers = [httparse::EMPTY_HEADER; 32];
    while !rest.is_empty() {
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(rest) {
            Ok(httparse::Status::Complete(len)) => {
                rest = &rest[len..];
                n += 1;
            }
            other => panic!("bench input did not parse with httparse: {other:?}"),
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let pipelined = MINIMAL.repeat(16);
    let inputs: [(&str, &[u8], u64); 4] = [
        ("minimal", MINIMAL, 1),
        ("wrk", WRK, 1),
        ("browser", BROWSER, 1),
        ("pipelined16", &pipelined, 16),
    ];
    for (name, input, requests) in inputs {
        let mut group = c.benchmark_group(format!("parse/{name}"));
        group.throughput(Throughput::Elements(requests));
        let mut fields = [FieldSpan::default(); 100];
        assert_eq!(peregrine_all(None, input, &mut fields) as u64, requests);
        assert_eq!(httparse_all(input) as u64, requests);
        group.bench_function("peregrine", |b| {
            b.iter(|| peregrine_all(None, black_box(input), &mut fields))
        });
        for isa in Isa::available() {
            group.bench_function(format!("peregrine-{isa:?}").to_lowercase(), |b| {
                b.iter(|| peregrine_all(Some(isa), black_box(input), &mut fields))
            });
        }
        group.bench_function("httparse", |b| b.iter(|| httparse_all(black_box(input))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
