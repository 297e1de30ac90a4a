//! Connection driver behaviour over real loopback sockets: pipelining, errors, keep-alive rules,
//! HEAD, 1xx/204/304, Date and Server, panics, request limits.

mod common;
use common::*;
use peregrine_server::ServerConfigBuilder;
use std::io::Write;

#[test]
fn serves_plaintext_with_date_and_server() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body_str(), "Hello, World!");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("server"), Some("peregrine"));
    let date = r.header("date").expect("Date header");
    assert!(
        date.ends_with(" GMT") && date.len() == 29,
        "IMF-fixdate: {date:?}"
    );
    assert!(!r.closes());
    // Keep-alive: a second request on the same connection.
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn request_accessors_see_the_parsed_head() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /target?a=1&b=%20 HTTP/1.1\r\nHost: example.com:8080\r\nX-Test: v\r\n\r\n");
    let r = c.read_response();
    assert_eq!(
        r.body_str(),
        "GET /target?a=1&b=%20 Some(\"a=1&b=%20\") Some(\"example.com:8080\")"
    );
    c.send(b"GET /header HTTP/1.1\r\nHost: a\r\nx-TEST:  spaced value \t\r\n\r\n");
    assert_eq!(c.read_response().body_str(), "spaced value");
    h.shutdown();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = Vec::new();
    for p in ["/plaintext", "/nope", "/stream?2", "/204", "/plaintext"] {
        batch.extend(get(p));
    }
    c.send(&batch);
    let statuses: Vec<u16> = (0..5).map(|_| c.read_response().status).collect();
    assert_eq!(statuses, [200, 404, 200, 204, 200]);
    h.shutdown();
}

/// The driver answers handlers that are ready at once in a tight loop and waits for the others
/// in place: a handler that is pending in the middle of a batch, and requests with bodies around
/// it, keep the batch's order.
#[test]
fn a_pending_handler_and_bodies_inside_a_pipelined_batch_keep_the_order() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = get("/plaintext");
    batch.extend(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none");
    batch.extend(get("/slow"));
    batch.extend(get("/plaintext"));
    batch.extend(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ntwo");
    batch.extend(get("/ignore"));
    c.send(&batch);
    let got: Vec<(u16, String)> = (0..6)
        .map(|_| {
            let r = c.read_response();
            (r.status, r.body_str().to_string())
        })
        .collect();
    let want = [
        "Hello, World!",
        "one",
        "slow done",
        "Hello, World!",
        "two",
        "ignored",
    ];
    assert_eq!(got, want.map(|b| (200, b.to_string())));
    assert_eq!(calls.get(), 6);
    // The connection is still usable.
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn many_pipelined_requests_in_one_write() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let n = 500;
    let batch: Vec<u8> = (0..n).flat_map(|_| get("/plaintext")).collect();
    c.send(&batch);
    for _ in 0..n {
        let r = c.read_response();
        assert_eq!((r.status, r.body_str()), (200, "Hello, World!"));
    }
    assert_eq!(calls.get(), n);
    h.shutdown();
}

#[test]
fn invalid_request_after_valid_ones_is_answered_after_them_then_closed() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = get("/plaintext");
    batch.extend(get("/nope"));
    batch.extend(b"GET /x HTTP/1.1\r\nHost : a\r\n\r\n");
    batch.extend(get("/plaintext"));
    c.send(&batch);
    assert_eq!(c.read_response().status, 200);
    assert_eq!(c.read_response().status, 404);
    let err = c.read_response();
    assert_eq!(err.status, 400);
    assert!(err.closes());
    assert!(!err.body.is_empty(), "error responses carry the reason");
    assert!(c.at_eof(), "nothing after the error response");
    assert_eq!(
        calls.get(),
        2,
        "the request after the invalid one is never handled"
    );
    h.shutdown();
}

#[test]
fn request_split_one_byte_per_packet() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let req = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    for b in req {
        c.send(&[*b]);
        c.stream.flush().unwrap();
    }
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "hello"));
    h.shutdown();
}

#[test]
fn connection_close_from_client() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_vec();
    batch.extend(get("/plaintext"));
    c.send(&batch);
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert!(r.closes());
    assert!(c.at_eof(), "anything after Connection: close is ignored");
    assert_eq!(calls.get(), 1);
    h.shutdown();
}

#[test]
fn handler_connection_close_header_closes() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/close"));
    let r = c.read_response();
    assert!(r.closes());
    assert_eq!(
        r.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .count(),
        1
    );
    assert!(c.at_eof());
    h.shutdown();
}

