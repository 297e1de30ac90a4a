//! Hostile clients, engine side: the per-address connection cap, closing idle connections to make
//! room at `max_connections`, oversized chunks and chunk extensions against the body limit, and
//! panics while dropping a handler's future or a response stream.

mod common;
use common::*;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Server};
use std::future::Future;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

#[test]
fn per_address_cap_closes_the_connection_past_it_and_frees_on_close() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_connections_per_addr(Some(2))
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let addr = h.local_addr();
    let mut a = Client::new(addr);
    let mut b = Client::new(addr);
    a.send(&get("/plaintext"));
    assert_eq!(a.read_response().status, 200);
    b.send(&get("/plaintext"));
    assert_eq!(b.read_response().status, 200);
    // The third from the same address is closed without a word.
    let mut c = Client::new(addr);
    c.stream.write_all_ignoring_errors(&get("/plaintext"));
    assert!(c.read_response_for("GET").is_none(), "served past the cap");
    // The first two keep working.
    a.send(&get("/plaintext"));
    assert_eq!(a.read_response().status, 200);
    // One closes: the address may connect again (once the server has seen the close).
    b.stream.shutdown(Shutdown::Both).unwrap();
    drop(b);
    let mut served = false;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(50));
        let mut d = Client::new(addr);
        d.stream.write_all_ignoring_errors(&get("/plaintext"));
        if let Some(r) = d.read_response_for("GET") {
            assert_eq!(r.status, 200);
            served = true;
            break;
        }
    }
    assert!(served, "the address's count was not given back");
    h.shutdown();
}

#[test]
fn at_max_connections_the_oldest_idle_connection_makes_room() {
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_connections(2)
            .idle_timeout(Duration::from_secs(30))
            .build(),
    );
    let addr = h.local_addr();
    let mut a = Client::new(addr);
    a.send(&get("/plaintext"));
    assert_eq!(a.read_response().status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let mut b = Client::new(addr);
    b.send(&get("/plaintext"));
    assert_eq!(b.read_response().status, 200);
    // Both are idle keep-alive connections: a third is served at once, and the one idle
    // longest (a) was closed for it.
    let mut c = Client::new(addr);
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().status, 200);
    assert!(a.at_eof(), "the oldest idle connection was closed");
    b.send(&get("/plaintext"));
    assert_eq!(b.read_response().status, 200);
    h.shutdown();
}

#[test]
fn a_chunk_larger_than_the_body_limit_is_413_at_once() {
    // The limit is 64 KiB; the chunk declares 1 MiB and sends 3 bytes of it, then waits (the
    // body timeout is 30 s, longer than the client's guard: only the declared size can fail it).
    let (h, calls) = start(
        ServerConfigBuilder::from(config())
            .body_timeout(Duration::from_secs(30))
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\nabc");
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 413, "body {:?}", r.body_str());
    assert!(r.closes());
    assert_eq!(calls.get(), 1);
    h.shutdown();
}

#[test]
fn chunk_extensions_count_toward_the_body_limit() {
    // 80 one-byte chunks with 1000-byte extensions: 80 bytes of data but 80 KB of input, past
    // the 64 KiB limit.
    let (h, _) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut req = b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let ext = format!(";e={}", "v".repeat(997));
    for _ in 0..80 {
        req.extend_from_slice(format!("1{ext}\r\nx\r\n").as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    c.stream.write_all_ignoring_errors(&req);
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 413, "body {:?}", r.body_str());
    h.shutdown();
}

#[test]
fn chunk_extensions_count_toward_the_drain_limit() {
    // The handler ignores the body; the engine would drain 20 bytes of data, but 300 KB of
    // extensions come with them (past the 256 KiB drain limit): the connection closes instead
    // of answering the next request.
    let (h, _) = start(
        ServerConfigBuilder::from(config())
            .max_body_size(1 << 30)
            .build(),
    );
    let mut c = Client::new(h.local_addr());
    let mut req =
        b"POST /ignore HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let ext = format!(";e={}", "v".repeat(997));
    for _ in 0..300 {
        req.extend_from_slice(format!("1{ext}\r\nx\r\n").as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req.extend_from_slice(&get("/plaintext"));
    c.stream.write_all_ignoring_errors(&req);
    let r = c.read_response_for("POST").expect("a response");
    assert_eq!(r.status, 200);
    assert!(
        c.read_response_for("GET").is_none(),
        "300 KB of extensions were drained and the next request served"
    );
    h.shutdown();
}

/// Panics when dropped (a handler's future or a stream with a broken destructor).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("drop panics on purpose");
        }
    }
}

/// A future that answers at once (or panics, if `panic_in_poll`) and panics when dropped.
struct Answer {
    resp: Option<Response>,
    panic_in_poll: bool,
    _bomb: PanicOnDrop,
}

impl Future for Answer {
    type Output = Response;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Response> {
        if self.panic_in_poll {
            panic!("poll panics on purpose");
        }
        Poll::Ready(self.resp.take().expect("polled once"))
    }
}

/// A stream of two pieces that panics when dropped.
struct PanickyStream {
    left: u8,
    _bomb: PanicOnDrop,
}

impl futures_core::Stream for PanickyStream {
    type Item = Result<bytes::Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        Poll::Ready(Some(Ok(bytes::Bytes::from_static(b"piece;"))))
    }
}

fn panicky_service() -> impl peregrine_server::Service {
    service_fn(|req: Request| {
        let path = req.path().to_string();
        let resp = match path.as_str() {
            "/stream" => {
                Response::new(200).with_body(ResponseBody::Stream(Box::pin(PanickyStream {
                    left: 2,
                    _bomb: PanicOnDrop,
                })))
            }
            "/plaintext" => {
                return Answer {
                    resp: Some(Response::text("fine")),
                    panic_in_poll: false,
                    _bomb: PanicOnDrop,
                }
            }
            _ => Response::text("answered"),
        };
        Answer {
            resp: Some(resp),
            panic_in_poll: path == "/poll",
            _bomb: PanicOnDrop,
        }
    })
}

#[test]
fn a_panic_dropping_the_handler_future_keeps_the_answer_and_the_worker() {
    let h = Server::new(config())
        .serve(panicky_service())
        .expect("serve");
    let addr = h.local_addr();
    // The response was complete when the future's drop panicked: it is sent, then the
    // connection closes cleanly.
    let mut c = Client::new(addr);
    c.send(&get("/answer"));
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "answered"));
    assert!(c.at_eof());
    // A panic in poll, then another dropping the panicked future: 500, nothing was sent.
    let mut c = Client::new(addr);
    c.send(&get("/poll"));
    let r = c.read_response();
    assert_eq!(r.status, 500);
    assert!(c.at_eof());
    // A stream whose drop panics after its last piece: the whole response arrives.
    let mut c = Client::new(addr);
    c.send(&get("/stream"));
    let r = c.read_response();
    assert_eq!((r.status, r.body_str()), (200, "piece;piece;"));
    assert!(c.at_eof());
    // The (only) worker still serves.
    let mut c = Client::new(addr);
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "fine");
    h.shutdown();
}

/// Writes what the server takes, ignoring a reset (the server may close before reading all).
trait WriteIgnoringErrors {
    fn write_all_ignoring_errors(&mut self, bytes: &[u8]);
}

impl WriteIgnoringErrors for std::net::TcpStream {
    fn write_all_ignoring_errors(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let _ = self.write_all(bytes);
    }
}
