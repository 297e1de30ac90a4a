//! The request both ways: a peregrine request as an `http::Request` for a layer, and back with
//! the layer's changes applied.

use super::body::LocalBody;
use super::box_error::BoxError;
use super::stash::{StashGuard, StashKey, NEXT_KEY, STASH};
use crate::error::Error;
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::{Buf, Bytes};
use http_body::Body as HttpBody;
use peregrine_server::{Body, BodyError, Response};
use std::any::Any;

/// The peregrine request as an `http::Request`: method, URI (path as routed, query), headers,
/// version, the body (streamed), the peer address as a `SocketAddr` extension. The request
/// itself waits in a per-thread stash for the inner service.
pub(super) fn to_http(
    mut req: Request,
) -> Result<(http::Request<LocalBody>, StashGuard), Response> {
    let mut builder = http::Request::builder()
        .method(req.method())
        .uri(uri_of(req.path(), req.query_string()))
        .version(match req.version() {
            peregrine_server::Version::Http10 => http::Version::HTTP_10,
            _ => http::Version::HTTP_11,
        });
    if let Some(h) = builder.headers_mut() {
        h.reserve(16);
        for (n, v) in req.headers() {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(n.as_bytes()),
                http::HeaderValue::from_bytes(v),
            ) {
                h.append(n, v);
            }
        }
    }
    let key = NEXT_KEY.with(|k| {
        let v = k.get();
        k.set(v.wrapping_add(1));
        v
    });
    if let Some(ext) = builder.extensions_mut() {
        // What outer tower layers left for inner ones (a `RequestId`...).
        if let Some(prev) = req.extension::<http::Extensions>() {
            ext.extend(prev.clone());
        }
    }
    let limit = req.body_limit();
    let body = LocalBody::new(std::mem::replace(req.inner.body_mut(), Body::empty()));
    // The request keeps its body limit while the layers have the body.
    req.set_body_limit(limit);
    let peer = req.peer_addr();
    let http_req = builder
        .extension(StashKey(key))
        .extension(peer)
        .body(body)
        .map_err(|e| {
            Error::bad_request()
                .with_detail(format!("request not representable for tower: {e}"))
                .into_response()
        })?;
    STASH.with(|s| s.borrow_mut().push((key, req)));
    Ok((http_req, StashGuard(key)))
}

pub(super) fn uri_of(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// The stashed request with the layer's changes applied: method, path (before routing only),
/// headers, body, extensions.
pub(super) async fn back_to_peregrine<B>(http_req: http::Request<B>) -> Result<Request, Response>
where
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = http_req.into_parts();
    let Some(StashKey(key)) = parts.extensions.remove::<StashKey>() else {
        return Err(Error::internal()
            .with_detail("tower layer dropped the request's extensions")
            .into_response());
    };
    let Some(mut req) = StashGuard(key).take() else {
        return Err(Error::internal()
            .with_detail("request missing from the tower stash")
            .into_response());
    };
    if parts.method.as_str() != req.method() {
        req.set_method(parts.method.as_str())
            .map_err(IntoResponse::into_response)?;
    }
    if parts.uri.path() != req.path() {
        req.set_path(parts.uri.path())
            .map_err(IntoResponse::into_response)?;
    }
    if !same_headers(&parts.headers, &req) {
        req.replace_headers(
            parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        );
    }
    // The body: ours unchanged goes back as is (streamed); a transformed one (decompressed,
    // limited...) is read here, up to the application's body limit.
    let boxed: Box<dyn Any> = Box::new(body);
    match boxed.downcast::<LocalBody>() {
        Ok(local) => *req.inner.body_mut() = local.into_engine_body(),
        Err(other) => {
            let Ok(other) = other.downcast::<B>() else {
                unreachable!("the body is a B")
            };
            let limit = req.body_limit();
            let bytes = collect(*other, usize::try_from(limit).unwrap_or(usize::MAX)).await?;
            *req.inner.body_mut() = Body::from_bytes(bytes);
            req.set_body_limit(limit);
        }
    }
    // The peer address was ours; anything else a layer left is worth keeping.
    parts.extensions.remove::<std::net::SocketAddr>();
    if !parts.extensions.is_empty() {
        // Layers leave values here (tower-http's `RequestId`, a tracing span...).
        req.insert_extension(parts.extensions);
    }
    Ok(req)
}

/// Reads a whole body, failing with 413 past `limit` bytes.
async fn collect<B>(body: B, limit: usize) -> Result<Bytes, Response>
where
    B: HttpBody,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            let e: BoxError = e.into();
            // The engine's own errors (413 past the body's limit...) keep their status.
            match e.downcast::<BodyError>() {
                Ok(e) => crate::request::body_error(*e).into_response(),
                Err(e) => Error::bad_request()
                    .with_detail(format!("request body: {e}"))
                    .into_response(),
            }
        })?;
        if let Ok(mut data) = frame.into_data() {
            if out.len() + data.remaining() > limit {
                return Err(Error::new(413)
                    .with_detail("request body exceeds the size limit")
                    .into_response());
            }
            while data.has_remaining() {
                let c = data.chunk();
                out.extend_from_slice(c);
                let n = c.len();
                data.advance(n);
            }
        }
    }
    Ok(Bytes::from(out))
}

fn same_headers(map: &http::HeaderMap, req: &Request) -> bool {
    let mut n = 0;
    for (name, v) in req.headers() {
        n += 1;
        if !map.get_all(name).iter().any(|x| x.as_bytes() == v) {
            return false;
        }
    }
    n == map.len()
}
