//! A connection's read buffer that cannot grow (the allocator refuses the memory, injected with
//! the hidden `fault-injection` API): for a request head, that connection is closed without an
//! answer; for a body, the handler's read fails with 413; the process does not abort, and the
//! next requests are served. `BytesMut::reserve` would abort the whole process instead.
//!
//! Run with `cargo test -p peregrine-server --features fault-injection --test faults_memory`.
#![cfg(feature = "fault-injection")]

mod common;
use peregrine_server::server::fault::refuse_read_buffer_growth;
use std::io::{Read, Write};
use std::sync::Mutex;

/// The refusal counter is the process's: one test at a time arms it.
static SERIAL: Mutex<()> = Mutex::new(());

/// A request whose head (about 10 KiB, under the 16 KiB limit) needs more than the first
/// 4 KiB read buffer.
fn big_head() -> Vec<u8> {
    let filler = "a".repeat(7000);
    format!(
        "GET /plaintext HTTP/1.1\r\nHost: t\r\nx-a: {filler}\r\nx-b: {}\r\n\r\n",
        &filler[..3000]
    )
    .into_bytes()
}

/// Sends `raw` on a new connection; everything the server answered before closing.
fn exchange(addr: std::net::SocketAddr, raw: &[u8], close: bool) -> String {
    let mut s = common::connect(addr);
    s.write_all(raw).unwrap();
    if close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_refused_read_buffer_closes_one_connection_and_the_server_goes_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (handle, calls) = common::start(common::config());
    let addr = handle.local_addr();
    refuse_read_buffer_growth(1);
    let refused = exchange(addr, &big_head(), false);
    assert_eq!(refused, "", "closed without an answer");
    assert_eq!(calls.get(), 0, "the request never reached the service");
    // The same request again, with memory: answered, on the same worker.
    let again = exchange(addr, &big_head(), true);
    assert!(again.starts_with("HTTP/1.1 200 OK\r\n"), "{again}");
    assert!(again.ends_with("Hello, World!"), "{again}");
    assert_eq!(calls.get(), 1);
    handle.shutdown();
}

#[test]
fn a_refused_body_buffer_is_413_for_that_request_and_the_server_goes_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (handle, calls) = common::start(common::config());
    let addr = handle.local_addr();
    let body = "b".repeat(32 * 1024);
    let post = format!("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 32768\r\n\r\n{body}");
    refuse_read_buffer_growth(1);
    let refused = exchange(addr, post.as_bytes(), true);
    assert!(refused.starts_with("HTTP/1.1 413 "), "{refused}");
    assert!(refused.ends_with("request body too large"), "{refused}");
    let again = exchange(addr, post.as_bytes(), true);
    assert!(again.starts_with("HTTP/1.1 200 OK\r\n"), "{again}");
    assert!(again.ends_with(&body), "the whole body echoed");
    assert_eq!(calls.get(), 2);
    handle.shutdown();
}
