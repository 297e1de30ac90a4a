//! The handler's future through real sockets: each worker reuses the boxes of completed futures,
//! so what follows checks what that must not change: what a future captured is dropped when it
//! answers, futures of different sizes and handlers that wait share a worker, extractor
//! rejections answer, and a panic answers 500 and the worker goes on.

mod common;
use common::TestServer;
use peregrine::{get, App, Error, Request, State};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts its drops.
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Drops(Arc<AtomicUsize>);

fn app(drops: Arc<AtomicUsize>) -> App {
    let captured = drops.clone();
    App::new()
        .with_state(Drops(drops))
        // The future owns a guard (an upvar of the async block) until it completes.
        .route(
            "/guard",
            get(move |_req: Request| {
                let g = Guard(captured.clone());
                async move {
                    let _g = g;
                    "guarded"
                }
            }),
        )
        // A large future (a 4 KiB buffer across an await) and one that waits on a timer.
        .route(
            "/big",
            get(|_req: Request| async {
                let buf = [b'x'; 4096];
                tokio::task::yield_now().await;
                buf.iter().filter(|&&b| b == b'x').count().to_string()
            }),
        )
        .route(
            "/sleep/{ms}",
            get(|req: Request| async move {
                let ms: u64 = req.param("ms")?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Error>(format!("slept {ms}"))
            }),
        )
        // An extractor handler: its future goes through the same pool.
        .route(
            "/state",
            get(|_req: Request, State(d): State<Drops>| async move {
                d.0.load(Ordering::SeqCst).to_string()
            }),
        )
        .route(
            "/panic",
            get(|_req: Request| async {
                if true {
                    panic!("handler bug");
                }
                "never"
            }),
        )
}

fn start(drops: &Arc<AtomicUsize>) -> TestServer {
    TestServer::start(app(drops.clone()))
}

#[test]
fn what_a_future_captured_is_dropped_when_it_answers() {
    let drops = Arc::new(AtomicUsize::new(0));
    let srv = start(&drops);
    for i in 1..=5 {
        let r = srv.get("/guard", &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "guarded");
        // The answer is on the wire only after the future completed, and completing dropped
        // the guard: a pooled box keeps nothing alive.
        assert_eq!(drops.load(Ordering::SeqCst), i);
    }
}

#[test]
fn futures_of_every_size_and_pace_share_one_worker() {
    let drops = Arc::new(AtomicUsize::new(0));
    let srv = start(&drops);
    let mut conn = srv.connect();
    for round in 0..20 {
        for (path, want) in [
            ("/guard", "guarded".to_string()),
            ("/big", "4096".to_string()),
            ("/sleep/1", "slept 1".to_string()),
            ("/state", (round + 1).to_string()),
        ] {
            conn.write(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = conn.read(false);
            assert_eq!(
                (r.status, r.text()),
                (200, want.as_str()),
                "{path} in round {round}"
            );
        }
    }
    // Pipelined: the four answers in order on one write.
    let batch: String = ["/big", "/guard", "/sleep/2", "/big"]
        .iter()
        .map(|p| format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n"))
        .collect();
    conn.write(batch.as_bytes());
    for want in ["4096", "guarded", "slept 2", "4096"] {
        assert_eq!(conn.read(false).text(), want);
    }
}

#[test]
fn a_rejection_and_a_panic_answer_and_the_worker_goes_on() {
    let drops = Arc::new(AtomicUsize::new(0));
    let srv = start(&drops);
    let r = srv.get("/sleep/abc", &[]);
    r.assert_problem(400, "Bad Request");
    let r = srv.get("/panic", &[]);
    assert_eq!(r.status, 500);
    for _ in 0..3 {
        assert_eq!(srv.get("/guard", &[]).text(), "guarded");
        assert_eq!(srv.get("/big", &[]).text(), "4096");
    }
}
