//! Timeouts, connection limits, misbehaving clients and graceful shutdown, over real sockets.
//! Configured timeouts are a few hundred milliseconds; assertions only wait for an outcome
//! (bounded by `CLIENT_WAIT`) or check that nothing happened for a whole second.

mod common;
use common::*;
use peregrine_server::ServerConfigBuilder;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// `true` if nothing at all arrives on `s` within one second.
fn silent_for_a_second(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut b = [0u8; 1];
    let res = s.read(&mut b);
    let quiet = matches!(res, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        || e.kind() == std::io::ErrorKind::TimedOut);
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    quiet
}

#[test]
fn slow_header_is_408() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /plaintext HTTP/1.1\r\nHost: a\r\n");
    // The rest never comes: 408, then close.
    let r = c.read_response();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    assert!(c.at_eof());
    assert_eq!(calls.get(), 0);
    h.shutdown();
}

#[test]
fn slowloris_byte_by_byte_still_times_out() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .header_timeout(Duration::from_millis(500))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    let req = get("/plaintext");
    // One byte every 200 ms keeps each read short but the head never completes in time.
    let mut got_408 = false;
    c.stream.set_nonblocking(true).unwrap();
    for b in req.iter().take(req.len() - 1) {
        if c.stream.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut tmp = [0u8; 64];
        if let Ok(n) = c.stream.read(&mut tmp) {
            if n > 0 && tmp.starts_with(b"HTTP/1.1 408") {
                got_408 = true;
                break;
            }
        }
    }
    assert!(got_408, "408 before the head completed");
    h.shutdown();
}

#[test]
fn slow_body_is_408() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    let r = c.read_response();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    h.shutdown();
}

#[test]
fn idle_keep_alive_connection_is_closed_silently() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    // idle_timeout is 500 ms: the server closes without sending anything.
    assert!(c.at_eof());
    // A connection that never sent anything is closed silently too.
    let mut c = Client::new(h.local_addr());
    assert!(c.at_eof());
    h.shutdown();
}

#[test]
fn half_close_after_request_still_gets_response() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = get("/plaintext");
    batch.extend(get("/stream?2"));
    c.send(&batch);
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    assert_eq!(c.read_response().body_str(), "chunk0;chunk1;");
    assert!(c.at_eof());
    h.shutdown();
}

/// A batch larger than the read buffer is read in several reads before its responses are sent
/// (the driver reads on while reads fill the buffer); the client's end of input, met on one of
/// those reads, still gets every response, then the close.
#[test]
fn half_close_after_a_batch_larger_than_the_read_buffer_gets_every_response() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let n = 1000;
    let batch: Vec<u8> = (0..n).flat_map(|_| get("/plaintext")).collect();
    assert!(batch.len() > 32 * 1024);
    c.send(&batch);
    c.stream.shutdown(Shutdown::Write).unwrap();
    for _ in 0..n {
        assert_eq!(c.read_response().body_str(), "Hello, World!");
    }
    assert!(c.at_eof());
    assert_eq!(calls.get(), n);
    h.shutdown();
}

#[test]
fn eof_in_a_head_skips_the_handler_and_eof_in_a_body_is_an_incomplete_body() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /plaintext HTTP/1.1\r\nHo");
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert!(c.at_eof(), "closed without a response");
    assert_eq!(calls.get(), 0, "a head cut short never reaches the handler");
    // Body cut short by EOF: the head was complete, so the handler is called (once), and sees
    // an incomplete body, never a complete one.
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    c.stream.shutdown(Shutdown::Write).unwrap();
    match c.read_response_for("POST") {
        None => {}
        Some(r) => assert_eq!(r.status, 400, "incomplete body is an error, not a 200"),
    }
    assert_eq!(calls.get(), 1);
    h.shutdown();
}

#[test]
fn reset_mid_request_and_mid_response_leave_the_worker_serving() {
    let (h, calls) = start(config());
    for _ in 0..20 {
        let s = connect(h.local_addr());
        let sock = socket2::SockRef::from(&s);
        (&s).write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
            .unwrap();
        sock.set_linger(Some(Duration::ZERO)).unwrap();
        drop(s); // RST
        let s = connect(h.local_addr());
        (&s).write_all(&get("/big")).unwrap();
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s); // RST while the 256 KiB response is being written
    }
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    assert!(calls.get() <= 41);
    h.shutdown();
}

