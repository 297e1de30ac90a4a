//! What the request line and the connection say: the method, the path as routed, the
//! request-target and query string as sent, the version, the peer's and the client's
//! addresses and the authority. Reads the engine's request unless middleware rewrote it.

use super::Request;
use peregrine_server::{Method, Version};
use std::net::SocketAddr;

impl Request {
    /// The method as sent, e.g. `"GET"`.
    #[inline]
    pub fn method(&self) -> &str {
        match self.rewrites.as_deref().and_then(|r| r.method.as_ref()) {
            Some((m, _)) => m,
            None => self.inner.method(),
        }
    }

    /// The method, recognised.
    #[inline]
    pub fn method_kind(&self) -> Method {
        match self.rewrites.as_deref().and_then(|r| r.method.as_ref()) {
            Some((_, k)) => *k,
            None => self.inner.method_kind(),
        }
    }

    /// The path as routed: normalised by the rules of [`crate::path`] (unreserved escapes
    /// decoded, `//` merged), otherwise still percent-encoded (use [`Request::param`] for
    /// decoded segments). [`Request::target`] has the request-target exactly as sent.
    #[inline]
    pub fn path(&self) -> &str {
        match &self.normalized_path {
            Some(p) => p,
            None => self.inner.path(),
        }
    }

    /// The whole request-target as sent.
    pub fn target(&self) -> &str {
        self.inner.target()
    }

    /// The raw query string without `?`, still encoded.
    pub fn query_string(&self) -> Option<&str> {
        self.inner.query()
    }

    /// The protocol version.
    pub fn version(&self) -> Version {
        self.inner.version()
    }

    /// The remote address of the connection.
    ///
    /// ```
    /// async fn whoami(req: peregrine::Request) -> String {
    ///     req.peer_addr().ip().to_string()
    /// }
    /// # let _ = whoami;
    /// ```
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer_addr()
    }

    /// The client's address: the peer's, or, when the application has a
    /// [`TrustedProxies`](crate::proxy::TrustedProxies) state and the peer is one of those
    /// proxies, the address they forwarded (`Forwarded`, else `X-Forwarded-For`). Headers from
    /// any other peer are ignored. See [`crate::proxy`].
    pub fn client_addr(&self) -> std::net::IpAddr {
        crate::proxy::client_info(self).addr
    }

    /// The effective authority (absolute-form target, else `Host`).
    pub fn authority(&self) -> Option<&str> {
        self.inner.authority()
    }
}