#[test]
fn http10_closes_unless_keep_alive() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /plaintext HTTP/1.0\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert!(r.closes());
    assert!(c.at_eof());

    let mut c = Client::new(h.local_addr());
    c.send(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn http10_streamed_body_is_close_delimited() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /stream?2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response();
    assert!(!r.chunked);
    assert!(r.closes());
    assert_eq!(r.body_str(), "chunk0;chunk1;");
    h.shutdown();
}

#[test]
fn head_has_get_headers_and_no_body() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    // A pipelined GET right after proves no body bytes followed the HEAD response.
    let mut batch = b"HEAD /plaintext HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
    batch.extend(get("/plaintext"));
    c.send(&batch);
    let head = c.read_response_for("HEAD").unwrap();
    assert_eq!(head.header("content-length"), Some("13"));
    assert!(head.body.is_empty());
    let after = c.read_response();
    assert_eq!(after.body_str(), "Hello, World!");
    // HEAD of a streamed response: chunked header, no body.
    c.send(b"HEAD /stream HTTP/1.1\r\nHost: a\r\n\r\n");
    let head = c.read_response_for("HEAD").unwrap();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn no_body_statuses() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = get("/204");
    batch.extend(get("/304"));
    batch.extend(get("/plaintext"));
    c.send(&batch);
    let r = c.read_response();
    assert_eq!(r.status, 204);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("transfer-encoding"), None);
    let r = c.read_response();
    assert_eq!(r.status, 304);
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn streamed_response_is_chunked() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/stream?5"));
    let r = c.read_response();
    assert!(r.chunked);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.body_str(), "chunk0;chunk1;chunk2;chunk3;chunk4;");
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn large_fixed_body() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/big"));
    let r = c.read_response();
    assert_eq!(r.body.len(), 256 * 1024);
    assert!(r.body.iter().all(|&b| b == b'x'));
    h.shutdown();
}

#[test]
fn panic_in_handler_is_500_and_worker_keeps_serving() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/panic"));
    let r = c.read_response();
    assert_eq!(r.status, 500);
    assert!(r.closes());
    assert!(c.at_eof());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn invalid_response_header_is_not_sent() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(&get("/bad-header"));
    let r = c.read_response();
    assert_eq!(r.status, 500);
    assert!(r.header("injected").is_none());
    h.shutdown();
}

#[test]
fn max_requests_per_connection() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_requests_per_connection(Some(2))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    let mut batch = get("/plaintext");
    batch.extend(get("/plaintext"));
    batch.extend(get("/plaintext"));
    c.send(&batch);
    assert!(!c.read_response().closes());
    assert!(
        c.read_response().closes(),
        "the last allowed response says Connection: close"
    );
    assert!(c.at_eof());
    h.shutdown();
}

#[test]
fn connections_served_in_turn_keep_their_own_state() {
    // The worker recycles the state of a connection that goes idle for the next one that goes
    // busy: nothing of one connection (buffered bytes, body progress, end of input) may show
    // through in another. (Long timeouts: the half request must not time out meanwhile.)
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .header_timeout(std::time::Duration::from_secs(30))
            .idle_timeout(std::time::Duration::from_secs(30))
            .build(),
    );
    let mut clients: Vec<Client> = (0..6).map(|_| Client::new(h.local_addr())).collect();
    // The first client leaves half a request buffered while the others are served.
    clients[0].send(b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\nGET /tar");
    assert_eq!(clients[0].read_response().body_str(), "Hello, World!");
    for round in 0..3 {
        for (i, c) in clients.iter_mut().enumerate().skip(1) {
            let body = format!("round {round}, connection {i}");
            c.send(
                format!(
                    "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            let r = c.read_response();
            assert_eq!((r.status, r.body_str()), (200, body.as_str()));
            assert!(!r.closes());
        }
    }
    // One client half-closes after a request: its end of input stays its own.
    clients[5].send(&get("/plaintext"));
    clients[5]
        .stream
        .shutdown(std::net::Shutdown::Write)
        .unwrap();
    assert_eq!(clients[5].read_response().status, 200);
    assert!(clients[5].at_eof());
    for c in clients.iter_mut().skip(1).take(4) {
        c.send(&get("/plaintext"));
        let r = c.read_response();
        assert_eq!((r.status, r.closes()), (200, false));
    }
    clients[0].send(b"get?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(
        clients[0].read_response().body_str(),
        "GET /target?x=1 Some(\"x=1\") Some(\"a\")"
    );
    h.shutdown();
}
