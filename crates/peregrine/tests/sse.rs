//! Server-sent events: keep-alive comments while idle, and the end of the stream when the
//! client goes.

mod common;
use common::TestServer;
use peregrine::sse::{Event, Sse};
use peregrine::{get, App, Request};
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn keep_alive_comments_fill_the_silence() {
    let c = App::new()
        .route(
            "/events",
            get(|_r: Request| async {
                let (tx, sse) = Sse::channel(4);
                tokio::task::spawn_local(async move {
                    tx.send(Event::data("first")).await.unwrap();
                    // Silence for 35 s (paused clock): two keep-alives at 15 s and 30 s.
                    tokio::time::sleep(Duration::from_secs(35)).await;
                    tx.send(Event::data("second").event("late")).await.unwrap();
                });
                sse
            }),
        )
        .test();
    let r = c.get("/events").send().await;
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(
        r.text(),
        "data: first\n\n: keep-alive\n\n: keep-alive\n\nevent: late\ndata: second\n\n"
    );
}

#[test]
fn the_stream_ends_when_the_client_goes() {
    let gone = Arc::new(AtomicBool::new(false));
    let g = gone.clone();
    let app = App::new().route(
        "/events",
        get(move |_r: Request| {
            let g = g.clone();
            async move {
                let (tx, sse) = Sse::channel(1);
                tokio::task::spawn_local(async move {
                    for i in 0u64.. {
                        if tx.send(Event::data(i.to_string())).await.is_err() {
                            g.store(true, Ordering::SeqCst);
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
                sse.keep_alive(None)
            }
        }),
    );
    let s = TestServer::start(app);
    let mut conn = std::net::TcpStream::connect(s.addr).unwrap();
    conn.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut seen = 0;
    let mut line = String::new();
    while seen < 3 {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line.starts_with("data: ") {
            seen += 1;
        }
    }
    drop(r);
    conn.shutdown(std::net::Shutdown::Both).unwrap();
    drop(conn);
    for _ in 0..400 {
        if gone.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the producer never saw the client go");
}
