//! What a connection's request streams share: its settings and connection ([`Ctx`]), and how a
//! handler's answer is taken ([`answer`]). Apart from the connection driver so that the streams
//! it hands elsewhere (extended CONNECT tunnels) use them without importing the driver.

use super::early::Confirmed;
use crate::pace::PaceRules;
use crate::Response;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// Per-connection view of the settings, shared by its streams.
pub(super) struct Ctx {
    pub(super) max_body_size: u64,
    pub(super) body_rules: PaceRules,
    pub(super) server_name: Option<&'static str>,
    pub(super) header_timeout: Duration,
    pub(super) write_timeout: Duration,
    pub(super) write_rules: PaceRules,
    pub(super) extended_connect: bool,
    /// The connection, for the client's address as of each request: a client whose address
    /// changed (NAT rebinding, migration) is on its new path once quinn has validated it.
    pub(super) quic: quinn::Connection,
    pub(super) confirmed: Confirmed,
}

/// The handler's response; 500 when it panicked.
pub(super) async fn answer<F: Future<Output = Response>>(fut: F) -> Response {
    let mut fut = pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => {
                tracing::error!("handler panicked; answering 500");
                Poll::Ready(Response::new(500))
            }
        },
    )
    .await
}
