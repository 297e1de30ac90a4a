//! Turning an h2 request into an engine [`Request`]: pseudo-fields, split cookies, the body's
//! framing, and RFC 8441 extended CONNECT.

use super::body::{H2Body, Recv, SharedRecv};
use super::cookies;
use crate::request::PartsInfo;
use crate::{Body, Request, Response, Service, Version};
use peregrine_codec::BodyFraming;
use std::net::SocketAddr;
use std::rc::Rc;

/// Per-connection view of the settings (shared by its streams).
pub(super) struct Ctx {
    pub(super) max_body_size: u64,
    pub(super) body_rules: super::body::BodyRules,
    pub(super) server_name: Option<&'static str>,
    pub(super) watch: Rc<super::limits::Watch>,
}

/// What to do for one stream: call the service with this request, or answer at once.
pub(super) enum Start<F> {
    /// The handler's future, whether the request is HEAD, and the request body's stream to
    /// drain after the response (when it did not end with the head); or, for an extended
    /// CONNECT, the stream's receiving half for the tunnel.
    Call(F, bool, Option<SharedRecv>, Option<h2::RecvStream>),
    Answer(Response),
}

/// Turns an h2 request into an engine request and starts the service on it.
pub(super) trait CallH2: Service {
    fn call_h2(
        &self,
        req: http::Request<h2::RecvStream>,
        peer: SocketAddr,
        ctx: &Ctx,
    ) -> Start<Self::Future>;
}

impl<S: Service> CallH2 for S {
    fn call_h2(
        &self,
        req: http::Request<h2::RecvStream>,
        peer: SocketAddr,
        ctx: &Ctx,
    ) -> Start<Self::Future> {
        let (parts, recv) = req.into_parts();
        // RFC 8441: h2 accepts `:protocol` only on CONNECT, and only as we announced it.
        let protocol = parts.extensions.get::<h2::ext::Protocol>().cloned();
        if let Some(protocol) = protocol {
            return extended_connect(self, parts, recv, protocol, peer);
        }
        // h2 has checked that content-length is a number and will check it against the DATA.
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let framing = match declared {
            Some(n) => BodyFraming::Length(n),
            None if recv.is_end_stream() => BodyFraming::None,
            // Length unknown, more DATA to come (the HTTP/1.1 equivalent is chunked).
            None => BodyFraming::Chunked,
        };
        let (body, shared_recv) = if recv.is_end_stream() {
            (Body::empty(), None)
        } else {
            let shared: SharedRecv = Rc::new(std::cell::RefCell::new(Recv::new(recv)));
            let body = H2Body::new(shared.clone(), declared, ctx.body_rules);
            // The limit is checked as the body is read (a declared length before any DATA).
            let body = Body::from_source(Box::new(body), ctx.max_body_size);
            (body, Some(shared))
        };
        let target = match parts.uri.path_and_query() {
            Some(pq) => pq.as_str(),
            // CONNECT has only an authority (RFC 9113 §8.5).
            None => parts.uri.authority().map_or("", |a| a.as_str()),
        };
        let head_request = parts.method == http::Method::HEAD;
        // RFC 9113 §8.2.3: cookie fields split for compression are joined again for an
        // HTTP/1.1-style consumer.
        let mut cookies: Option<Vec<u8>> = None;
        if parts.headers.get_all(http::header::COOKIE).iter().count() > 1 {
            let joined = parts
                .headers
                .get_all(http::header::COOKIE)
                .iter()
                .map(|v| v.as_bytes())
                .collect::<Vec<_>>()
                .join(&b"; "[..]);
            cookies = Some(joined);
        }
        let mut cookie_done = false;
        let fields = parts.headers.iter().filter_map(|(n, v)| {
            if n == http::header::COOKIE {
                if let Some(c) = &cookies {
                    if cookie_done {
                        return None;
                    }
                    cookie_done = true;
                    return Some((n.as_str().as_bytes(), c.as_slice()));
                }
            }
            Some((n.as_str().as_bytes(), v.as_bytes()))
        });
        let request = Request::from_parts(
            parts.method.as_str().as_bytes(),
            target.as_bytes(),
            parts.uri.authority().map(|a| a.as_str().as_bytes()),
            fields,
            PartsInfo {
                version: Version::Http2,
                framing,
                peer,
                body,
            },
        );
        let Some(request) = request else {
            return Start::Answer(Response::new(400));
        };
        Start::Call(self.call(request), head_request, shared_recv, None)
    }
}

/// An extended CONNECT as the service sees it: `GET` with `Upgrade: <protocol>` and no
/// body; the stream's DATA is the tunnel's, kept for the upgrade.
fn extended_connect<S: Service>(
    service: &S,
    parts: http::request::Parts,
    recv: h2::RecvStream,
    protocol: h2::ext::Protocol,
    peer: SocketAddr,
) -> Start<S::Future> {
    match connect_request(&parts, protocol.as_str(), Version::Http2, peer) {
        Some(request) => Start::Call(service.call(request), false, None, Some(recv)),
        None => Start::Answer(Response::new(400)),
    }
}

/// The request an extended CONNECT for `protocol` (HTTP/2's or HTTP/3's) is to the service: a
/// `GET` of its `:path` with `Upgrade: <protocol>`, the translation proxies make to HTTP/1.1;
/// `None` when a part is not ASCII (answered 400).
pub(crate) fn connect_request(
    parts: &http::request::Parts,
    protocol: &str,
    version: Version,
    peer: SocketAddr,
) -> Option<Request> {
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    // Split cookie fields joined, as for any other request (RFC 9113 §8.2.3).
    let cookies = cookies::JoinedCookies::of(&parts.headers);
    let fields = cookies
        .fields(&parts.headers)
        .chain(std::iter::once((&b"upgrade"[..], protocol.as_bytes())));
    Request::from_parts(
        b"GET",
        target.as_bytes(),
        parts.uri.authority().map(|a| a.as_str().as_bytes()),
        fields,
        PartsInfo {
            version,
            framing: BodyFraming::None,
            peer,
            body: Body::empty(),
        },
    )
}
