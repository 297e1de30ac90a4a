//! What the request line and the connection say: the method, the path as routed, the
//! request-target and query string as sent, the version, the peer's and the client's
//! addresses and the authority. Reads the engine's request unless middleware rewrote it.

use super::Request;
use peregrine_server::{Method, Version};
use std::net::SocketAddr;

impl Request {
    /// The method as sent, e.g. `"GET"`.
    ///
    /// ```
    /// use peregrine::{any, App, Request};
    ///
    /// let client = App::new().route("/", any(|req: Request| async move { req.method().to_owned() })).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.delete("/").send().await.text(), "DELETE");
    /// assert_eq!(client.request("PURGE", "/").send().await.text(), "PURGE");
    /// # });
    /// ```
    #[inline]
    pub fn method(&self) -> &str {
        match self.extras.as_deref().and_then(|r| r.method.as_ref()) {
            Some((m, _)) => m,
            None => self.inner.method(),
        }
    }

    /// The method, recognised.
    ///
    /// ```
    /// use peregrine::server::Method;
    /// use peregrine::{any, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", any(|req: Request| async move { (req.method_kind() == Method::Post).to_string() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/").send().await.text(), "true");
    /// assert_eq!(client.get("/").send().await.text(), "false");
    /// # });
    /// ```
    #[inline]
    pub fn method_kind(&self) -> Method {
        match self.extras.as_deref().and_then(|r| r.method.as_ref()) {
            Some((_, k)) => *k,
            None => self.inner.method_kind(),
        }
    }

    /// The path as routed: normalised by the rules of [`crate::path`] (unreserved escapes
    /// decoded, `//` merged), otherwise still percent-encoded (use [`Request::param`] for
    /// decoded segments). [`Request::target`] has the request-target exactly as sent.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/files/{*rest}", get(|req: Request| async move { req.path().to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// // `//` merged, the unreserved escape `%7E` decoded, `%20` kept, the query left out.
    /// assert_eq!(client.get("/files//%7Eada/a%20b?v=2").send().await.text(), "/files/~ada/a%20b");
    /// # });
    /// ```
    #[inline]
    pub fn path(&self) -> &str {
        match &self.normalized_path {
            Some(p) => p,
            None => self.inner.path(),
        }
    }

    /// The whole request-target as sent.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/files/{*rest}", get(|req: Request| async move { req.target().to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/files//a%20b?v=2").send().await.text(), "/files//a%20b?v=2");
    /// # });
    /// ```
    pub fn target(&self) -> &str {
        self.inner.target()
    }

    /// The raw query string without `?`, still encoded.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/search", get(|req: Request| async move { format!("{:?}", req.query_string()) }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/search?q=a%20b&page=2").send().await.text(), r#"Some("q=a%20b&page=2")"#);
    /// assert_eq!(client.get("/search").send().await.text(), "None");
    /// # });
    /// ```
    pub fn query_string(&self) -> Option<&str> {
        self.inner.query()
    }

    /// The protocol version.
    ///
    /// ```
    /// use peregrine::server::Version;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { (req.version() == Version::Http11).to_string() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "true"); // the test client speaks HTTP/1.1
    /// # });
    /// ```
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
    /// proxies, the address they forwarded in the one header the application named
    /// ([`TrustedProxies::client_ip_from`](crate::proxy::TrustedProxies::client_ip_from)).
    /// Headers from any other peer are ignored. See [`crate::proxy`].
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// // No `TrustedProxies` state: forwarding headers are ignored, the peer is the client.
    /// let client = App::new()
    ///     .route("/ip", get(|req: Request| async move { req.client_addr().to_string() }))
    ///     .test()
    ///     .with_peer("192.0.2.7:50000".parse().unwrap());
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/ip").header("x-forwarded-for", "203.0.113.9").send().await;
    /// assert_eq!(res.text(), "192.0.2.7");
    /// # });
    /// ```
    pub fn client_addr(&self) -> std::net::IpAddr {
        crate::proxy::client_info(self).addr
    }

    /// The effective authority (absolute-form target, else `Host`).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { req.authority().unwrap_or("-").to_owned() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").header("host", "example.com:8080").send().await.text(), "example.com:8080");
    /// # });
    /// ```
    pub fn authority(&self) -> Option<&str> {
        self.inner.authority()
    }
}
