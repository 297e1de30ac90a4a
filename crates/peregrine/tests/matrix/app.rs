//! The service every cell talks to: the same routes in one group under `/api`, wrapped by the
//! stack's middleware, observed by the stack's observers, served on the stack's transport.

use super::table::{Middleware, Observers, Stack};
use crate::tls_support::Ca;
use crate::ws_support;
use bytes::Bytes;
use futures_util::StreamExt;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use peregrine::config::Config;
use peregrine::fs::ServeDir;
use peregrine::metrics::{EngineObserver, Metrics, Prometheus};
use peregrine::middleware::{Compression, Cors, Logger, Trace};
use peregrine::server::ServerHandle;
use peregrine::sse::{Event, Sse};
use peregrine::tls::{CertificateFiles, TlsConfig};
use peregrine::tower::TowerLayer;
use peregrine::ws::WebSocketUpgrade;
use peregrine::{get, post, App, Error, Json, Request, Response, ResponseBody, Router, StreamBody};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

/// The origin the CORS layers allow.
pub const ORIGIN: &str = "https://app.example";
/// The large file: an odd size, so no length is round.
pub const FILE_SIZE: usize = 3 * 1024 * 1024 + 17;
/// `ServeDir`'s in-memory limit: below the file and the range, so both go out as file bodies
/// (`sendfile(2)` on plain TCP), not as bytes read into memory.
const MAX_IN_MEMORY: u64 = 256 * 1024;
pub const FILE_PATH: &str = "/api/static/big.bin";
/// The streamed body: this many chunks of 16 KiB.
pub const STREAM_CHUNKS: usize = 8;
pub const JSON_BODY: &str = r#"{"matrix":"cell","ok":true,"n":42}"#;

pub fn file_bytes() -> Vec<u8> {
    (0..FILE_SIZE).map(|i| (i % 251) as u8).collect()
}

pub fn stream_chunk(i: usize) -> Vec<u8> {
    vec![b'a' + i as u8; 16 * 1024]
}

/// FNV-1a: a digest the upload handler answers with, so the client can check every byte
/// arrived without the server echoing 200 KiB.
pub fn fnv(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// What every server shares: the directory `ServeDir` serves, the CA and certificate of the
/// TLS listeners, and the process's Prometheus recorder.
pub struct Fixture {
    pub root: tempfile::TempDir,
    pub ca: Ca,
    pub tls: TlsConfig,
    pub prometheus: Prometheus,
}

impl Fixture {
    pub fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("big.bin"), file_bytes()).unwrap();
        let ca = Ca::new("matrix");
        let leaf = ca.server("matrix", &["localhost"]);
        let tls = TlsConfig::new(vec![CertificateFiles::new(leaf.cert_path, leaf.key_path)]);
        let prometheus = peregrine::metrics::install().unwrap();
        Fixture {
            root,
            ca,
            tls,
            prometheus,
        }
    }
}

/// A running server of the matrix, and what its observers collected.
pub struct Running {
    pub handle: ServerHandle,
    /// The spans the OpenTelemetry pipeline exported (observers `TraceMetricsOtel`).
    pub spans: Option<InMemorySpanExporter>,
}

#[derive(serde::Serialize)]
struct Doc {
    matrix: &'static str,
    ok: bool,
    n: u32,
}

async fn json(_req: Request) -> Json<Doc> {
    Json(Doc {
        matrix: "cell",
        ok: true,
        n: 42,
    })
}

async fn streamed(_req: Request) -> StreamBody {
    let (tx, body) = StreamBody::channel(2);
    tokio::task::spawn_local(async move {
        for i in 0..STREAM_CHUNKS {
            if tx.send(stream_chunk(i)).await.is_err() {
                return;
            }
            // Separate writes, so the body really goes out in pieces.
            tokio::task::yield_now().await;
        }
    });
    body.content_type("application/octet-stream")
}

/// The streamed chunks again, with their total length announced.
async fn sized_stream(_req: Request) -> Response {
    let chunks = (0..STREAM_CHUNKS).map(|i| Ok(Bytes::from(stream_chunk(i))));
    Response::new(200)
        .with_header("content-type", &b"application/octet-stream"[..])
        .with_body(ResponseBody::SizedStream {
            len: (STREAM_CHUNKS * 16 * 1024) as u64,
            stream: Box::pin(futures_util::stream::iter(chunks)),
        })
}

/// Each field as `name:file name:length:digest;`.
async fn upload(mut req: Request) -> Result<String, Error> {
    let mut form = req.multipart()?;
    let mut out = String::new();
    while let Some(mut field) = form.next_field().await? {
        let name = field.name().unwrap_or_default().to_owned();
        let file = field.file_name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await?;
        out.push_str(&format!(
            "{name}:{file}:{}:{:08x};",
            bytes.len(),
            fnv(&bytes)
        ));
    }
    Ok(out)
}

