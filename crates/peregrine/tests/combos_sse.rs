//! Server-sent events at shutdown, over a real TCP client: a stream whose client left is
//! dropped when the client's close arrives (not at the next write, up to 15 s later), so
//! graceful shutdown is not held for `shutdown_timeout`; a live event stream ends cleanly when
//! shutdown starts; pipelined input is not taken for a close.

use peregrine::server::{ServerConfig, ServerHandle};
use peregrine::sse::{Event, Sse};
use peregrine::{get, App, Request};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ten seconds, as in production: the bound the old behaviour waited out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// What "promptly" means here (a correctness bound, far from the timeout).
const PROMPT: Duration = Duration::from_secs(3);

/// `/events`: one event, then silence (the default 15 s keep-alive: no write within the
/// test); `gone` is set when the handler's sender sees its client leave. `/ping`: `pong`.
fn serve(gone: Arc<AtomicBool>) -> ServerHandle {
    let app = App::new()
        .route(
            "/events",
            get(move |_r: Request| {
                let gone = gone.clone();
                async move {
                    let (tx, sse) = Sse::channel(1);
                    tokio::task::spawn_local(async move {
                        let _ = tx.send(Event::data("hello")).await;
                        while !tx.is_closed() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        gone.store(true, Ordering::SeqCst);
                    });
                    sse
                }
            }),
        )
        .route("/ping", get(|_r: Request| async { "pong" }));
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .shutdown_timeout(SHUTDOWN_TIMEOUT)
        .build();
    app.serve(config).unwrap()
}

/// Reads from `tcp` until what was read contains `needle` (or fails after 10 s).
fn read_until(tcp: &mut TcpStream, seen: &mut Vec<u8>, needle: &[u8]) {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    while !seen.windows(needle.len()).any(|w| w == needle) {
        let n = tcp.read(&mut buf).expect("read within 10 s");
        assert!(
            n > 0,
            "connection closed before {:?}; got {:?}",
            String::from_utf8_lossy(needle),
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
}

fn open_events(addr: std::net::SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut tcp, &mut seen, b"data: hello\n\n");
    (tcp, seen)
}

fn wait_for(flag: &AtomicBool, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    flag.load(Ordering::SeqCst)
}

#[test]
fn a_client_that_left_an_event_stream_does_not_hold_shutdown() {
    let gone = Arc::new(AtomicBool::new(false));
    let handle = serve(gone.clone());
    let (tcp, _) = open_events(handle.local_addr());
    drop(tcp);
    // Before: noticed only at the next write (the keep-alive, 15 s later).
    assert!(
        wait_for(&gone, PROMPT),
        "the handler's sender did not see its client leave"
    );
    let start = Instant::now();
    handle.shutdown();
    let took = start.elapsed();
    // Before: 10.0 s (the whole `shutdown_timeout`).
    assert!(took < PROMPT, "shutdown took {took:?}");
}

#[test]
fn a_live_event_stream_ends_cleanly_when_shutdown_starts() {
    let handle = serve(Arc::new(AtomicBool::new(false)));
    let (mut tcp, mut seen) = open_events(handle.local_addr());
    let start = Instant::now();
    let stopper = std::thread::spawn(move || handle.shutdown());
    // The chunked body's last chunk, then the connection closes: a complete response.
    read_until(&mut tcp, &mut seen, b"\r\n0\r\n\r\n");
    let mut rest = Vec::new();
    tcp.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "after the last chunk: {rest:?}");
    stopper.join().unwrap();
    let took = start.elapsed();
    assert!(took < PROMPT, "shutdown took {took:?}");
}

#[test]
fn pipelined_input_during_an_event_stream_is_not_a_close() {
    let app = App::new()
        .route(
            "/events",
            get(|_r: Request| async {
                let (tx, sse) = Sse::channel(1);
                tokio::task::spawn_local(async move {
                    tx.send(Event::data("one")).await.unwrap();
                    // The pipelined request arrives meanwhile: the client is still there.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    tx.send(Event::data("two")).await.unwrap();
                });
                sse
            }),
        )
        .route("/ping", get(|_r: Request| async { "pong" }));
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let handle = app.serve(config).unwrap();
    let mut tcp = TcpStream::connect(handle.local_addr()).unwrap();
    tcp.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut tcp, &mut seen, b"data: one\n\n");
    tcp.write_all(b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    // The stream goes on, ends when its sender is dropped, then the pipelined request is
    // answered on the same connection.
    read_until(&mut tcp, &mut seen, b"data: two\n\n");
    read_until(&mut tcp, &mut seen, b"\r\n0\r\n\r\n");
    read_until(&mut tcp, &mut seen, b"pong");
    handle.shutdown();
}
