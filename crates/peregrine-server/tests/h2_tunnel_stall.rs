//! An RFC 8441 tunnel (WebSocket over HTTP/2) whose client gives no window: the handler's
//! writes wait within the write timeout, then the stream is reset (`CANCEL`) and the write
//! fails with `TimedOut`, instead of the tunnel waiting forever. Real socket, h2c and TLS, the
//! h2 crate's client.
#![cfg(all(feature = "tls", feature = "http2"))]

mod common;
mod h2_limits_support;
mod tls_support;

use h2_limits_support::{config, connect, serve, Via};
use peregrine_server::h2::Http2Config;
use peregrine_server::upgrade::Upgraded;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Service};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// Every request switches to a tunnel that writes until a write fails; the failure's kind is
/// kept in `failed`.
fn app(failed: Arc<Mutex<Option<std::io::ErrorKind>>>) -> impl Service {
    service_fn(move |_req: Request| {
        let failed = failed.clone();
        async move {
            let run = move |mut io: Upgraded| -> Pin<Box<dyn Future<Output = ()>>> {
                Box::pin(async move {
                    let piece = vec![b'w'; 16 * 1024];
                    loop {
                        if let Err(e) = io.write_all(&piece).await {
                            *failed.lock().unwrap() = Some(e.kind());
                            return;
                        }
                    }
                })
            };
            Response::new(101).with_body(ResponseBody::Upgrade(Box::new(run)))
        }
    })
}

async fn tunnel_stalls(via: Via) {
    let failed = Arc::new(Mutex::new(None));
    let write_timeout = Duration::from_secs(1);
    let cfg = config(
        write_timeout,
        Duration::from_secs(60),
        Http2Config::default(),
    );
    let srv = serve(via, cfg, app(failed.clone()));
    let mut zero = h2::client::Builder::new();
    zero.initial_window_size(0);
    let (mut send, _conn) = connect(&srv, &zero).await;
    for _ in 0..100 {
        if send.is_extended_connect_protocol_enabled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        send = send.ready().await.unwrap();
    }
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri("https://localhost/ws")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let start = Instant::now();
    let (resp, _stream) = send.send_request(req, false).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200, "{via:?}: the tunnel opens");
    let mut body = resp.into_body();
    let end = tokio::time::timeout(Duration::from_secs(10), body.data())
        .await
        .unwrap_or_else(|_| panic!("{via:?}: the stalled tunnel is still open after 10 s"));
    let took = start.elapsed();
    let reason = match end {
        Some(Err(e)) => e.reason(),
        other => panic!("{via:?}: {other:?}"),
    };
    assert_eq!(reason, Some(h2::Reason::CANCEL), "{via:?}");
    assert!(took < write_timeout * 5, "{via:?}: reset after {took:?}");
    // The handler's write failed as a timed-out write does.
    let waited = Instant::now();
    while failed.lock().unwrap().is_none() && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*failed.lock().unwrap(), Some(std::io::ErrorKind::TimedOut));
    srv.stop().await;
}

#[tokio::test]
async fn a_tunnel_the_client_gives_no_window_is_reset_after_the_write_timeout_h2c() {
    tunnel_stalls(Via::H2c).await;
}

#[tokio::test]
async fn a_tunnel_the_client_gives_no_window_is_reset_after_the_write_timeout_tls() {
    tunnel_stalls(Via::Tls).await;
}
