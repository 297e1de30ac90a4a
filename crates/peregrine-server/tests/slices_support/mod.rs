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
