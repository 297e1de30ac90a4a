//! Extended CONNECT over HTTP/3 (RFC 9220's mechanism) from the h3 crate's client over quinn:
//! the request reaches the service as over HTTP/2, a 101 upgrade gets `200` and the stream as
//! its connection, each side's FIN is its half-close, a client that takes nothing is reset after
//! the write timeout, graceful shutdown reaches the tunnel; and a request HTTP/3 calls malformed
//! (a connection-specific field) cannot pass for an upgrade.
//! The client's `:protocol` is `connect-udp`: h3 0.0.8 parses no other value but
//! `webtransport` (not `websocket`, see docs/protocols.md).
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;

use bytes::{Buf, Bytes};
use h3_support::{connect, serve};
use peregrine_server::h3::Http3Config;
use peregrine_server::upgrade::{OnUpgrade, Upgraded};
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(10);

type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Echoes every byte until the client's FIN, then says `bye` and ends its side; on graceful
/// shutdown it says `shutdown` and ends instead.
fn echo() -> OnUpgrade {
    Box::new(|mut io: Upgraded| {
        Box::pin(async move {
            let signal = io.shutdown_signal();
            let mut buf = vec![0u8; 4096];
            loop {
                let n = tokio::select! {
                    n = io.read(&mut buf) => n,
                    () = signal.started() => {
                        let _ = io.write_all(b"shutdown").await;
                        break;
                    }
                };
                match n {
                    Ok(0) => {
                        let _ = io.write_all(b"bye").await;
                        break;
                    }
                    Ok(n) if io.write_all(&buf[..n]).await.is_ok() => {}
                    _ => return,
                }
            }
            let _ = io.shutdown().await;
        })
    })
}

/// What the service saw: its requests, and how the flooding tunnel's writing ended.
#[derive(Default)]
struct Seen {
    calls: AtomicUsize,
    write_error: Mutex<Option<std::io::ErrorKind>>,
}

/// Writes until a write fails, and records why.
fn flood(seen: Arc<Seen>) -> OnUpgrade {
    Box::new(move |mut io: Upgraded| {
        Box::pin(async move {
            let piece = vec![7u8; 64 * 1024];
            let error = loop {
                if let Err(e) = io.write_all(&piece).await {
                    break e;
                }
            };
            *seen.write_error.lock().unwrap() = Some(error.kind());
        })
    })
}

/// `/tunnel` switches to the echo, with what the handler saw in `x-seen`; `/flood` to the
/// writer that never stops; `/plain` answers 200 without switching; anything else 404.
fn start(extended_connect: bool, write_timeout: Duration, seen: Arc<Seen>) -> h3_support::Running {
    let config = ServerConfig::builder()
        .workers(1)
        .write_timeout(write_timeout)
        .http3(Http3Config {
            extended_connect,
            ..Http3Config::default()
        })
        .build();
    serve(
        config,
        service_fn(move |req: Request| {
            seen.calls.fetch_add(1, Ordering::SeqCst);
            let described = format!(
                "{:?} {} {} {}",
                req.version(),
                req.method(),
                req.target(),
                req.header("upgrade")
                    .map_or("-".into(), String::from_utf8_lossy)
            );
            let seen = seen.clone();
            async move {
                match req.path() {
                    "/tunnel" => Response::new(101)
                        .with_header("x-seen", described.into_bytes())
                        .with_body(ResponseBody::Upgrade(echo())),
                    "/flood" => Response::new(101).with_body(ResponseBody::Upgrade(flood(seen))),
                    "/plain" => Response::text("not a tunnel"),
                    _ => Response::new(404),
                }
            }
        }),
    )
}

/// Sends an extended CONNECT for `path` (`:protocol connect-udp`); its stream and response.
async fn extended_connect(
    client: &mut h3_support::Client,
    path: &str,
) -> (Stream, http::Response<()>) {
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    req.extensions_mut().insert(h3::ext::Protocol::CONNECT_UDP);
    let mut stream = client.send.send_request(req).await.unwrap();
    let response = tokio::time::timeout(WAIT, stream.recv_response())
        .await
        .unwrap()
        .unwrap();
    (stream, response)
}

/// Reads DATA until `want` bytes came, or the stream's end.
async fn read(stream: &mut Stream, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < want {
        let next = tokio::time::timeout(WAIT, stream.recv_data())
            .await
            .unwrap();
        let Some(mut data) = next.unwrap() else { break };
        got.extend_from_slice(&data.copy_to_bytes(data.remaining()));
    }
    got
}

