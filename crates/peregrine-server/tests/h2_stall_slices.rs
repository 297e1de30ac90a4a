//! A small body cut from a larger shared buffer (the framework cuts its JSON answers from a
//! per-worker chunk) must not keep that buffer alive while a zero-window HTTP/2 client stalls
//! its stream: the driver sends a copy. Read from this process's `VmRSS` (the server runs
//! in-process; this binary has one test so nothing else allocates).
#![cfg(all(feature = "tls", feature = "http2"))]

mod common;
mod h2_limits_support;
mod slices_support;
mod tls_support;

use h2_limits_support::{config, connect, fetch, request, rss, serve, stream_end, Via};
use peregrine_server::h2::Http2Config;
use slices_support::{app, assert_buffers_not_held, handlers_ran, SLICE};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

const STREAMS: usize = 100;

#[tokio::test]
async fn a_stalled_small_body_does_not_keep_the_buffer_it_was_cut_from() {
    // Every 1 MiB buffer its own mapping, so RSS shows exactly what is held (see
    // h2_stall_memory.rs).
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's tuning; called before the server starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 * 1024);
    }
    for via in [Via::H2c, Via::Tls] {
        let served = Arc::new(AtomicUsize::new(0));
        let write_timeout = Duration::from_secs(3);
        let cfg = config(
            write_timeout,
            Duration::from_secs(60),
            Http2Config::default(),
        );
        let srv = serve(via, cfg, app(served.clone()));
        let (open, _open_conn) = connect(&srv, &h2::client::Builder::new()).await;
        // Warm up (TLS, runtime and h2 allocations).
        let (status, _, body, _) = fetch(&open, "GET", "/warm").await.unwrap();
        assert_eq!((status, body.len()), (200, SLICE));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let base = rss();

        let mut zero = h2::client::Builder::new();
        zero.initial_window_size(0);
        let (send, _conn) = connect(&srv, &zero).await;
        let mut heads = Vec::new();
        for _ in 0..STREAMS {
            let mut send = send.clone().ready().await.unwrap();
            let (resp, _) = send.send_request(request("GET", "/slice"), true).unwrap();
            heads.push(resp);
        }
        let start = Instant::now();
        handlers_ran(&served, STREAMS, &format!("{via:?}")).await;
        // One more request moves the worker to a new buffer: the last stalled body's buffer
        // is then held by that body alone, as all the others' are.
        let (status, _, _, _) = fetch(&open, "GET", "/next").await.unwrap();
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The streams are still stalled (the write timeout is 3 s): what they hold is resident.
        assert!(start.elapsed() < write_timeout);
        assert_buffers_not_held(rss().saturating_sub(base), STREAMS, &format!("{via:?}"));
        for resp in heads {
            assert!(stream_end(resp).await.by_server());
        }
        srv.stop().await;
    }
}
