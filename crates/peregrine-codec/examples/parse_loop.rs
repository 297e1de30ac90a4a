//! Parses one of the benchmark inputs N times with peregrine (a chosen path) or httparse. Meant
//! to run under `valgrind --tool=cachegrind`, which counts instructions without timing noise:
//! run with two values of N and divide the difference of the counts by the difference of N.
//!
//! `cargo run --release -p peregrine-codec --example parse_loop -- <impl> <input> <n>`
//! where impl is `best`, `scalar`, `sse42`, `avx2`, `httparse`, or `general-scalar` /
//! `general-avx2` (the general parser alone, without the fast path), and input is `minimal`,
//! `wrk` (the request wrk sends in the lab), `browser`, or `pipelined16` / `wrk16` (16 minimal /
//! wrk requests in one buffer, counted as 16 requests per iteration).
//!
//! `parse_loop compare <rounds>` instead times every implementation on every input in
//! interleaved rounds and prints, per pair, the fastest round (ns/request) and the ratio
//! httparse / peregrine. The minimum over interleaved rounds is what survives a noisy, shared
//! machine best: other load only ever adds time.

use peregrine_codec::{
    parse_request_head, parse_request_head_general_with, parse_request_head_with, FieldSpan, Isa,
    Limits, ParseError, Parsed,
};
use std::hint::black_box;

#[path = "../benches/support/inputs.rs"]
mod inputs;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "compare" {
        compare(args[2].parse().expect("rounds"));
        return;
    }
    let (imp, input, n) = match &args[..] {
        [_, imp, input, n] => (imp.as_str(), input.as_str(), n.parse::<usize>().expect("n")),
        _ => panic!(
            "usage: parse_loop <best|scalar|sse42|avx2|httparse|general-scalar|general-avx2> <minimal|wrk|browser|pipelined16|wrk16> <n>"
        ),
    };
    let pipelined = inputs::MINIMAL.repeat(16);
    let wrk16 = inputs::WRK.repeat(16);
    let buf: &[u8] = match input {
        "minimal" => inputs::MINIMAL,
        "wrk" => inputs::WRK,
        "browser" => inputs::BROWSER,
        "pipelined16" => &pipelined,
        "wrk16" => &wrk16,
        other => panic!("unknown input {other}"),
    };
    let httparse = imp == "httparse";
    let general = imp.starts_with("general-");
    let isa = match imp {
        "best" => None,
        "general-scalar" => Some(Isa::Scalar),
        "general-avx2" => Some(Isa::Avx2),
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
                    Some(isa) if general => {
                        parse_request_head_general_with(isa, rest, &limits, &mut fields)
                    }
                    Some(isa) => parse_request_head_with(isa, rest, &limits, &mut fields),
                    None => parse_request_head(rest, &limits, &mut fields),
                };
                match r {
                    Ok(Parsed::Complete(h)) => h.head_len,
                    other => panic!("{other:?}"),
                }
            } else {
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(rest) {
                    Ok(httparse::Status::Complete(len)) => len,
                    other => panic!("{other:?}"),
                }
            };
            rest = &rest[len..];
            parsed += 1;
        }
    }
    println!("{parsed}");
}

/// Parses every request in `buf` once; returns how many there were. Only `head_len` of each
/// result is read, as a connection driver does before anything else: copying the whole returned
/// head into a `black_box` costs a store-forwarding stall that would be measured as parsing.
#[inline(never)]
fn once<'b>(
    imp: &str,
    buf: &'b [u8],
    fields: &mut [FieldSpan],
    headers: &mut [httparse::Header<'b>],
) -> usize {
    let limits = Limits::default();
    let mut rest = buf;
    let mut n = 0;
    while !rest.is_empty() {
        let len = if imp == "httparse" {
            let mut req = httparse::Request::new(headers);
            match req.parse(rest) {
                Ok(httparse::Status::Complete(len)) => len,
                other => panic!("{other:?}"),
            }
        } else {
            // `head_len` is read where each call left its result: moving the whole result into
            // one variable first would copy it with wide loads right after the parser's
            // narrower stores, a store-forwarding stall on the loop's critical path (the next
            // request starts at `head_len`) that measures the harness, not the parser.
            match imp {
                "best" => head_len(parse_request_head(rest, &limits, fields)),
                "scalar" => head_len(parse_request_head_with(Isa::Scalar, rest, &limits, fields)),
                "sse42" => head_len(parse_request_head_with(Isa::Sse42, rest, &limits, fields)),
                _ => head_len(parse_request_head_with(Isa::Avx2, rest, &limits, fields)),
            }
        };
        rest = &rest[len..];
        n += 1;
    }
    n
}

/// The head's length, or a panic with what came back instead.
#[inline(always)]
fn head_len(r: Result<Parsed, ParseError>) -> usize {
    match r {
        Ok(Parsed::Complete(h)) => h.head_len,
        Ok(Parsed::Incomplete) => panic!("incomplete"),
        Err(e) => panic!("{e}"),
    }
}

fn compare(rounds: usize) {
    let pipelined = inputs::MINIMAL.repeat(16);
    let wrk16 = inputs::WRK.repeat(16);
    let inputs: [(&str, &[u8]); 5] = [
        ("minimal", inputs::MINIMAL),
        ("wrk", inputs::WRK),
        ("browser", inputs::BROWSER),
        ("pipelined16", &pipelined),
        ("wrk16", &wrk16),
    ];
    let imps = ["best", "scalar", "sse42", "avx2", "httparse"];
    let mut fields = [FieldSpan::default(); 100];
    // One untimed pass first: the first timed rounds otherwise pay for clock ramp-up and for
    // the CPU powering up its 256-bit units.
    for (_, buf) in inputs {
        let mut warm = [httparse::EMPTY_HEADER; 32];
        for imp in ["best", "httparse"] {
            for _ in 0..20_000 {
                once(imp, black_box(buf), &mut fields, &mut warm);
            }
        }
    }
    for (name, buf) in inputs {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let per_round = (200_000 / buf.len()).max(1000);
        let mut best = [f64::INFINITY; 5];
        for _ in 0..rounds {
            for (k, imp) in imps.iter().enumerate() {
                if !matches!(*imp, "best" | "scalar" | "httparse")
                    && !Isa::available().any(|i| format!("{i:?}").eq_ignore_ascii_case(imp))
                {
                    continue;
                }
                let start = std::time::Instant::now();
                let mut reqs = 0;
                for _ in 0..per_round {
                    reqs += once(imp, black_box(buf), &mut fields, &mut headers);
                }
                let ns = start.elapsed().as_nanos() as f64 / reqs as f64;
                best[k] = best[k].min(ns);
            }
        }
        let line: Vec<String> = imps
            .iter()
            .zip(best)
            .map(|(imp, ns)| format!("{imp} {ns:.1}"))
            .collect();
        println!(
            "{name:12} ns/request (min of {rounds} rounds): {}  | httparse/peregrine = {:.2}x",
            line.join(", "),
            best[4] / best[0]
        );
    }
}
