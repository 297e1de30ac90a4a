//! A shutdown (a rolling restart's drain) that finds a client halfway through a request head:
//! the server stops waiting for the rest and answers 408 with `Connection: close` at once,
//! told to the engine's listener exactly once (the access log's line for that request),
//! instead of holding the connection until the shutdown timeout and closing it unanswered.

mod common;
use common::{config, service, Calls, Client};
use peregrine_server::events::{EngineEvents, Rejection};
use peregrine_server::{Server, ServerConfigBuilder};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The rejections the engine reported: status, client, detail.
#[derive(Default)]
struct Rejections(Mutex<Vec<(u16, SocketAddr, String)>>);

impl EngineEvents for Rejections {
    fn rejected(&self, ev: &Rejection<'_>) {
        let mut seen = self.0.lock().unwrap();
        seen.push((ev.status, ev.peer, ev.detail.to_owned()));
    }
}

#[test]
fn a_half_head_at_shutdown_is_answered_408_at_once_and_reported_once() {
    let rejections = Arc::new(Rejections::default());
    // Both far longer than the test: neither may be what ends the wait.
    let cfg = ServerConfigBuilder::from(config())
        .header_timeout(Duration::from_secs(60))
        .shutdown_timeout(Duration::from_secs(60))
        .build();
    let handle = Server::new(cfg)
        .with_events(rejections.clone())
        .serve(service(Calls::default()))
        .unwrap();
    let mut half = Client::new(handle.local_addr());
    let mut whole = Client::new(handle.local_addr());
    half.send(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n");
    whole.send(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(whole.read_response().status, 200);
    // Let the half head reach the server before it stops.
    std::thread::sleep(Duration::from_millis(100));
    let client = half.stream.local_addr().unwrap();

    let started = Instant::now();
    let stopper = std::thread::spawn(move || handle.shutdown());
    let r = half.read_response();
    assert_eq!(
        (r.status, r.body_str()),
        (408, "request head incomplete at shutdown\n")
    );
    assert!(r.closes(), "the 408 says Connection: close");
    assert!(half.at_eof());
    assert!(whole.at_eof(), "the idle connection is closed");
    stopper.join().unwrap();
    // A guard, not a measurement: the drain did not wait for either 60 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let seen = rejections.0.lock().unwrap();
    let mine: Vec<_> = seen.iter().filter(|(_, peer, _)| *peer == client).collect();
    assert_eq!(
        mine,
        [&(
            408,
            client,
            "request head incomplete at shutdown".to_owned()
        )],
        "one report of the 408 for the half request: {seen:?}"
    );
}
