//! The scheme a trusted proxy reports, a leaf the header parsers and the proxy rules share.

/// The scheme the client used, as forwarded by a trusted proxy.
///
/// ```
/// use peregrine::proxy::{client_info, ForwardedHeader, ProtoHeader, Scheme, TrustedProxies};
/// use peregrine::{get, App, IntoResponse, Redirect, Request, Response};
///
/// /// Sends plain-HTTP visitors (as the TLS-terminating proxy reports) to HTTPS.
/// async fn home(req: Request) -> Response {
///     match client_info(&req).scheme {
///         Some(Scheme::Https) => Response::text("secure"),
///         _ => Redirect::permanent("https://example.com/").into_response(),
///     }
/// }
///
/// let trust = TrustedProxies::new(["127.0.0.1"])
///     .unwrap()
///     .client_ip_from(ForwardedHeader::XForwardedFor)
///     .proto_from(ProtoHeader::XForwardedProto);
/// let client = App::new().route("/", get(home)).with_state(trust).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // What the proxy adds: the client's address and the scheme it used.
/// let via = |proto: &'static str| client.get("/").header("x-forwarded-for", "203.0.113.7").header("x-forwarded-proto", proto);
/// assert_eq!(via("https").send().await.text(), "secure");
/// assert_eq!(via("http").send().await.status(), 308);
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http`
    Http,
    /// `https`
    Https,
}
