//! The connection driver fed arbitrary bytes cut into arbitrary reads: bodies,
//! pipelining, the drain of unread bodies, the re-parse shortcut. The driver owns a real
//! `TcpStream`, so the input goes through a loopback connection to a server running in this
//! process (one worker, started once).
//!
//! Input: byte 0 is the number of cuts `n` (mod 16), the next `n` bytes the lengths of the first
//! pieces, the rest the bytes sent. Each input is sent twice, whole in one write and piece by
//! piece (with a short pause after each, so the server reads them one at a time), each time
//! followed by a half-close. Checked:
//! - no panic anywhere in the server (the hook aborts, so libFuzzer reports it);
//! - the server answers and closes after the client's EOF (no hang; a 20 s guard);
//! - what it sends starts with `HTTP/1.1 ` (or is nothing);
//! - both runs get the same answer, apart from the `Date` lines and interim `100 Continue`
//!   responses (which depend on whether a body was already there when the handler read it);
//! - every 64 inputs, a fresh connection is still served.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_server::{
    service_fn, Request, Response, ResponseBody, Server, ServerConfig, ServerHandle,
};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// A stream of a few pieces (tests a streamed response after any request).
struct Pieces(u8);

impl futures_core::Stream for Pieces {
    type Item = Result<bytes::Bytes, std::io::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.0 == 0 {
            return std::task::Poll::Ready(None);
        }
        self.0 -= 1;
        std::task::Poll::Ready(Some(Ok(bytes::Bytes::from_static(b"piece;"))))
    }
}

fn server() -> SocketAddr {
    // Kept in a static: the server runs for the life of the process (and is not a leak).
    static SERVER: OnceLock<ServerHandle> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            std::panic::set_hook(Box::new(|info| {
                eprintln!("panic: {info}");
                std::process::abort();
            }));
            // No timeout should fire within one input (the client half-closes at once); they
            // are long because the fuzzing machine may be loaded: with 2 s, a client thread
            // descheduled between connect and write saw its silent new connection closed (a
            // correct close, but a false "the answer depends on the cuts").
            let config = ServerConfig::builder()
                .addr("127.0.0.1:0".parse().unwrap())
                .workers(1)
                .header_timeout(Duration::from_secs(30))
                .body_timeout(Duration::from_secs(30))
                .idle_timeout(Duration::from_secs(30))
                .write_timeout(Duration::from_secs(30))
                .max_body_size(4096)
                .build();
            Server::new(config)
                .serve(service_fn(|mut req: Request| async move {
                    match req.path() {
                        "/echo" => match req.body_mut().to_bytes(1 << 16).await {
                            Ok(b) => Response::text(b),
                            Err(e) => Response::text(e.to_string()).with_status(e.status()),
                        },
                        "/stream" => {
                            Response::new(200).with_body(ResponseBody::Stream(Box::pin(Pieces(3))))
                        }
                        "/ignore" => Response::text("ignored"),
                        _ => Response::text(format!("{} {}", req.method(), req.target())),
                    }
                }))
                .expect("serve")
        })
        .local_addr()
}

/// Sends `pieces` (pausing after each if `pause`), half-closes, reads until the server closes.
/// Returns what was read and how the exchange ended (for the failure message).
fn exchange(addr: SocketAddr, pieces: &[&[u8]], pause: bool) -> (Vec<u8>, String) {
    let mut how = String::new();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for p in pieces {
        // The server may close early (after an error response): later writes may fail.
        if let Err(e) = s.write_all(p) {
            how = format!("write failed: {e}; ");
            break;
        }
        if pause {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                how.push_str("eof");
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("the server neither answered nor closed within 20 s of the client's EOF")
            }
            // A reset after the answer (the server closed with input unread).
            Err(e) => {
                how.push_str(&format!("read failed: {e}"));
                break;
            }
        }
    }
    (out, how)
}

/// The answer without `Date` lines and interim `100 Continue` responses.
fn normalised(out: &[u8]) -> Vec<u8> {
    let mut v = out.to_vec();
    while let Some(i) = find(&v, b"HTTP/1.1 100 Continue\r\n\r\n") {
        v.drain(i..i + 25);
    }
    while let Some(i) = find(&v, b"\r\nDate: ") {
        let end = find(&v[i + 2..], b"\r\n").map_or(v.len(), |e| i + 2 + e);
        v.drain(i..end);
    }
    v
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fuzz_target!(|data: &[u8]| {
    let addr = server();
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 16).min(rest.len());
    let (lens, payload) = rest.split_at(n);
    if payload.is_empty() {
        return;
    }
    let mut pieces = Vec::new();
    let mut at = 0;
    for &l in lens {
        let end = (at + usize::from(l).max(1)).min(payload.len());
        pieces.push(&payload[at..end]);
        at = end;
    }
    if at < payload.len() {
        pieces.push(&payload[at..]);
    }
    let (whole, whole_end) = exchange(addr, &[payload], false);
    let (split, split_end) = exchange(addr, &pieces, true);
    for out in [&whole, &split] {
        assert!(
            out.is_empty() || out.starts_with(b"HTTP/1.1 "),
            "answer does not start with a status line: {:?}",
            String::from_utf8_lossy(&out[..out.len().min(200)])
        );
    }
    assert!(
        normalised(&whole) == normalised(&split),
        "the answer depends on the cuts:\nwhole ({whole_end}): {:?}\nsplit ({split_end}): {:?}",
        String::from_utf8_lossy(&whole),
        String::from_utf8_lossy(&split)
    );
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    if RUNS.fetch_add(1, Ordering::Relaxed) % 64 == 0 {
        let (alive, _) = exchange(addr, &[b"GET /alive HTTP/1.1\r\nHost: f\r\n\r\n"], false);
        assert!(
            alive.starts_with(b"HTTP/1.1 200 "),
            "the server stopped serving"
        );
    }
});
