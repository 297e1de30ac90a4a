//! Bare hyper 1.x peer: one accept loop on a multi-threaded tokio runtime with `WORKERS` worker
//! threads, HTTP/1.1 connections served by `hyper::server::conn::http1`, requests routed by hand.
//! `RUNTIME=per-core`: one current-thread runtime and `SO_REUSEPORT` listener per worker instead;
//! `PIPELINE_FLUSH=1`: hyper's `pipeline_flush(true)` (see lab/peers/README.md for its cost).
//!
//! It serves every scenario except `middleware`: bare hyper has no middleware layers of its own,
//! and one handler setting five headers would not be the scenario.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use peers::{Failure, Large, Member, Message, NewUser, SearchResult, UserById};
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use tokio::net::TcpListener;

static LARGE: OnceLock<Large> = OnceLock::new();

const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const PROBLEM: HeaderValue = HeaderValue::from_static("application/problem+json");
const SERVER_NAME: HeaderValue = HeaderValue::from_static("hyper");

fn respond(
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(SERVER, SERVER_NAME);
    if let Some(ct) = content_type {
        headers.insert(CONTENT_TYPE, ct);
    }
    res
}

fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec(value) {
        Ok(body) => respond(status, Some(JSON), Bytes::from(body)),
        Err(_) => problem(),
    }
}

fn problem() -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&peers::INTERNAL_ERROR).expect("static problem serialises");
    respond(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(PROBLEM),
        Bytes::from(body),
    )
}

fn status_only(status: StatusCode) -> Response<Full<Bytes>> {
    respond(status, None, Bytes::new())
}

/// Request bodies above this are refused with 413 (`POST /users` needs about 60 bytes).
const BODY_LIMIT: usize = 1 << 20;

/// Errors a route can fail with; `handle` maps them to responses in one place.
enum RouteError {
    NotFound,
    BadRequest,
    TooLarge,
    Internal(#[allow(dead_code)] Failure),
}

impl From<Failure> for RouteError {
    fn from(e: Failure) -> Self {
        RouteError::Internal(e)
    }
}

fn int(segment: &str) -> Result<u64, RouteError> {
    segment.parse().map_err(|_| RouteError::NotFound)
}

async fn route(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, RouteError> {
    let path = req.uri().path();
    let mut segments = path.strip_prefix('/').unwrap_or(path).split('/');
    let parts: [Option<&str>; 8] = std::array::from_fn(|_| segments.next());
    let more = segments.next().is_some();
    // HEAD is routed like GET (RFC 9110 §9.3.2); hyper leaves the body out of a HEAD answer.
    let method = match req.method() {
        &Method::HEAD => Method::GET,
        other => other.clone(),
    };
    match (&method, parts, more) {
        (&Method::GET, [Some("plaintext"), None, ..], false) => Ok(respond(
            StatusCode::OK,
            Some(TEXT),
            Bytes::from_static(b"Hello, World!"),
        )),
        (&Method::GET, [Some("json"), None, ..], false) => Ok(json(
            StatusCode::OK,
            &Message {
                message: "Hello, World!",
            },
        )),
        (&Method::GET, [Some("users"), Some(id), None, ..], false) => {
            Ok(json(StatusCode::OK, &UserById::new(int(id)?)))
        }
        (&Method::POST, [Some("users"), None, ..], false) => {
            // Refuse from the declared length first, so a huge announced body is answered at once.
            let declared = req
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|len| len > BODY_LIMIT as u64) {
                return Err(RouteError::TooLarge);
            }
            let body = Limited::new(req.into_body(), BODY_LIMIT)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<LengthLimitError>() {
                        RouteError::TooLarge
                    } else {
                        RouteError::BadRequest
                    }
                })?
                .to_bytes();
            let user: NewUser =
                serde_json::from_slice(&body).map_err(|_| RouteError::BadRequest)?;
            Ok(json(StatusCode::CREATED, &user))
        }
        (&Method::GET, [Some("search"), None, ..], false) => {
            let (mut q, mut limit) = (None, None);
            for (k, v) in form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
                match &*k {
                    "q" => q = Some(v.into_owned()),
                    "limit" => limit = Some(v.parse::<u64>().map_err(|_| RouteError::BadRequest)?),
                    _ => {}
                }
            }
            match (q, limit) {
                (Some(q), Some(limit)) => Ok(json(StatusCode::OK, &SearchResult { q, limit })),
                _ => Err(RouteError::BadRequest),
            }
        }
        (
            &Method::GET,
            [Some("api"), Some("v1"), Some("orgs"), Some(org), Some("teams"), Some(team), Some("members"), Some(member)],
            false,
        ) => Ok(json(
            StatusCode::OK,
            &Member {
                org: int(org)?,
                team: int(team)?,
                member: int(member)?,
            },
        )),
        (&Method::GET, [Some("error"), None, ..], false) => {
            peers::fail()?;
            Ok(status_only(StatusCode::OK))
        }
        (&Method::GET, [Some("large"), None, ..], false) => {
            Ok(json(StatusCode::OK, LARGE.get().expect("built at startup")))
        }
        (&Method::GET, [Some("empty"), None, ..], false) => Ok(status_only(StatusCode::NO_CONTENT)),
        _ => Err(RouteError::NotFound),
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match route(req).await {
        Ok(res) => res,
        Err(RouteError::NotFound) => status_only(StatusCode::NOT_FOUND),
        Err(RouteError::BadRequest) => status_only(StatusCode::BAD_REQUEST),
        Err(RouteError::TooLarge) => {
            // The rest of the body is not read, so the connection cannot be reused.
            let mut res = status_only(StatusCode::PAYLOAD_TOO_LARGE);
            res.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            res
        }
        Err(RouteError::Internal(_)) => problem(),
    })
}

async fn accept_loop(listener: TcpListener, http: Arc<http1::Builder>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            // Transient accept errors (e.g. EMFILE) must not stop the server; back off
            // briefly so a persistent one does not spin a core.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let http = Arc::clone(&http);
        tokio::spawn(async move {
            let _ = http
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}

fn main() {
    let addr = peers::addr();
    LARGE.get_or_init(peers::large);
    // hyper's defaults. Its `pipeline_flush(true)` option would cut the CPU per request with
    // 16 pipelined requests about threefold here, but with it hyper closes connections
    // without sending its 400 answers to malformed requests (compliance probe: 26.5%
    // instead of 79.0%), so it is off unless PIPELINE_FLUSH=1 (the lab's `hyper-flush` peer);
    // see lab/peers/README.md.
    let mut builder = http1::Builder::new();
    if peers::flag("PIPELINE_FLUSH") {
        builder.pipeline_flush(true);
    }
    let http = Arc::new(builder);
    match peers::runtime_mode() {
        peers::RuntimeMode::PerCore => peers::run_per_core(addr, move |listener| {
            accept_loop(listener, Arc::clone(&http))
        }),
        peers::RuntimeMode::Multi => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(peers::workers())
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(async move {
                let listener = TcpListener::bind(addr).await.expect("bind ADDR");
                accept_loop(listener, http).await
            }),
    }
}