async fn ws(req: Request) -> Result<Response, Error> {
    Ok(WebSocketUpgrade::from_request(&req)?.on_upgrade(ws_support::echo))
}

/// Three events, then nothing but the default keep-alive (every 15 s) until the client leaves:
/// the server has to notice the client left without writing to it.
async fn events(_req: Request) -> Sse {
    let first = futures_util::stream::iter([
        Event::data("one").id("1"),
        Event::data("two\nlines").event("multi").id("2"),
        Event::data("three").id("3"),
    ]);
    Sse::new(first.chain(futures_util::stream::pending()))
}

fn routes(root: PathBuf) -> Router {
    Router::new()
        .route("/json", get(json))
        .route("/stream", get(streamed))
        .route("/sized", get(sized_stream))
        .route(
            "/static/{*path}",
            get(ServeDir::new(root).max_in_memory(MAX_IN_MEMORY)),
        )
        .route("/upload", post(upload))
        .route("/ws", get(ws))
        .route("/events", get(events))
}

fn with_middleware(group: Router, middleware: Middleware) -> Router {
    match middleware {
        Middleware::None => group,
        Middleware::Native => group
            .layer(Logger::new())
            .layer(
                Cors::new()
                    .allow_origin(ORIGIN)
                    .allow_methods(["GET", "POST"])
                    .allow_headers(["content-type"]),
            )
            .layer(Compression::new()),
        Middleware::TowerHttp => {
            use tower_http::compression::CompressionLayer;
            use tower_http::cors::CorsLayer;
            use tower_http::trace::TraceLayer;
            group
                .layer(TowerLayer::new(TraceLayer::new_for_http()))
                .layer(TowerLayer::new(
                    CorsLayer::new()
                        .allow_origin(http::HeaderValue::from_static(ORIGIN))
                        .allow_methods([http::Method::GET, http::Method::POST])
                        .allow_headers([http::header::CONTENT_TYPE]),
                ))
                .layer(TowerLayer::new(CompressionLayer::new()))
        }
    }
}

/// Why a stack's server did not start.
pub enum NotStarted {
    /// `App::serve` refused the app with an error: an allowed answer if it says why.
    Refused(std::io::Error),
    /// `App::serve` panicked: never allowed.
    Panicked(String),
}

/// Starts the stack's server (one worker) on a loopback port with `App::serve`, called from the
/// test's tokio runtime as a `#[tokio::main]` application calls it.
pub fn start(fx: &Fixture, stack: Stack) -> Result<Running, NotStarted> {
    std::panic::catch_unwind(AssertUnwindSafe(|| try_start(fx, stack)))
        .map_err(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            // The first sentence says what happened; tokio's advice after it is long.
            NotStarted::Panicked(text.split(". ").next().unwrap_or_default().to_owned())
        })?
        .map_err(NotStarted::Refused)
}

fn try_start(fx: &Fixture, stack: Stack) -> std::io::Result<Running> {
    let mut config = Config::from(
        peregrine::ServerConfig::builder()
            .addr("127.0.0.1:0".parse().unwrap())
            .workers(1)
            // Short, so a connection that holds the drain shows as a slow shutdown, not a hang.
            .shutdown_timeout(Duration::from_secs(5))
            .build(),
    );
    let group = with_middleware(routes(fx.root.path().to_owned()), stack.middleware);
    let mut app = App::new().nest("/api", group);
    let mut spans = None;
    match stack.observers {
        Observers::None => {}
        Observers::EngineEvents => config.events = Some(Arc::new(EngineObserver::new())),
        Observers::TraceMetricsOtel => {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            spans = Some(exporter);
            app = app
                .route("/metrics", fx.prometheus.endpoint())
                .layer(Metrics::new())
                .layer(Trace::new())
                .on_worker_start(move |_w| {
                    let subscriber = tracing_subscriber::registry().with(
                        tracing_opentelemetry::layer().with_tracer(provider.tracer("matrix")),
                    );
                    async move {
                        // This worker's thread only: the other servers in this process run
                        // without a subscriber, as their stacks say. The guard would reset
                        // the thread's default when dropped; the thread ends with the server.
                        std::mem::forget(tracing::subscriber::set_default(subscriber));
                        Ok::<(), std::convert::Infallible>(())
                    }
                });
        }
    }
    // As a user serves it: TLS from the configuration (HTTP/2 or HTTP/1.1 by ALPN).
    if stack.transport.tls() {
        config = config.with_tls(fx.tls.clone());
    }
    let handle = app.serve(config)?;
    Ok(Running { handle, spans })
}
