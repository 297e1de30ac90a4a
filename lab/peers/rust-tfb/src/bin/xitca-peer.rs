//! xitca-web as TechEmpower's xitca-web entry (its `default` test, `main.rs`) sets it up: the
//! xitca-http HTTP/1.1 service under xitca-http's router, one `fn_service` per route, a middleware
//! that sets `Server` on every answer, xitca-server running one single-thread tokio runtime per
//! worker thread, mimalloc as the global allocator (the entry's continuous-run build). xitca-http
//! writes the responses of a read's pipelined requests together. Differences from the entry: the
//! epoll transport instead of io-uring (the lab's other peers use epoll) and serde_json instead
//! of sonic-rs; `/plaintext` and `/json` only (see lab/peers/README.md).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::convert::Infallible;
use xitca_http::{
    body::Once,
    bytes::Bytes,
    h1::RequestBody,
    http::{
        self,
        const_header_value::{JSON, TEXT},
        header::{CONTENT_TYPE, SERVER},
        HeaderValue, IntoResponse as _, RequestExt, StatusCode,
    },
    util::service::{
        route::get,
        router::{Router, RouterError},
    },
    HttpServiceBuilder,
};
use xitca_service::{fn_service, Service, ServiceExt};

type Request = http::Request<RequestExt<RequestBody>>;
type Response = http::Response<Once<Bytes>>;

fn main() -> std::io::Result<()> {
    let service = Router::new()
        .insert(
            "/plaintext",
            get(fn_service(|req: Request| async move {
                let mut res = req.into_response(Bytes::from_static(tfb::PLAINTEXT.as_bytes()));
                res.headers_mut().insert(CONTENT_TYPE, TEXT);
                Ok::<_, Infallible>(res)
            })),
        )
        .insert(
            "/json",
            get(fn_service(|req: Request| async move {
                // Serialised per request; a one-field struct of a static str cannot fail.
                let body = serde_json::to_vec(&tfb::HELLO).unwrap_or_default();
                let mut res = req.into_response(Bytes::from(body));
                res.headers_mut().insert(CONTENT_TYPE, JSON);
                Ok::<_, Infallible>(res)
            })),
        )
        .enclosed_fn(async |service, req| {
            let mut res = service.call(req).await.unwrap_or_else(error_response);
            res.headers_mut()
                .insert(SERVER, HeaderValue::from_static("xitca-web"));
            Ok::<_, Infallible>(res)
        })
        .enclosed(HttpServiceBuilder::h1());
    xitca_server::Builder::new()
        .worker_threads(tfb::workers())
        // The entry's default backlog is 2048; the lab stops servers with SIGTERM, so no 30 s drain.
        .shutdown_timeout(1)
        .bind("xitca-web", tfb::addr(), service)?
        .build()
        .wait()
}

/// An unknown path is a 404 and a known path with another method a 405, as in the entry.
fn error_response(e: RouterError<Infallible>) -> Response {
    let status = match e {
        RouterError::Match(_) => StatusCode::NOT_FOUND,
        RouterError::NotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
        RouterError::Service(e) => match e {},
    };
    let mut res = http::Response::new(Once::new(Bytes::new()));
    *res.status_mut() = status;
    res
}
