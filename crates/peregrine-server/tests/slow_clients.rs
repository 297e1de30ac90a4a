//! Slow clients: a body trickled under the per-read timeout, a response read slowly
//! under the per-wait write timeout, a new connection that sends nothing, and timeouts too large
//! for `Instant + Duration`. Timeouts are a few hundred milliseconds; the client only waits for
//! an outcome (bounded), never asserts a duration.

mod common;
use common::*;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Server, ServerConfig};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `bytes` one byte every `gap`, stopping early (and returning `false`) if the server
/// closed the connection.
fn trickle(s: &mut TcpStream, bytes: &[u8], gap: Duration) -> bool {
    for b in bytes {
        std::thread::sleep(gap);
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return false;
        }
    }
    true
}

/// Each read gets far less than `body_timeout`, so only a rate or total limit can stop it.
fn trickle_config() -> ServerConfig {
    ServerConfigBuilder::from(config())
        .body_timeout(Duration::from_millis(600))
        .body_min_rate(100)
        .body_rate_grace(Duration::from_millis(300))
        .build()
}

#[test]
fn body_trickled_under_the_read_timeout_is_408_by_min_rate() {
    // 20 bytes, one every 150 ms: each wait is well under the 600 ms read timeout, the whole
    // body takes 3 s; at 100 bytes/s after 300 ms of grace the body must end by about 0.5 s.
    let (h, _) = start(trickle_config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n");
    trickle(&mut c.stream, &[b'x'; 20], Duration::from_millis(150));
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 408, "body {:?}", r.body_str());
    assert!(r.closes());
    h.shutdown();
}

#[test]
fn body_trickled_under_the_read_timeout_is_408_by_total_deadline() {
    let (h, _) = start(
        ServerConfigBuilder::from(trickle_config())
            .body_min_rate(0)
            .body_total_timeout(Duration::from_millis(800))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    trickle(
        &mut c.stream,
        b"14\r\n01234567890123456789\r\n0\r\n\r\n",
        Duration::from_millis(100),
    );
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 408, "body {:?}", r.body_str());
    h.shutdown();
}

#[test]
fn a_body_at_a_decent_rate_is_accepted() {
    // 30 pieces of 100 bytes, one every 50 ms (2 KB/s, 1.5 s in all, well above 100 bytes/s).
    let (h, _) = start(trickle_config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3000\r\n\r\n");
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(50));
        c.send(&[b'y'; 100]);
    }
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!((r.status, r.body.len()), (200, 3000));
    h.shutdown();
}

#[test]
fn drain_of_an_unread_trickled_body_counts_under_the_same_limit() {
    // The handler ignores the body; the engine drains it to keep the connection, under the
    // body's rate limit: the trickle ends with a closed connection, not a served next request.
    let (h, calls) = start(trickle_config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\nx");
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 200);
    let all_sent = trickle(&mut c.stream, &[b'x'; 19], Duration::from_millis(150));
    let _ = c.stream.write_all(&get("/plaintext"));
    let next = c.read_response_for("GET");
    assert!(
        next.is_none(),
        "a trickled body was drained and the next request served (all sent: {all_sent})"
    );
    assert_eq!(calls.get(), 1);
    h.shutdown();
}

#[test]
fn a_new_connection_that_sends_nothing_is_closed_at_the_header_timeout() {
    // Idle timeout 30 s (longer than the client's 10 s guard): only the header timeout
    // (300 ms) can close it in time.
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    assert!(c.at_eof(), "closed without a response");
    // A keep-alive connection after a request still gets the idle timeout.
    let mut k = Client::new(h.local_addr());
    k.send(&get("/plaintext"));
    assert_eq!(k.read_response().status, 200);
    std::thread::sleep(Duration::from_millis(800));
    k.send(&get("/plaintext"));
    assert_eq!(k.read_response().status, 200);
    h.shutdown();
}

#[test]
fn huge_timeouts_do_not_overflow_deadlines() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .header_timeout(Duration::MAX)
            .body_timeout(Duration::MAX)
            .body_total_timeout(Duration::MAX)
            .body_rate_grace(Duration::MAX)
            .write_timeout(Duration::MAX)
            .write_rate_grace(Duration::MAX)
            .idle_timeout(Duration::MAX)
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    // A head and a body that both make the engine wait (and compute a deadline).
    c.send(b"POST /echo HTTP/1.1\r\n");
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"Host: a\r\nContent-Length: 5\r\n\r\nab");
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"cde");
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!((r.status, r.body_str()), (200, "abcde"));
    h.shutdown();
}

/// 64 MiB streamed in 64 KiB pieces: far more than socket buffers hold.
fn huge_stream_service() -> impl peregrine_server::Service {
    service_fn(|_req: Request| async {
        let piece = bytes::Bytes::from(vec![b'z'; 64 * 1024]);
        let pieces: Vec<Result<bytes::Bytes, std::io::Error>> =
            (0..1024).map(|_| Ok(piece.clone())).collect();
        Response::new(200).with_body(ResponseBody::Stream(Box::pin(Iter(pieces.into_iter()))))
    })
}

#[test]
fn response_read_slowly_under_the_write_timeout_is_cut_by_min_rate() {
    // The client reads 32 KiB every 50 ms (about 600 KB/s): each wait for writability sees
    // progress within the 5 s write timeout (without it the server went on sending for as
    // long as the client read), but the rate is under the 8 MB/s minimum.
    let cfg = ServerConfigBuilder::from(config())
        .write_timeout(Duration::from_secs(5))
        .write_min_rate(8_000_000)
        .write_rate_grace(Duration::from_millis(200))
        .build();
    let h = Server::new(cfg)
        .serve(huge_stream_service())
        .expect("serve");
    let mut s = connect(h.local_addr());
    s.write_all(&get("/huge")).unwrap();
    let started = Instant::now();
    let (ended, total) = read_slowly(&mut s, Duration::from_secs(10));
    eprintln!("ended {ended} total {total} after {:?}", started.elapsed());
    assert!(ended, "still sending to a slow reader after {total} bytes");
    assert!(total < 64 << 20, "the whole response was sent");
    h.shutdown();
}

#[test]
fn response_read_at_a_decent_rate_is_complete() {
    // Same service, the client reads as fast as it can: nothing is cut.
    let cfg = ServerConfigBuilder::from(config())
        .write_min_rate(1_000_000)
        .write_rate_grace(Duration::from_millis(200))
        .build();
    let h = Server::new(cfg)
        .serve(huge_stream_service())
        .expect("serve");
    let mut c = Client::new(h.local_addr());
    c.send(&get("/huge"));
    let r = c.read_response();
    assert_eq!((r.status, r.body.len()), (200, 64 << 20));
    h.shutdown();
}
