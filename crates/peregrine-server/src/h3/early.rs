//! 0-RTT ([`Http3Config::zero_rtt`](super::Http3Config::zero_rtt)): a connection serves
//! requests before its handshake completes, and a request accepted in that window (early data,
//! which an attacker can replay) is served only when its method is safe.

use super::unvalidated::Unvalidated;
use crate::Response;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The field a request accepted in early data reaches the handler with (RFC 8470 §5.1).
const EARLY_DATA: &str = "early-data";

/// Whether a connection's handshake has completed (its client proved it holds the keys, so
/// what it sends from then on is no replay), as its request streams see it when accepted.
#[derive(Clone)]
pub(super) struct Confirmed(Rc<Cell<bool>>);

impl Confirmed {
    /// Whether a request accepted now came before the handshake completed.
    pub(super) fn early(&self) -> bool {
        !self.0.get()
    }
}

/// Waits until the connection `connecting` starts can carry requests and returns it. Without
/// `zero_rtt`, that is after the handshake, which must finish within `timeout`. With it, at
/// once (0.5-RTT: early requests are answered with the server's first flight), and a task
/// watches the handshake: it marks the connection confirmed when the handshake completes, or
/// closes it when the handshake fails or does not finish within `timeout`. `unvalidated`
/// counts the handshake until it ends either way.
pub(super) async fn establish(
    connecting: quinn::Connecting,
    zero_rtt: bool,
    timeout: Duration,
    unvalidated: Option<Unvalidated>,
) -> Result<(quinn::Connection, Confirmed), &'static str> {
    if !zero_rtt {
        let handshake = tokio::time::timeout(timeout, connecting).await;
        drop(unvalidated);
        return match handshake {
            Ok(Ok(quic)) => Ok((quic, Confirmed(Rc::new(Cell::new(true))))),
            Ok(Err(_)) => Err("QUIC handshake failed"),
            Err(_) => Err("QUIC handshake timed out"),
        };
    }
    // A server's `into_0rtt` always succeeds; whether the client's early data was accepted is
    // rustls' decision (a fresh ticket from a connection that allowed it).
    let Ok((quic, handshake)) = connecting.into_0rtt() else {
        return Err("QUIC connection unusable before its handshake");
    };
    let confirmed = Confirmed(Rc::new(Cell::new(false)));
    let (flag, watched) = (confirmed.clone(), quic.clone());
    tokio::task::spawn_local(async move {
        let done = tokio::time::timeout(timeout, handshake).await;
        drop(unvalidated);
        match done {
            Ok(true) => flag.0.set(true),
            // Failed: quinn has closed the connection already.
            Ok(false) => {}
            Err(_) => watched.close(quinn::VarInt::from_u32(0), b"handshake timed out"),
        }
    });
    Ok((quic, confirmed))
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
