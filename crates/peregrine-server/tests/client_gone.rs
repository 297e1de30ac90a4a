//! A client that leaves while its handler works (HTTP/1.1): the handler's future is dropped and
//! the connection closes (`ServerConfig::half_close` off, the default), or, with it on, a client
//! that only half-closed still gets its answer. The worker serves everyone else meanwhile.

mod common;

use common::{config, Client};
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig, ServerHandle};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the handlers did: started, answered, dropped before answering.
#[derive(Default)]
struct Counts {
    started: AtomicUsize,
    answered: AtomicUsize,
    dropped: AtomicUsize,
}

impl Counts {
    fn get(&self) -> (usize, usize, usize) {
        (
            self.started.load(Ordering::SeqCst),
            self.answered.load(Ordering::SeqCst),
            self.dropped.load(Ordering::SeqCst),
        )
    }

    /// Waits until `done` holds (a guard against hanging, not a timing assertion).
    fn wait_for(&self, what: &str, done: impl Fn((usize, usize, usize)) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(self.get()) {
            assert!(Instant::now() < deadline, "{what}: {:?}", self.get());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Counts a handler dropped before it answered.
struct Unanswered(Arc<Counts>, bool);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.1 {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `GET /wait?MS`: answers after MS milliseconds (a minute without a query; at once for 0).
fn start(cfg: ServerConfig) -> (ServerHandle, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let service = service_fn(move |req: Request| {
        let c = c.clone();
        let ms: u64 = req.query().and_then(|q| q.parse().ok()).unwrap_or(60_000);
        async move {
            c.started.fetch_add(1, Ordering::SeqCst);
            let mut guard = Unanswered(c.clone(), false);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            guard.1 = true;
            c.answered.fetch_add(1, Ordering::SeqCst);
            drop(req);
            Response::text("done")
        }
    });
    let handle = Server::new(cfg).serve(service).expect("serve");
    (handle, counts)
}

const WAIT: &[u8] = b"GET /wait HTTP/1.1\r\nHost: t\r\n\r\n";

/// Another client is answered at once: the worker was not held up.
fn served(h: &ServerHandle) {
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /wait?0 HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response_for("GET").expect("an answer");
    assert_eq!((r.status, r.body_str()), (200, "done"));
}

#[test]
fn a_client_that_closes_while_its_handler_works_has_the_handler_dropped() {
    let (h, counts) = start(config());
    let mut s = TcpStream::connect(h.local_addr()).unwrap();
    s.write_all(WAIT).unwrap();
    counts.wait_for("the handler started", |(started, _, _)| started == 1);
    drop(s);
    counts.wait_for("the handler was dropped", |(_, _, dropped)| dropped == 1);
    served(&h);
    assert_eq!(counts.get(), (2, 1, 1));
    h.shutdown();
}

#[test]
fn a_half_close_is_a_client_that_left_by_default() {
    let (h, counts) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(WAIT);
    c.stream.shutdown(Shutdown::Write).unwrap();
    counts.wait_for("the handler was dropped", |(_, _, dropped)| dropped == 1);
    assert!(
        c.read_response_for("GET").is_none(),
        "closed without an answer"
    );
    assert_eq!(counts.get(), (1, 0, 1));
    h.shutdown();
}

#[test]
fn with_half_close_a_half_closed_client_gets_its_answer() {
    let (h, counts) = start(ServerConfig {
        half_close: true,
        ..config()
    });
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /wait?300 HTTP/1.1\r\nHost: t\r\n\r\n");
    c.stream.shutdown(Shutdown::Write).unwrap();
    let r = c.read_response_for("GET").expect("the answer");
    assert_eq!((r.status, r.body_str()), (200, "done"));
    let mut rest = Vec::new();
    c.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "then the close");
    assert_eq!(counts.get(), (1, 1, 0));
    h.shutdown();
}

#[test]
fn answers_before_the_pending_one_are_still_sent() {
    let (h, counts) = start(config());
    let mut c = Client::new(h.local_addr());
    let mut batch = b"GET /wait?0 HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
    batch.extend_from_slice(WAIT);
    c.send(&batch);
    c.stream.shutdown(Shutdown::Write).unwrap();
    let r = c.read_response_for("GET").expect("the first answer");
    assert_eq!((r.status, r.body_str()), (200, "done"));
    assert!(c.read_response_for("GET").is_none(), "then the close");
    counts.wait_for("the second handler was dropped", |(_, _, d)| d == 1);
    assert_eq!(counts.get(), (2, 1, 1));
    h.shutdown();
}

#[test]
fn a_client_that_keeps_sending_while_its_handler_works_is_not_cut() {
    // Pipelined requests arriving while the first handler works are read (the watch for the
    // close reads them) and answered in order afterwards.
    let (h, counts) = start(config());
    let mut c = Client::new(h.local_addr());
    c.send(b"GET /wait?300 HTTP/1.1\r\nHost: t\r\n\r\n");
    counts.wait_for("the handler started", |(started, _, _)| started == 1);
    for _ in 0..3 {
        c.send(b"GET /wait?0 HTTP/1.1\r\nHost: t\r\n\r\n");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..4 {
        let r = c.read_response_for("GET").expect("an answer");
        assert_eq!((r.status, r.body_str()), (200, "done"));
    }
    assert_eq!(counts.get(), (4, 4, 0));
    h.shutdown();
}