#[test]
fn client_that_does_not_read_is_bounded_and_closed() {
    let cfg = ServerConfigBuilder::from(config())
        .max_pending_output(64 * 1024)
        .build();
    let (h, calls) = start(cfg);
    let c = connect(h.local_addr());
    c.set_nonblocking(true).unwrap();
    // Pipeline requests for 256 KiB responses without ever reading. The server must stop
    // reading once its output is stuck, so the client's writes stall after a bounded amount.
    let req = get("/big");
    let mut sent = 0usize;
    let mut stalled_rounds = 0;
    while stalled_rounds < 20 && sent < 64 << 20 {
        match (&c).write(&req) {
            Ok(n) => {
                sent += n;
                stalled_rounds = 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                stalled_rounds += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => break, // the server closed it (write timeout) — also bounded
        }
    }
    assert!(
        sent < 64 << 20,
        "server kept reading {sent} bytes from a client that never reads"
    );
    // Only a handful of requests were handled (bounded by buffers, not by what was sent).
    let handled = calls.get();
    assert!(
        handled * req.len() < sent,
        "handled {handled} of {} sent",
        sent / req.len()
    );
    // After the write timeout the server gives up on the connection: reading now ends in EOF
    // or reset after at most what was buffered.
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match (&c).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(total < 64 << 20);
    // The worker is fine.
    let mut c2 = Client::new(h.local_addr());
    c2.send(&get("/plaintext"));
    assert_eq!(c2.read_response().status, 200);
    h.shutdown();
}

#[test]
fn max_connections_with_none_idle_waits_without_dropping_busy_ones() {
    // Both connections are busy (inside a request head): nothing may be closed for the third.
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_connections(2)
            .header_timeout(Duration::from_secs(30))
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let mut a = Client::new(h.local_addr());
    let mut b = Client::new(h.local_addr());
    a.send(b"GET /plaintext HTTP/1.1\r\n");
    b.send(b"GET /plaintext HTTP/1.1\r\n");
    std::thread::sleep(Duration::from_millis(200));
    // The third connects (backlog) but is not served while two are open and busy.
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    let q = silent_for_a_second(&mut c.stream);
    assert!(q, "third connection served past the limit");
    // The busy ones were kept and finish their requests.
    a.send(b"Host: t\r\n\r\n");
    assert_eq!(a.read_response().status, 200);
    b.send(b"Host: t\r\nConnection: close\r\n\r\n");
    assert_eq!(b.read_response().status, 200);
    // b closed: the waiting client is accepted and answered.
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn graceful_shutdown_drains_in_flight_and_closes_idle() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let addr = h.local_addr();
    let mut idle = Client::new(addr);
    idle.send(&get("/plaintext"));
    assert_eq!(idle.read_response().status, 200);
    let mut busy = Client::new(addr);
    busy.send(&get("/slow"));
    // Let the slow request start before shutting down.
    std::thread::sleep(Duration::from_millis(200));
    let stopper = std::thread::spawn(move || h.shutdown());
    let r = busy.read_response();
    assert_eq!((r.status, r.body_str()), (200, "slow done"));
    assert!(
        r.closes(),
        "the response after shutdown began says Connection: close"
    );
    assert!(busy.at_eof());
    assert!(idle.at_eof(), "idle connections are closed");
    stopper.join().unwrap();
    // Not listening any more.
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn shutdown_force_closes_after_the_deadline() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .shutdown_timeout(Duration::from_millis(200))
            .body_timeout(Duration::from_secs(60))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    // A request stuck in the middle of its body is neither idle nor finishing (one stuck in
    // its head is answered 408 when shutdown starts: faults_shutdown.rs).
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab");
    std::thread::sleep(Duration::from_millis(100));
    h.shutdown(); // returns once the deadline forced the connection closed
    assert!(c.at_eof());
}

#[test]
fn several_workers_share_the_port() {
    let (h, calls) = start(ServerConfigBuilder::from(config()).workers(3).build());
    for _ in 0..30 {
        let mut c = Client::new(h.local_addr());
        c.send(&get("/plaintext"));
        assert_eq!(c.read_response().status, 200);
    }
    assert_eq!(calls.get(), 30);
    h.shutdown();
}

#[test]
fn idle_connection_outlives_the_header_timeout() {
    // Regression: an idle keep-alive connection is governed by the idle timeout only.
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    assert!(silent_for_a_second(&mut c.stream), "closed while idle");
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}