#[tokio::test]
async fn a_101_upgrade_opens_a_tunnel_whose_fins_are_half_closes() {
    let server = start(true, WAIT, Arc::default());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let (mut stream, response) = extended_connect(&mut client, "/tunnel?room=1").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-seen"],
        "Http3 GET /tunnel?room=1 connect-udp"
    );
    // Tunnel bytes are no body of known length.
    assert!(response.headers().get("content-length").is_none());
    stream
        .send_data(Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(read(&mut stream, 5).await, b"hello");
    // More than one write of the tunnel and than the stream's first window, both ways.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (mut send, mut recv) = stream.split();
    let sender = async {
        for piece in big.chunks(16 * 1024) {
            send.send_data(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        // The client's half-close: the handler reads the end, answers, ends its side.
        send.finish().await.unwrap();
    };
    let reader = async {
        let mut got = Vec::new();
        while let Some(mut data) = tokio::time::timeout(WAIT, recv.recv_data())
            .await
            .unwrap()
            .unwrap()
        {
            got.extend_from_slice(&data.copy_to_bytes(data.remaining()));
        }
        got
    };
    let ((), got) = tokio::join!(sender, reader);
    assert_eq!(got.len(), big.len() + 3);
    assert!(got[..big.len()] == big[..], "echoed in order");
    assert_eq!(&got[big.len()..], b"bye", "then the server's FIN");
    server.handle.shutdown();
}

#[tokio::test]
async fn graceful_shutdown_reaches_the_tunnel() {
    let server = start(true, WAIT, Arc::default());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let (mut stream, response) = extended_connect(&mut client, "/tunnel").await;
    assert_eq!(response.status(), 200);
    stream.send_data(Bytes::from_static(b"ping")).await.unwrap();
    assert_eq!(read(&mut stream, 4).await, b"ping");
    let handle = server.handle;
    let stopping = tokio::task::spawn_blocking(move || handle.shutdown());
    // The handler hears of the shutdown, says so and ends the stream (no reset, no cut).
    assert_eq!(read(&mut stream, usize::MAX).await, b"shutdown");
    tokio::time::timeout(WAIT, stopping).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_client_that_takes_nothing_fails_the_tunnels_write_after_the_write_timeout() {
    let seen = Arc::new(Seen::default());
    let server = start(true, Duration::from_millis(300), seen.clone());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    // The client reads nothing: QUIC's flow control stops the writer once the windows fill.
    let (mut stream, response) = extended_connect(&mut client, "/flood").await;
    assert_eq!(response.status(), 200);
    let deadline = tokio::time::Instant::now() + WAIT;
    let kind = loop {
        if let Some(kind) = *seen.write_error.lock().unwrap() {
            break kind;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the write never failed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(kind, std::io::ErrorKind::TimedOut);
    // The stream was reset: what the client then reads ends in an error, not a clean end.
    let mut ended = Ok(());
    while ended.is_ok() {
        match tokio::time::timeout(WAIT, stream.recv_data())
            .await
            .unwrap()
        {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a stalled tunnel ends with a reset, not a FIN"),
            Err(e) => ended = Err(e),
        }
    }
    server.handle.shutdown();
}

#[tokio::test]
async fn answers_that_open_no_tunnel_are_sent_as_over_http2() {
    let server = start(true, WAIT, Arc::default());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    // A 2xx without switching protocols would look like an open tunnel: 501.
    let (_, response) = extended_connect(&mut client, "/plain").await;
    assert_eq!(response.status(), 501);
    let (_, response) = extended_connect(&mut client, "/nowhere").await;
    assert_eq!(response.status(), 404);
    // A plain GET of the tunnel's route has no `Upgrade`.
    let reply = client.request("GET", "/plain", &[], b"").await.unwrap();
    assert_eq!(reply.status, 200);
    server.handle.shutdown();
}

#[tokio::test]
async fn without_extended_connect_a_protocol_is_malformed() {
    let seen = Arc::new(Seen::default());
    let server = start(false, WAIT, seen.clone());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let (_, response) = extended_connect(&mut client, "/tunnel").await;
    assert_eq!(response.status(), 400);
    assert_eq!(
        seen.calls.load(Ordering::SeqCst),
        0,
        "the service never saw it"
    );
    server.handle.shutdown();
}

#[tokio::test]
async fn connection_specific_fields_are_malformed() {
    let seen = Arc::new(Seen::default());
    let server = start(true, WAIT, seen.clone());
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    // `Upgrade` cannot come from a client over HTTP/3 (RFC 9114 §4.2), only from a CONNECT.
    for field in [
        ("upgrade", "connect-udp"),
        ("connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("keep-alive", "timeout=5"),
        ("te", "gzip"),
    ] {
        let reply = client.request("GET", "/tunnel", &[field], b"").await;
        assert_eq!(reply.unwrap().status, 400, "{field:?}");
    }
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
    // `TE: trailers` is the one allowed.
    let reply = client.request("GET", "/plain", &[("te", "trailers")], b"");
    assert_eq!(reply.await.unwrap().status, 200);
    server.handle.shutdown();
}
