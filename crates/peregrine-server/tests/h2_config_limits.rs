//! `ServerConfig` limits that HTTP/2 honours as HTTP/1.1 does, over a real socket with the h2
//! crate's client: `body_min_rate` (after `body_rate_grace`) and `body_total_timeout` bound a
//! request body that trickles in under `body_timeout`; `max_requests_per_connection` ends the
//! connection with a graceful GOAWAY.
#![cfg(feature = "http2")]

mod common;
mod h2_support;

use bytes::Bytes;
use h2_support::{app, client, fetch, get, start};
use peregrine_server::h2::Http2Config;
use peregrine_server::ServerConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sends a POST to `/echo` whose body comes one byte every `every`, for at most `bytes`
/// bytes; the response status and how long it took.
async fn trickle(addr: std::net::SocketAddr, every: Duration, bytes: usize) -> (u16, Duration) {
    let send = client(addr).await;
    let mut send = send.ready().await.unwrap();
    let req = http::Request::post("http://localhost/echo")
        .body(())
        .unwrap();
    let start = Instant::now();
    let (resp, mut body) = send.send_request(req, false).unwrap();
    let feeder = tokio::spawn(async move {
        for _ in 0..bytes {
            body.reserve_capacity(1);
            tokio::time::sleep(every).await;
            if body.send_data(Bytes::from_static(b"x"), false).is_err() {
                return;
            }
        }
        let _ = body.send_data(Bytes::new(), true);
    });
    let resp = tokio::time::timeout(Duration::from_secs(20), resp)
        .await
        .expect("an answer within 20 s")
        .unwrap();
    feeder.abort();
    (resp.status().as_u16(), start.elapsed())
}

/// One byte every 200 ms is 5 B/s: within `body_timeout` (10 s) at every wait, but under a
/// `body_min_rate` of 1000 B/s, so the body times out after the 1 s grace (408), long before
/// its 40 bytes would have taken 8 s.
#[tokio::test]
async fn a_trickling_request_body_is_bounded_by_the_minimum_rate() {
    let cfg = ServerConfig::builder()
        .body_timeout(Duration::from_secs(10))
        .body_min_rate(1000)
        .body_rate_grace(Duration::from_secs(1))
        .build();
    let srv = start(app(Arc::default()), cfg, Http2Config::default());
    let (status, took) = trickle(srv.addr, Duration::from_millis(200), 40).await;
    assert_eq!(status, 408, "after {took:?}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
}

/// With the rate check off, `body_total_timeout` (1 s) still ends the same trickle.
#[tokio::test]
async fn a_trickling_request_body_is_bounded_by_the_total_timeout() {
    let cfg = ServerConfig::builder()
        .body_timeout(Duration::from_secs(10))
        .body_min_rate(0)
        .body_total_timeout(Duration::from_secs(1))
        .build();
    let srv = start(app(Arc::default()), cfg, Http2Config::default());
    let (status, took) = trickle(srv.addr, Duration::from_millis(200), 40).await;
    assert_eq!(status, 408, "after {took:?}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
}

/// A body that comes at a fair pace is read whole under the same rules.
#[tokio::test]
async fn a_body_at_a_fair_pace_is_read_whole() {
    let cfg = ServerConfig::builder()
        .body_min_rate(1000)
        .body_rate_grace(Duration::from_secs(1))
        .body_total_timeout(Duration::from_secs(10))
        .build();
    let srv = start(app(Arc::default()), cfg, Http2Config::default());
    let (status, _) = trickle(srv.addr, Duration::from_millis(20), 10).await;
    assert_eq!(status, 200);
}

/// After `max_requests_per_connection` streams the connection gets a graceful GOAWAY and ends
/// once they are answered; a new connection is served.
#[tokio::test]
async fn max_requests_per_connection_ends_the_connection_gracefully() {
    let cfg = ServerConfig::builder()
        .max_requests_per_connection(Some(3))
        .build();
    let srv = start(app(Arc::default()), cfg, Http2Config::default());
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let (mut send, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(conn);
    for _ in 0..3 {
        let (status, _, _) = fetch(&mut send, get("/hello"), None).await.unwrap();
        assert_eq!(status, 200);
    }
    let ended = tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("the connection ends after its 3 requests")
        .unwrap();
    assert!(
        match &ended {
            Ok(()) => true,
            Err(e) => e.reason() == Some(h2::Reason::NO_ERROR),
        },
        "{ended:?}"
    );
    assert!(fetch(&mut send, get("/hello"), None).await.is_err());
    let mut other = client(srv.addr).await;
    let (status, _, _) = fetch(&mut other, get("/hello"), None).await.unwrap();
    assert_eq!(status, 200);
}

/// An endless streamed body of 64 KiB chunks, counting the chunks the server pulled and, in
/// the second counter, the bodies dropped.
struct Endless(
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicUsize>,
);

impl Drop for Endless {
    fn drop(&mut self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl futures_core::Stream for Endless {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::task::Poll::Ready(Some(Ok(Bytes::from(vec![b's'; 64 * 1024]))))
    }
}

/// 20 streams whose client gives no window: the server pulls from the handlers' streams only
/// while less than `max_pending_output` (256 KiB) waits unsent on the connection, so 4 or 5
/// chunks of 64 KiB, not one per stream (20). When the client resets them all, the streams
/// waiting for room end at once, without pulling more.
#[tokio::test]
async fn bytes_pulled_from_handlers_are_capped_by_max_pending_output() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let pulled = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (counter, drops) = (pulled.clone(), dropped.clone());
    let service = peregrine_server::service_fn(move |_req: peregrine_server::Request| {
        let (counter, drops) = (counter.clone(), drops.clone());
        async move {
            peregrine_server::Response::new(200).with_body(peregrine_server::ResponseBody::Stream(
                Box::pin(Endless(counter, drops)),
            ))
        }
    });
    let cfg = ServerConfig::builder()
        .max_pending_output(256 * 1024)
        .write_timeout(Duration::from_secs(30))
        .build();
    let srv = start(service, cfg, Http2Config::default());
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut heads = Vec::new();
    for _ in 0..20 {
        let mut send = send.clone().ready().await.unwrap();
        let (resp, _) = send.send_request(get("/endless"), true).unwrap();
        heads.push(resp);
    }
    // Kept: a response dropped by the client resets its stream, which frees its bytes.
    let mut open = Vec::new();
    for resp in heads {
        let resp = tokio::time::timeout(Duration::from_secs(10), resp)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), 200);
        open.push(resp);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = pulled.load(Ordering::SeqCst);
    assert!((4..=5).contains(&n), "{n} chunks pulled");
    // Dropped responses: the client resets every stream.
    drop(open);
    let since = Instant::now();
    while dropped.load(Ordering::SeqCst) < 20 && since.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 20, "bodies dropped");
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        n,
        "chunks pulled after the resets"
    );
}
