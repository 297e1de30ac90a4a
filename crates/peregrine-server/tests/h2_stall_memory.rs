//! Memory a zero-window HTTP/2 client can make the server hold, read from this process's
//! `VmRSS` (the server runs in-process; this binary has one test so nothing else allocates):
//! 100 streams asking for an 8 MiB file on one connection (h2c and TLS) add at most 32 MiB,
//! since a file body is read 64 KiB at a time as windows open; 100 streams whose handlers
//! each built an 8 MiB body hold those bodies only until the write timeout resets them.
#![cfg(all(feature = "tls", feature = "http2"))]

mod common;
mod h2_limits_support;
mod tls_support;

use bytes::Bytes;
use h2_limits_support::{
    config, connect, fetch, request, rss, serve, stream_end, whole_file, TempFile, Via,
};
use peregrine_server::h2::Http2Config;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Service};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
const STREAMS: usize = 100;

/// `/file`: an 8 MiB file as `ResponseBody::File`; `/fresh`: a new 8 MiB body per request, as
/// a handler that reads a file whole makes.
fn app(file: Arc<PathBuf>) -> impl Service {
    service_fn(move |req: Request| {
        let file = file.clone();
        async move {
            match req.path() {
                "/file" => whole_file(&file),
                "/fresh" => {
                    let mut body = vec![0u8; 8 * MIB as usize];
                    // Written, so every page is resident (a zeroed allocation is not).
                    body.fill(7);
                    Response::new(200).with_body(ResponseBody::Full(Bytes::from(body)))
                }
                _ => Response::text("hello"),
            }
        }
    })
}

/// Opens `STREAMS` zero-window streams for `path` and waits until all are reset or the
/// connection is closed, sampling RSS meanwhile: (highest RSS seen, time taken).
async fn stall(srv: &h2_limits_support::Srv, path: &str) -> (u64, Duration) {
    let mut zero = h2::client::Builder::new();
    zero.initial_window_size(0);
    let (send, conn) = connect(srv, &zero).await;
    let start = Instant::now();
    let mut heads = Vec::new();
    for _ in 0..STREAMS {
        let mut send = send.clone().ready().await.unwrap();
        let (resp, _) = send.send_request(request("GET", path), true).unwrap();
        heads.push(resp);
    }
    let ends = tokio::spawn(async move {
        let mut ends = Vec::new();
        for resp in heads {
            ends.push(stream_end(resp).await);
        }
        ends
    });
    let mut peak = rss();
    while !ends.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{:?} {path}: zero-window streams still open after 15 s",
            srv.via
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        peak = peak.max(rss());
    }
    let took = start.elapsed();
    for end in ends.await.unwrap() {
        assert!(
            end.by_server(),
            "{:?} {path}: a stream ended {end:?}",
            srv.via
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
    (peak, took)
}

#[tokio::test]
async fn zero_window_streams_hold_no_memory_past_the_write_timeout() {
    // glibc would otherwise raise its mmap threshold after the first 8 MiB body is freed and
    // serve the next ones from arena heaps it gives back lazily; fixed, every body is its own
    // mapping and RSS shows exactly what is held.
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's tuning; called before the server starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
    }
    let file = TempFile::new("rss", 8 * MIB as usize);
    let write_timeout = Duration::from_secs(1);
    for via in [Via::H2c, Via::Tls] {
        let cfg = config(
            write_timeout,
            Duration::from_secs(60),
            Http2Config::default(),
        );
        let srv = serve(via, cfg, app(Arc::new(file.path.clone())));
        // Warm up: a connection and a whole in-memory body (TLS, runtime and h2 allocations).
        {
            let (send, _conn) = connect(&srv, &h2::client::Builder::new()).await;
            for path in ["/fresh"] {
                let (status, _, body, _) = fetch(&send, "GET", path).await.unwrap();
                assert_eq!(
                    (status, body.len() as u64),
                    (200, 8 * MIB),
                    "{via:?} {path}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;

        let base = rss();
        let (peak, took) = stall(&srv, "/fresh").await;
        let grown = peak.saturating_sub(base);
        // The handlers' bodies were resident (the measurement sees them)...
        assert!(
            grown >= 400 * MIB,
            "{via:?} /fresh: RSS grew only {grown} bytes"
        );
        // (No bound on `took` here: building 100 bodies of 8 MiB is the handlers' time.)
        // ...and are given back once their streams are reset.
        let after = Instant::now();
        let mut left = rss().saturating_sub(base);
        while left > 32 * MIB && after.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            left = rss().saturating_sub(base);
        }
        println!(
            "{via:?} /fresh: RSS peak +{} MiB, +{} KiB after the reset, ended after {took:?}",
            grown / MIB,
            left / 1024
        );
        assert!(left <= 32 * MIB, "{via:?} /fresh: {left} bytes still held");

        let base = rss();
        let (peak, took) = stall(&srv, "/file").await;
        let grown = peak.saturating_sub(base);
        println!(
            "{via:?} /file: RSS base {} MiB, peak +{} KiB, ended after {took:?}",
            base / MIB,
            grown / 1024
        );
        assert!(grown <= 32 * MIB, "{via:?} /file: RSS grew {grown} bytes");
        assert!(took < write_timeout * 5, "{via:?} /file: {took:?}");
        srv.stop().await;
    }
}
