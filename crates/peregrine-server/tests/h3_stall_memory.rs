//! A QUIC client that asks for large responses and never reads them, from the real quinn
//! client with a 64 KiB stream window: the server holds about a window's worth per stream, not
//! the responses (read from this process's `VmRSS`: the server runs in-process, and this
//! binary has one test so nothing else allocates), resets every stream at the write timeout,
//! which gives the client its stream credit back, and serves another client on the same
//! worker meanwhile.
#![cfg(feature = "http3")]

// For `rss` and `TempFile`, which the HTTP/2 memory tests use alike.
mod h2_limits_support;
mod h3_support;
mod tls_support;

use bytes::Bytes;
use h2_limits_support::{rss, whole_file, TempFile};
use h3::error::{Code, StreamError};
use h3_support::{connect, connect_over, serve, trusting};
use peregrine_server::h3::Http3Config;
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig, Service};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: usize = 1024 * 1024;
/// Each response: 8 MiB, so 100 of them whole would be 800 MiB.
const BODY: usize = 8 * MIB;
const STREAMS: usize = 100;
/// The stalled client's receive window per stream.
const WINDOW: u32 = 64 * 1024;
/// A handler's streamed body comes in pieces of this size.
const PIECE: usize = 64 * 1024;
/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(15);

/// `/file`: an 8 MiB file as `ResponseBody::File`; `/stream`: 8 MiB the handler makes a piece
/// at a time as they are pulled; anything else: `ok`.
fn app(file: Arc<PathBuf>) -> impl Service {
    service_fn(move |req: Request| {
        let file = file.clone();
        async move {
            match req.path() {
                "/file" => whole_file(&file),
                "/stream" => {
                    let pieces = (0..BODY / PIECE).map(|_| Ok(Bytes::from(vec![7u8; PIECE])));
                    let stream = Box::pin(futures_util::stream::iter(pieces));
                    Response::new(200).with_body(ResponseBody::SizedStream {
                        len: BODY as u64,
                        stream,
                    })
                }
                _ => Response::text("ok"),
            }
        }
    })
}

#[tokio::test]
async fn streams_a_client_never_reads_hold_a_window_each_and_are_reset_at_the_write_timeout() {
    // As in h2_stall_memory.rs: every large allocation its own mapping, so RSS shows exactly
    // what is held.
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's tuning; called before the server starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
    }
    let file = TempFile::new("h3-stall", BODY);
    let config = ServerConfig::builder()
        .workers(1)
        .write_timeout(Duration::from_secs(1))
        .http3(Http3Config {
            // Every stream of the stalled client: a request after them needs one freed.
            max_concurrent_streams: STREAMS as u32,
            ..Http3Config::default()
        })
        .build();
    let server = serve(config, app(Arc::new(file.path.clone())));
    let addr = server.handle.local_addr();

    // Warm up: TLS, QUIC, runtime and h3 allocations, and both bodies once whole.
    let mut other = connect(addr, &server.ca).await;
    for p in ["/file", "/stream"] {
        let reply = other.request("GET", p, &[], b"").await.unwrap();
        assert_eq!((reply.status, reply.body.len()), (200, BODY), "{p}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let base = rss();

    let mut transport = quinn::TransportConfig::default();
    transport
        .max_idle_timeout(None)
        .stream_receive_window(WINDOW.into())
        // Room for every stream's window: the per-stream window is what holds them back.
        .receive_window(quinn::VarInt::from_u32(2 * STREAMS as u32 * WINDOW));
    let mut stalled = connect_over(addr, trusting(&server.ca), transport)
        .await
        .unwrap();
    let start = Instant::now();
    let mut open = Vec::new();
    for i in 0..STREAMS {
        let p = if i % 2 == 0 { "/file" } else { "/stream" };
        let head = http::Request::get(format!("https://localhost{p}"))
            .body(())
            .unwrap();
        let mut stream = stalled.send.send_request(head).await.unwrap();
        stream.finish().await.unwrap();
        open.push(stream);
    }
    // The worker serves others while the stalled streams wait for the client.
    let reply = tokio::time::timeout(WAIT, other.request("GET", "/", &[], b""))
        .await
        .expect("another client is served during the stall")
        .unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"ok"[..]));

    let mut peak = rss();
    while stalled.quic.stats().frame_rx.reset_stream < STREAMS as u64 {
        assert!(
            start.elapsed() < WAIT,
            "{} of {STREAMS} stalled streams reset",
            stalled.quic.stats().frame_rx.reset_stream
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        peak = peak.max(rss());
    }
    let grown = peak.saturating_sub(base);
    assert!(
        grown < 48 * MIB as u64,
        "RSS grew {grown} bytes for {STREAMS} stalled streams of {BODY} bytes"
    );

    // Each stream ends in the reset (quinn drops what the client had not read of it).
    for mut stream in open {
        let mut got = 0;
        let end = match stream.recv_response().await {
            Ok(head) => loop {
                assert_eq!(head.status(), 200);
                match stream.recv_data().await {
                    Ok(Some(data)) => got += bytes::Buf::remaining(&data),
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            },
            Err(e) => Some(e),
        };
        let cancelled = |e: &StreamError| matches!(e, StreamError::RemoteTerminate { code, .. } if *code == Code::H3_REQUEST_CANCELLED);
        assert!(
            end.as_ref().is_some_and(cancelled),
            "a stalled stream ended {end:?} after {got} bytes"
        );
        assert!(
            got <= WINDOW as usize,
            "{got} bytes past a {WINDOW}-byte window"
        );
    }
    // The reset streams were freed: the connection has stream credit for one more.
    let reply = tokio::time::timeout(WAIT, stalled.request("GET", "/", &[], b""))
        .await
        .expect("the stalled streams' credit came back")
        .unwrap();
    assert_eq!(reply.status, 200);
    server.handle.shutdown();
}
