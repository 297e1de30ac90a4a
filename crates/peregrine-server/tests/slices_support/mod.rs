//! The service of the stalled-slice tests (`h2_stall_slices.rs`, `h3_stall_slices.rs`): each
//! answer a small slice of a fresh 1 MiB buffer that the worker keeps until its next request,
//! as the framework keeps the chunk it cuts small bodies from. A body is shared when the driver
//! takes it and alone afterwards, so only a copy made by the driver frees its buffer.
#![allow(dead_code)]

use bytes::Bytes;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Service};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MIB: usize = 1024 * 1024;
/// Bytes of each answer.
pub const SLICE: usize = 30;

thread_local! {
    /// The buffer the last answer was cut from.
    static CURRENT: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Every path answers a slice; `served` counts the requests for `/slice`.
pub fn app(served: Arc<AtomicUsize>) -> impl Service {
    service_fn(move |req: Request| {
        let served = served.clone();
        async move {
            let mut buf = vec![0u8; MIB];
            // Written, so every page is resident (a zeroed allocation is not).
            buf.fill(7);
            let buf = Bytes::from(buf);
            let body = buf.slice(0..SLICE);
            CURRENT.with(|c| *c.borrow_mut() = Some(buf));
            if req.path() == "/slice" {
                served.fetch_add(1, Ordering::SeqCst);
            }
            Response::new(200).with_body(ResponseBody::Full(body))
        }
    })
}

/// Waits until `want` requests for `/slice` reached the handler (at most 2 s).
pub async fn handlers_ran(served: &AtomicUsize, want: usize, label: &str) {
    let start = Instant::now();
    while served.load(Ordering::SeqCst) < want {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{label}: {} of {want} handlers run",
            served.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `grown` (bytes of RSS added while `streams` bodies are stalled) is far below the 1 MiB
/// buffers the bodies were cut from: each stalled body holds a copy, not its buffer.
pub fn assert_buffers_not_held(grown: u64, streams: usize, label: &str) {
    println!(
        "{label}: RSS +{} KiB with {streams} stalled {SLICE}-byte bodies",
        grown / 1024
    );
    assert!(
        grown < 16 * MIB as u64,
        "{label}: {streams} stalled bodies hold {grown} bytes (their buffers are 1 MiB each)"
    );
}
