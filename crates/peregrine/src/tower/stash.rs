//! The per-thread stash: what is not `Send` (the request, a streamed response body) waits here,
//! by key, while its `http` form is inside a tower layer.

use crate::request::Request;
use peregrine_server::ResponseBody;
use std::cell::RefCell;

thread_local! {
    /// Requests whose `http` form is inside a tower layer, by key (the layer only sees the key,
    /// in the request's extensions: `http` extensions must be `Send`, a request is not).
    pub(super) static STASH: RefCell<Vec<(u64, Request)>> = const { RefCell::new(Vec::new()) };
    /// Streamed response bodies set aside by [`ResponseBodyAs`] (not `Send`), by the key of the
    /// request they answer.
    pub(super) static BODY_STASH: RefCell<Vec<(u64, ResponseBody)>> = const { RefCell::new(Vec::new()) };
    pub(super) static NEXT_KEY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[derive(Clone, Copy)]
pub(super) struct StashKey(pub(super) u64);

/// Removes a stashed request when dropped (the layer may never call the inner service).
pub(super) struct StashGuard(pub(super) u64);

impl StashGuard {
    pub(super) fn take(&self) -> Option<Request> {
        STASH.with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|(k, _)| *k == self.0)?;
            Some(s.swap_remove(i).1)
        })
    }
}

impl Drop for StashGuard {
    fn drop(&mut self) {
        // During thread teardown the table may be gone already.
        let _ = STASH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.retain(|(k, _)| *k != self.0);
            }
        });
        let _ = BODY_STASH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.retain(|(k, _)| *k != self.0);
            }
        });
    }
}

/// Marks a response whose real body waits in the worker's stash (see
/// [`ResponseBodyAs`](super::ResponseBodyAs)).
#[derive(Clone, Copy)]
pub(super) struct StashedBody(pub(super) u64);
