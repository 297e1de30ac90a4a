//! A worker that dies under HTTP/3 with datagrams steered by connection ID: its restart gets its
//! predecessor's UDP socket back, so the reuseport group keeps its order and every worker's
//! connection IDs still lead to it. Were the dead worker's socket closed and a new one bound,
//! the kernel would move the group's last socket into the freed place and add the new one at
//! the end: with three workers, the datagrams of two workers' connections would reach another
//! worker, and new connections would be reset after their first packets.
//!
//! Run with `cargo test -p peregrine-server --features http3,fault-injection --test h3_restart`.
#![cfg(all(feature = "http3", feature = "fault-injection"))]

mod h3_support;
mod tls_support;

use h3_support::{connect, serve_built, Running};
use peregrine_server::server::Fault;
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(5);

/// The name of the worker thread that answers.
async fn worker(_req: Request) -> Response {
    Response::text(std::thread::current().name().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_restarted_worker_keeps_its_socket_and_every_connection_reaches_its_worker() {
    let starts = Arc::new(AtomicUsize::new(0));
    let counter = starts.clone();
    let config = ServerConfig::builder()
        .workers(3)
        .shutdown_timeout(Duration::from_millis(500))
        .build();
    let hooked = move |server: Server<_>| {
        server.on_worker_start(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
    };
    let Running { handle, ca } = serve_built(config, |_| {}, hooked, service_fn(worker));
    let addr = handle.local_addr();
    // The first worker's socket is the group's first: the one a closed socket's place would
    // be refilled from the end.
    handle.inject_fault(0, Fault::Panic);
    let deadline = Instant::now() + Duration::from_secs(10);
    while starts.load(Ordering::SeqCst) < 4 {
        assert!(
            Instant::now() < deadline,
            "the dead worker was not restarted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut by = BTreeMap::new();
    for _ in 0..30 {
        let mut client = connect(addr, &ca).await;
        // Several requests: the later ones travel in short-header packets, steered by the
        // connection ID the worker gave out.
        let mut names = Vec::new();
        for _ in 0..3 {
            let reply = tokio::time::timeout(WAIT, client.request("GET", "/", &[], b""))
                .await
                .expect("answered, not left waiting")
                .expect("served, not reset");
            assert_eq!(reply.status, 200);
            names.push(String::from_utf8(reply.body).unwrap());
        }
        assert!(names.windows(2).all(|w| w[0] == w[1]), "{names:?}");
        *by.entry(names[0].clone()).or_insert(0) += 1;
        client.quic.close(0u32.into(), b"");
    }
    assert_eq!(by.len(), 3, "30 connections over the three workers: {by:?}");
    handle.shutdown();
}
