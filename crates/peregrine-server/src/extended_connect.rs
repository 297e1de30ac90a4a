//! Extended CONNECT tunnels (RFC 8441 over HTTP/2, RFC 9220 over HTTP/3): how a handler's
//! upgrade answer becomes the tunnel's `200` and how the upgrade then runs on the stream. Shared
//! by both protocols' drivers, apart from `upgrade` (which `Response` itself uses).

use crate::upgrade::{OnUpgrade, Upgraded};
use std::task::Poll;

/// The upgrade an extended CONNECT (RFC 8441 over HTTP/2, RFC 9220 over HTTP/3) opens, taken
/// from the handler's answer `res`, which is left as the `200` head to send before the tunnel.
/// `None` when the handler did not switch protocols (status 101 with an upgrade function, as over
/// HTTP/1.1): `res` is then the answer to send as it is, its upgrade function dropped, and a 2xx
/// made 501, since the client would take any 2xx for an open tunnel.
pub(crate) fn tunnel_answer(res: &mut crate::Response) -> Option<OnUpgrade> {
    use crate::response::ResponseBody;
    match std::mem::replace(&mut res.body, ResponseBody::Empty) {
        ResponseBody::Upgrade(f) if res.status == 101 => {
            res.status = 200;
            Some(f)
        }
        body => {
            // An upgrade function with another status is dropped (no body), as over HTTP/1.1.
            if !matches!(body, ResponseBody::Upgrade(_)) {
                res.body = body;
            }
            if (200..300).contains(&res.status) {
                tracing::warn!(
                    status = res.status,
                    "extended CONNECT answered 2xx without switching protocols (101); answering 501"
                );
                *res = crate::Response::new(501);
            }
            None
        }
    }
}

/// Runs `upgrade` on the tunnel `io` until it returns; a panic ends this tunnel only, as a
/// panicking handler ends its stream only.
pub(crate) async fn run_tunnel(upgrade: OnUpgrade, io: Upgraded) {
    let mut run = upgrade(io);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => {
                tracing::error!("upgraded stream's function panicked");
                Poll::Ready(())
            }
        }
    })
    .await
}
