//! Parses one of the benchmark inputs N times with peregrine (a chosen path) or httparse. Meant
//! to run under `valgrind --tool=cachegrind`, which counts instructions without timing noise:
//! run with two values of N and divide the difference of the counts by the difference of N.
//!
//! `cargo run --release -p peregrine-codec --example parse_loop -- <impl> <input> <n>`
//! where impl is `best`, `scalar`, `sse42`, `avx2` or `httparse`, and input is `minimal`,
//! `browser` or `pipelined16` (counted as 16 requests per iteration).

use peregrine_codec::{
    parse_request_head, parse_request_head_with, FieldSpan, Isa, Limits, Parsed,
};
use std::hint::black_box;

#[path = "../benches/support/inputs.rs"]
mod inputs;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (imp, input, n) = match &args[..] {
        [_, imp, input, n] => (imp.as_str(), input.as_str(), n.parse::<usize>().expect("n")),
        _ => panic!(
            "usage: parse_loop <best|scalar|sse42|avx2|httparse> <minimal|browser|pipelined16> <n>"
        ),
    };
    let pipelined = inputs::MINIMAL.repeat(16);
    let buf: &[u8] = match input {
        "minimal" => inputs::MINIMAL,
        "browser" => inputs::BROWSER,
        "pipelined16" => &pipelined,
        other => panic!("unknown input {other}"),
    };
    let httparse = imp == "httparse";
    let isa = match imp {
        "best" => None,
        "scalar" => Some(Isa::Scalar),
        "sse42" => Some(Isa::Sse42),
        "avx2" => Some(Isa::Avx2),
        "httparse" => None,
        other => panic!("unknown impl {other}"),
    };
    let limits = Limits::default();
    let mut fields = [FieldSpan::default(); 100];
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = 0usize;
    for _ in 0..n {
        let mut rest = black_box(buf);
        while !rest.is_empty() {
            let len = if !httparse {
                let r = match isa {
                    Some(isa) => parse_request_head_with(isa, rest, &limits, &mut fields),
                    None => parse_request_head(rest, &limits, &mut fields),
                };
                match r {
                    Ok(Parsed::Complete(h)) => {
                        black_box(&h);
                        h.head_len
                    }
                    other => panic!("{other:?}"),
                }
            } else {
                {
                    let mut req = httparse::Request::new(&mut headers);
                    match req.parse(rest) {
                        Ok(httparse::Status::Complete(len)) => {
                            black_box(&req);
                            len
                        }
                        other => panic!("{other:?}"),
                    }
                }
            };
            rest = &rest[len..];
            parsed += 1;
        }
    }
    println!("{parsed}");
}
