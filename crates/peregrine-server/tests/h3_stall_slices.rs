//! The HTTP/3 form of `h2_stall_slices.rs`: a small body cut from a larger shared buffer must
//! not keep that buffer alive while a QUIC client that grants no stream credit stalls its
//! stream (head and body both wait for it). Read from this process's `VmRSS` (the server runs
//! in-process; this binary has one test so nothing else allocates).
#![cfg(feature = "http3")]

// For `rss`, which the HTTP/2 memory tests use alike.
mod h2_limits_support;
mod h3_support;
mod slices_support;
mod tls_support;

use h2_limits_support::rss;
use h3_support::{connect, connect_over, serve, trusting};
use peregrine_server::h3::Http3Config;
use peregrine_server::ServerConfig;
use slices_support::{app, assert_buffers_not_held, handlers_ran, SLICE};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

const STREAMS: usize = 100;

#[tokio::test]
async fn a_stalled_small_body_does_not_keep_the_buffer_it_was_cut_from() {
    // Every 1 MiB buffer its own mapping, so RSS shows exactly what is held.
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's tuning; called before the server starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 * 1024);
    }
    let write_timeout = Duration::from_secs(3);
    let config = ServerConfig::builder()
        .workers(1)
        .write_timeout(write_timeout)
        .http3(Http3Config {
            max_concurrent_streams: STREAMS as u32 + 10,
            ..Http3Config::default()
        })
        .build();
    let served = Arc::new(AtomicUsize::new(0));
    let server = serve(config, app(served.clone()));
    let addr = server.handle.local_addr();
    let mut other = connect(addr, &server.ca).await;
    let reply = other.request("GET", "/warm", &[], b"").await.unwrap();
    assert_eq!((reply.status, reply.body.len()), (200, SLICE));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = rss();

    // 32 bytes of credit per stream: the control stream's settings get through, a response's
    // head and body do not.
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_idle_timeout(None)
        .stream_receive_window(quinn::VarInt::from_u32(32));
    let mut stalled = connect_over(addr, trusting(&server.ca), transport)
        .await
        .unwrap();
    let mut open = Vec::new();
    for _ in 0..STREAMS {
        let head = http::Request::get("https://localhost/slice")
            .body(())
            .unwrap();
        let mut stream = stalled.send.send_request(head).await.unwrap();
        stream.finish().await.unwrap();
        open.push(stream);
    }
    let start = Instant::now();
    handlers_ran(&served, STREAMS, "h3").await;
    // One more request moves the worker to a new buffer: the last stalled body's buffer is
    // then held by that body alone, as all the others' are.
    let reply = other.request("GET", "/next", &[], b"").await.unwrap();
    assert_eq!(reply.status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Still stalled (the write timeout is 3 s): what the streams hold is resident.
    assert!(start.elapsed() < write_timeout);
    assert_buffers_not_held(rss().saturating_sub(base), STREAMS, "h3");
    drop(open);
    server.handle.shutdown();
}
