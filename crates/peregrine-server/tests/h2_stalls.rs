//! HTTP/2 clients that do not take what they asked for, over real sockets (h2c and TLS) with
//! the h2 crate's client: streams stalled by a zero window (file, in-memory and endless
//! streamed bodies, the last as an SSE stream is) are reset and the connection closed
//! within the write timeout, their bodies freed; a stalled stream does not keep a connection
//! alive past the idle timeout; a socket that takes nothing is closed within the write
//! timeout.
#![cfg(all(feature = "tls", feature = "http2"))]

mod common;
mod h2_limits_support;
mod h2_support;
mod tls_support;

use bytes::Bytes;
use h2_limits_support::{
    config, connect, fetch, request, serve, stream_end, whole_file, TempFile, Via,
};
use peregrine_server::h2::{Closed, Http2Config};
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig, Service};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: usize = 1024 * 1024;

/// An 8 MiB body that counts its own drop, so a test sees when the server let it go.
struct Counted {
    data: Arc<Vec<u8>>,
    dropped: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// An endless streamed body (as an SSE stream is), in 64 KiB chunks.
struct Endless;

impl futures_core::Stream for Endless {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(Some(Ok(Bytes::from(vec![b's'; 64 * 1024]))))
    }
}

/// `/file`: the whole file as `ResponseBody::File`; `/full`: an 8 MiB `Full` body whose drop is
/// counted in `dropped`; `/stream`: an endless `Stream` body; `/wait`: 204 after 2.5 s;
/// `/hello`: a short text.
fn app(file: Arc<PathBuf>, dropped: Arc<AtomicUsize>) -> impl Service {
    let shared = Arc::new(vec![7u8; 8 * MIB]);
    service_fn(move |req: Request| {
        let (file, dropped, shared) = (file.clone(), dropped.clone(), shared.clone());
        async move {
            match req.path() {
                "/file" => whole_file(&file),
                "/full" => {
                    let body = Bytes::from_owner(Counted {
                        data: shared,
                        dropped,
                    });
                    Response::new(200).with_body(ResponseBody::Full(body))
                }
                "/stream" => Response::new(200).with_body(ResponseBody::Stream(Box::pin(Endless))),
                "/wait" => {
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    Response::new(204)
                }
                _ => Response::text("hello"),
            }
        }
    })
}

/// A client whose streams never get a byte of window.
fn zero_window() -> h2::client::Builder {
    let mut b = h2::client::Builder::new();
    b.initial_window_size(0);
    b
}

/// 100 streams on one zero-window connection: each is reset, or the connection GOAWAY'd,
/// after the write timeout (1 s) and well before twice the test's patience.
async fn stalls_end_within_the_write_timeout(via: Via, path: &str) {
    let file = TempFile::new("stall", 8 * MIB);
    let dropped = Arc::new(AtomicUsize::new(0));
    let write_timeout = Duration::from_secs(1);
    let cfg = config(
        write_timeout,
        Duration::from_secs(60),
        Http2Config::default(),
    );
    let srv = serve(via, cfg, app(Arc::new(file.path.clone()), dropped.clone()));
    let (send, conn) = connect(&srv, &zero_window()).await;
    let start = Instant::now();
    let mut waits = Vec::new();
    for _ in 0..100 {
        let mut send = send.clone().ready().await.unwrap();
        let (resp, _) = send.send_request(request("GET", path), true).unwrap();
        waits.push(tokio::spawn(stream_end(resp)));
    }
    for w in waits {
        let end = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap_or_else(|_| {
                panic!("{via:?} {path}: a zero-window stream still open after 10 s")
            })
            .unwrap();
        assert!(end.by_server(), "{via:?} {path}: a stream ended {end:?}");
    }
    let took = start.elapsed();
    assert!(
        took >= write_timeout - Duration::from_millis(100) && took < write_timeout * 5,
        "{via:?} {path}: ended after {took:?}"
    );
    // No stream moved, so the whole connection was stalled: GOAWAY(ENHANCE_YOUR_CALM).
    let outcome = tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("the connection ends")
        .unwrap();
    let reason = outcome.err().and_then(|e| e.reason());
    assert_eq!(
        reason,
        Some(h2::Reason::ENHANCE_YOUR_CALM),
        "{via:?} {path}"
    );
    if path == "/full" {
        // Every response body held for the stalled streams is freed.
        let freed = Instant::now();
        while dropped.load(Ordering::SeqCst) < 100 && freed.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 100, "{via:?}: bodies freed");
    }
    // The worker serves the next client.
    let (send, _conn) = connect(&srv, &h2::client::Builder::new()).await;
    let (status, _, body, _) = fetch(&send, "GET", "/hello").await.unwrap();
    assert_eq!((status, &body[..]), (200, &b"hello"[..]));
    srv.stop().await;
}

#[tokio::test]
async fn zero_window_file_streams_are_reset_within_the_write_timeout_h2c() {
    stalls_end_within_the_write_timeout(Via::H2c, "/file").await;
}

#[tokio::test]
async fn zero_window_file_streams_are_reset_within_the_write_timeout_tls() {
    stalls_end_within_the_write_timeout(Via::Tls, "/file").await;
}

#[tokio::test]
async fn zero_window_streamed_bodies_are_reset_within_the_write_timeout_h2c() {
    stalls_end_within_the_write_timeout(Via::H2c, "/stream").await;
}

#[tokio::test]
async fn zero_window_streamed_bodies_are_reset_within_the_write_timeout_tls() {
    stalls_end_within_the_write_timeout(Via::Tls, "/stream").await;
}

