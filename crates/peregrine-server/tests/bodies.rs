//! Request bodies over real sockets: Content-Length and chunked, limits, 100-continue, bodies
//! the handler ignores, streaming a request body back.

mod common;
use common::*;
use peregrine_server::ServerConfigBuilder;

#[test]
fn content_length_body_is_read() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "hello world"));
    h.shutdown();
}

#[test]
fn body_arriving_later_and_in_pieces() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n");
    let body: Vec<u8> = (0..20000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for piece in body.chunks(3000) {
        c.send(piece);
    }
    let r = c.read_response();
    assert_eq!(r.body, body);
    h.shutdown();
}

#[test]
fn chunked_body_is_decoded() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
        .to_vec();
    batch.extend(get("/plaintext"));
    c.send(&batch);
    assert_eq!(c.read_response().body_str(), "hello world");
    assert_eq!(
        c.read_response().body_str(),
        "Hello, World!",
        "framing stays in sync"
    );
    h.shutdown();
}

#[test]
fn invalid_chunked_framing_is_400_and_close() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 400);
    assert!(r.closes());
    assert!(c.at_eof());
    h.shutdown();
}

#[test]
fn content_length_over_limit_is_413_before_reading() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    // Only the head is sent: the read fails on the declared length, without waiting for the
    // body (the handler may raise the limit first, so it is the read that refuses).
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 413);
    assert!(r.closes());
    h.shutdown();
}

#[test]
fn chunked_body_over_limit_is_413() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_body_size(1000)
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    let mut req = b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend(b"1f4\r\n");
        req.extend([b'z'; 500]);
        req.extend(b"\r\n");
    }
    req.extend(b"0\r\n\r\n");
    c.send(&req);
    let r = c.read_response();
    assert_eq!(r.status, 413);
    assert!(r.closes());
    h.shutdown();
}

#[test]
fn handler_limit_below_engine_limit_is_413() {
    // /echo reads with a 1 MiB limit; the engine limit is raised above it.
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_body_size(4 << 20)
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 413);
    assert!(r.closes(), "the unread body cannot be skipped cheaply");
    h.shutdown();
}

#[test]
fn ignored_body_does_not_desynchronise() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch =
        b"POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nGET /bad H".to_vec();
    batch.extend(b"POST /ignore HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    batch.extend(get("/plaintext"));
    c.send(&batch);
    assert_eq!(c.read_response().body_str(), "ignored");
    assert_eq!(c.read_response().body_str(), "ignored");
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    assert_eq!(calls.get(), 3);
    h.shutdown();
}

#[test]
fn ignored_body_sent_after_the_response_is_drained() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
    assert_eq!(c.read_response().body_str(), "ignored");
    c.send(b"abcde");
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn expect_100_continue_is_sent_when_the_handler_reads() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.read_response();
    assert_eq!(interim.status, 100);
    c.send(b"data");
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "data"));
    assert!(!r.closes());
    h.shutdown();
}

#[test]
fn expect_100_continue_without_reading_answers_final_status_and_closes() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(
        b"POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    let r = c.read_response();
    assert_eq!(r.status, 200, "no 100 Continue when the body is not read");
    assert!(r.closes());
    h.shutdown();
}

#[test]
fn expect_100_continue_over_limit_is_413_without_100() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(c.read_response().status, 413);
    h.shutdown();
}

#[test]
fn expect_100_continue_ignored_for_http10() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.0\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    // Nothing may arrive before the body: send it, then the only response is the final one.
    c.send(b"data");
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "data"));
    h.shutdown();
}

#[test]
fn unknown_expectation_is_417() {
    let (h, calls) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: something\r\n\r\ndata");
    let r = c.read_response();
    assert_eq!(r.status, 417);
    assert!(r.closes());
    assert_eq!(calls.get(), 0);
    h.shutdown();
}

#[test]
fn request_body_streamed_back_as_response() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(
        b"POST /echo-stream HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
    );
    // The response head and the first piece come before the rest of the body is sent.
    c.send(b"3\r\ndef\r\n0\r\n\r\n");
    let r = c.read_response();
    assert!(r.chunked);
    assert_eq!(r.body_str(), "abcdef");
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    h.shutdown();
}

#[test]
fn get_with_body_reads_exactly_content_length() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = b"GET /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz".to_vec();
    batch.extend(get("/plaintext"));
    c.send(&batch);
    assert_eq!(c.read_response().body_str(), "xyz");
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn expect_100_continue_with_streamed_echo_sends_100_before_the_response() {
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(
        b"POST /echo-stream HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(c.read_response().status, 100);
    c.send(b"data");
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "data"));
    h.shutdown();
}

#[test]
fn large_body_is_read_whole() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_body_size(2 << 20)
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    c.send(
        format!(
            "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let writer = {
        let mut s = c.stream.try_clone().unwrap();
        let body = body.clone();
        std::thread::spawn(move || std::io::Write::write_all(&mut s, &body).unwrap())
    };
    let r = c.read_response();
    writer.join().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == body, "echoed body differs");
    h.shutdown();
}
