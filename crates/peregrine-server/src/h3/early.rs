//! 0-RTT ([`Http3Config::zero_rtt`](super::Http3Config::zero_rtt)): a connection serves
//! requests before its handshake completes, and a request accepted in that window (early data,
//! which an attacker can replay) is served only when its method is safe.

use super::unvalidated::Unvalidated;
use crate::Response;
use futures_util::future::{FutureExt, Shared};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// The field a request accepted in early data reaches the handler with (RFC 8470 §5.1).
const EARLY_DATA: &str = "early-data";

/// Whether a connection's handshake has completed (its client proved it holds the keys, so
/// what it sends from then on is no replay), as its request streams see it when accepted.
pub(super) struct Confirmed(Option<(Shared<quinn::ZeroRttAccepted>, quinn::Connection)>);

impl Confirmed {
    /// Whether a request accepted now came before the handshake completed. quinn's driver
    /// resolves the handshake future as it processes the client's Finished, before this
    /// connection's task can accept a stream that came after it; a connection that ended
    /// instead never counts as confirmed.
    pub(super) fn early(&self) -> bool {
        let Some((handshake, quic)) = &self.0 else {
            return false;
        };
        handshake.clone().now_or_never().is_none() || quic.close_reason().is_some()
    }

    /// Runs `fut`, polling it once more when the handshake completes. h3's setup (the server's
    /// control and QPACK streams and SETTINGS), begun in 0.5-RTT, can be left pending by quinn
    /// with no wake-up until then: with quic-go's client it waited for its timeout (the
    /// `header` timeout) in 5 of 8 runs, and in none of 12 with this.
    pub(super) async fn across_handshake<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        let mut handshake = self.0.as_ref().map(|(h, _)| h.clone());
        poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            match handshake.as_mut().map(|h| h.poll_unpin(cx)) {
                Some(Poll::Ready(_)) => {
                    handshake = None;
                    fut.as_mut().poll(cx)
                }
                _ => Poll::Pending,
            }
        })
        .await
    }
}

/// Waits until the connection `connecting` starts can carry requests and returns it. Without
/// `zero_rtt`, that is after the handshake, which must finish within `timeout`. With it, at
/// once (0.5-RTT: early requests are answered with the server's first flight), and a task
/// closes the connection if its handshake does not finish within `timeout`. `unvalidated`
/// counts the handshake until it ends either way.
pub(super) async fn establish(
    connecting: quinn::Connecting,
    zero_rtt: bool,
    timeout: Duration,
    unvalidated: Option<Unvalidated>,
) -> Result<(quinn::Connection, Confirmed), String> {
    if !zero_rtt {
        let handshake = tokio::time::timeout(timeout, connecting).await;
        drop(unvalidated);
        return match handshake {
            Ok(Ok(quic)) => Ok((quic, Confirmed(None))),
            Ok(Err(e)) => Err(format!("QUIC handshake failed: {e}")),
            Err(_) => Err("QUIC handshake timed out".into()),
        };
    }
    // A server's `into_0rtt` always succeeds; whether the client's early data is accepted is
    // rustls' decision (a fresh ticket from a connection that allowed it).
    let Ok((quic, handshake)) = connecting.into_0rtt() else {
        return Err("QUIC connection unusable before its handshake".into());
    };
    let handshake = handshake.shared();
    let (watched, watcher) = (handshake.clone(), quic.clone());
    tokio::task::spawn_local(async move {
        // A failed handshake resolves it too (quinn has closed the connection then).
        let done = tokio::time::timeout(timeout, watched).await;
        drop(unvalidated);
        if done.is_err() {
            watcher.close(quinn::VarInt::from_u32(0), b"handshake timed out");
        }
    });
    Ok((quic.clone(), Confirmed(Some((handshake, quic)))))
}

/// Whether a request accepted before the handshake completed may be served: a safe method is,
/// marked `early-data: 1` for the handler; any other is answered `425 Too Early` (RFC 8470
/// §5.2), which the client repeats once the handshake is done.
pub(super) fn admit(head: &mut http::Request<()>) -> Result<(), Response> {
    if head.method().is_safe() {
        head.headers_mut()
            .insert(EARLY_DATA, http::HeaderValue::from_static("1"));
        Ok(())
    } else {
        Err(Response::new(425))
    }
}

#[cfg(test)]
mod tests {
    use super::admit;

    fn head(method: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("https://localhost/")
            .body(())
            .unwrap()
    }

    #[test]
    fn only_safe_methods_are_served_early() {
        for method in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            let mut h = head(method);
            assert!(admit(&mut h).is_ok(), "{method}");
            assert_eq!(h.headers()["early-data"], "1", "{method}");
        }
        for method in ["POST", "PUT", "DELETE", "PATCH", "CONNECT", "PURGE"] {
            let refused = admit(&mut head(method)).expect_err(method);
            assert_eq!(refused.status, 425, "{method}");
        }
    }
}