#[tokio::test]
async fn zero_window_full_streams_are_reset_and_freed_within_the_write_timeout_h2c() {
    stalls_end_within_the_write_timeout(Via::H2c, "/full").await;
}

#[tokio::test]
async fn zero_window_full_streams_are_reset_and_freed_within_the_write_timeout_tls() {
    stalls_end_within_the_write_timeout(Via::Tls, "/full").await;
}

/// A stream stalled on flow control is not activity: with a write timeout far away (60 s), the
/// connection still ends at the idle timeout (1 s).
async fn stalled_stream_idles_out(via: Via) {
    let file = TempFile::new("idle", 8 * MIB);
    let idle = Duration::from_secs(1);
    let cfg = config(Duration::from_secs(60), idle, Http2Config::default());
    let srv = serve(via, cfg, app(Arc::new(file.path.clone()), Arc::default()));
    let (mut send, conn) = connect(&srv, &zero_window()).await;
    let start = Instant::now();
    let (resp, _) = send.send_request(request("GET", "/full"), true).unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), stream_end(resp))
        .await
        .unwrap_or_else(|_| panic!("{via:?}: the stalled connection is still open after 10 s"));
    let took = start.elapsed();
    assert!(
        took >= idle - Duration::from_millis(100) && took < idle * 5,
        "{via:?}: ended after {took:?} ({end:?})"
    );
    assert!(end.by_server(), "{via:?}: the stream ended {end:?}");
    let outcome = tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("the connection ends")
        .unwrap();
    // GOAWAY(NO_ERROR): the connection idled out, no error on either side.
    assert!(
        match &outcome {
            Ok(()) => true,
            Err(e) => e.reason() == Some(h2::Reason::NO_ERROR),
        },
        "{via:?}: {outcome:?}"
    );
    srv.stop().await;
}

#[tokio::test]
async fn a_stalled_stream_does_not_keep_the_connection_past_the_idle_timeout_h2c() {
    stalled_stream_idles_out(Via::H2c).await;
}

#[tokio::test]
async fn a_stalled_stream_does_not_keep_the_connection_past_the_idle_timeout_tls() {
    stalled_stream_idles_out(Via::Tls).await;
}

/// A client that opens every window wide and then reads nothing from its socket: once the
/// kernel's buffers are full the socket refuses writes, and the connection is closed after
/// the write timeout (`Closed::Stalled`) instead of holding the response forever.
#[tokio::test]
async fn a_socket_that_takes_nothing_is_closed_after_the_write_timeout() {
    use h2_support::{frame, get_block, start, END_HEADERS, END_STREAM, HEADERS, SETTINGS};
    let dir = tls_support::temp_dir("sockstall");
    let path = dir.join("big.bin");
    // Sparse: 256 MiB of zeros that cost no disk, more than any loopback buffers hold.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(256 * MIB as u64)
        .unwrap();
    let cfg = ServerConfig::builder()
        .write_timeout(Duration::from_secs(1))
        .build();
    let srv = start(
        app(Arc::new(path.clone()), Arc::default()),
        cfg,
        Http2Config::default(),
    );
    let mut tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let mut out = peregrine_server::h2::PREFACE.to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE = 2^31-1, and the connection window as wide.
    out.extend(frame(SETTINGS, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
    out.extend(frame(0x8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
    out.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &get_block("/file"),
    ));
    tcp.write_all(&out).await.unwrap();
    let start_at = Instant::now();
    let closed = tokio::task::spawn_blocking(move || {
        let c = srv.next_closed();
        (c, srv)
    })
    .await
    .unwrap();
    let took = start_at.elapsed();
    assert_eq!(closed.0, Closed::Stalled, "after {took:?}");
    assert!(took < Duration::from_secs(6), "closed after {took:?}");
    // What the kernel held is readable, then the connection ends well short of the body.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        got += n;
    }
    assert!(got < 256 * MIB, "read {got} bytes");
    let _ = std::fs::remove_file(&path);
}

/// One stalled stream next to one whose handler still runs: only the stalled stream is reset
/// (after the 1 s write timeout); the other is answered at 2.5 s and the connection serves on.
#[tokio::test]
async fn a_stalled_stream_is_reset_alone_while_another_stream_runs() {
    let cfg = config(
        Duration::from_secs(1),
        Duration::from_secs(60),
        Http2Config::default(),
    );
    let file = TempFile::new("alone", 1024);
    let srv = serve(
        Via::H2c,
        cfg,
        app(Arc::new(file.path.clone()), Arc::default()),
    );
    let (send, conn) = connect(&srv, &zero_window()).await;
    let mut s = send.clone().ready().await.unwrap();
    let (stalled, _) = s.send_request(request("GET", "/full"), true).unwrap();
    let mut s = send.clone().ready().await.unwrap();
    let (running, _) = s.send_request(request("GET", "/wait"), true).unwrap();
    let start = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(10), stream_end(stalled))
        .await
        .expect("the stalled stream ends");
    assert_eq!(end, h2_limits_support::End::Reset(h2::Reason::CANCEL));
    assert!(
        start.elapsed() < Duration::from_millis(2400),
        "{:?}",
        start.elapsed()
    );
    let resp = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the running stream is answered")
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert!(!conn.is_finished(), "the connection is still open");
    let (status, _, _, _) = fetch(&send, "GET", "/wait").await.unwrap();
    assert_eq!(status, 204);
    srv.stop().await;
}
