//! `Alt-Svc: h3=":PORT"` on the responses sent over TCP, so that clients learn HTTP/3 is served
//! on the same port over UDP (RFC 7838, RFC 9114 §3.1.1).

use crate::{Request, Response, Service, Version};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};

/// How long a client may remember the advertisement: a day, as Caddy and nginx configure it.
const MAX_AGE_SECS: u32 = 86_400;

/// The field value for `port`, made once per port for the life of the process (a server
/// serves one or a few ports), so each response borrows it instead of allocating a copy.
fn value_for(port: u16) -> &'static str {
    static VALUES: OnceLock<Mutex<HashMap<u16, &'static str>>> = OnceLock::new();
    let mut values = VALUES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    values
        .entry(port)
        .or_insert_with(|| Box::leak(format!("h3=\":{port}\"; ma={MAX_AGE_SECS}").into_boxed_str()))
}

/// A service that adds `Alt-Svc` to the responses of `S` to requests that did not come over
/// HTTP/3 (when a value is set; without one it passes responses through unchanged).
#[derive(Clone)]
pub(crate) struct AltSvc<S> {
    inner: S,
    value: Option<&'static str>,
}

impl<S> AltSvc<S> {
    /// Advertises HTTP/3 on `port`, or nothing when `port` is `None`.
    pub(crate) fn new(inner: S, port: Option<u16>) -> Self {
        AltSvc {
            inner,
            value: port.map(value_for),
        }
    }
}

impl<S: Service> Service for AltSvc<S> {
    type Future = AltSvcFuture<S::Future>;

    fn call(&self, req: Request) -> Self::Future {
        let value = self.value.filter(|_| req.version() != Version::Http3);
        AltSvcFuture {
            inner: self.inner.call(req),
            value,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of the inner service, with `Alt-Svc` added.
    pub(crate) struct AltSvcFuture<F> {
        #[pin]
        inner: F,
        value: Option<&'static str>,
    }
}

impl<F: Future<Output = Response>> Future for AltSvcFuture<F> {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let this = self.project();
        let mut response = std::task::ready!(this.inner.poll(cx));
        if let Some(value) = *this.value {
            // A handler's own advertisement (another port, say) is left as it is.
            let own = response
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("alt-svc"));
            if !own {
                response.insert_header("alt-svc", value);
            }
        }
        Poll::Ready(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_names_the_port_and_is_made_once() {
        assert_eq!(value_for(8443), "h3=\":8443\"; ma=86400");
        assert!(std::ptr::eq(value_for(8443), value_for(8443)));
    }
}
