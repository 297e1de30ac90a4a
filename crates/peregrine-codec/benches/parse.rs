//! Request-head parsing: peregrine-codec (best path, and each path forced) against httparse, on a
//! minimal request, a typical browser request (13 header fields) and a batch of 16 pipelined
//! minimal requests. Criterion reports time per request (throughput in elements = requests).
//!
//! `cargo bench -p peregrine-codec --bench parse`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use peregrine_codec::{
    parse_request_head, parse_request_head_with, FieldSpan, Isa, Limits, ParseError, Parsed,
};

const MINIMAL: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\n\r\n";

const BROWSER: &[u8] = b"GET /wp-content/uploads/2010/03/hello-kitty-darth-vader-pink.jpg?size=large&v=3 HTTP/1.1\r\n\
Host: www.kittyhell.com\r\n\
Connection: keep-alive\r\n\
sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n\
sec-ch-ua-mobile: ?0\r\n\
sec-ch-ua-platform: \"macOS\"\r\n\
Upgrade-Insecure-Requests: 1\r\n\
User-Agent: Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8\r\n\
Sec-Fetch-Site: none\r\n\
Sec-Fetch-Mode: navigate\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Accept-Language: ja,en-US;q=0.9,en;q=0.8\r\n\
Cookie: wp_ozh_wsa_visits=2; wp_ozh_wsa_visit_lasttime=1715000000; __utma=111111111.2222222222.3333333333.4444444444.5555555555.6; __utmz=111111111.2222222222.1.1.utmccn=(referral)|utmcsr=reader.livedoor.com|utmcct=/reader/|utmcmd=referral\r\n\
\r\n";

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
            Ok(Parsed::Complete(h)) => {
                black_box(&h);
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
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(rest) {
            Ok(httparse::Status::Complete(len)) => {
                black_box(&req);
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
    let inputs: [(&str, &[u8], u64); 3] = [
        ("minimal", MINIMAL, 1),
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
