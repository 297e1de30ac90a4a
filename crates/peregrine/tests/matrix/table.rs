//! The matrix itself: every axis as a const array. A cell is one value of each; a new
//! transport, observer, middleware stack or route kind is one more entry here (and, for a
//! route kind, one checker in `checks.rs`).

use std::fmt;

/// How the client reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// HTTP/1.1 in cleartext.
    Plain,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    Tls,
    /// HTTP/2 in cleartext with prior knowledge.
    H2c,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2Tls,
}

/// What watches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observers {
    None,
    /// `Config::events` with the framework's `metrics::EngineObserver`.
    EngineEvents,
    /// `middleware::Trace` + the Prometheus `Metrics` layer, spans exported through a
    /// `tracing-opentelemetry` layer.
    TraceMetricsOtel,
}

/// The middleware on the route group every route lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Middleware {
    /// No layer: the baseline every other stack must answer like.
    None,
    /// The framework's own `Logger`, `Cors`, `Compression`.
    Native,
    /// tower-http's `TraceLayer`, `CorsLayer`, `CompressionLayer` through `TowerLayer`.
    TowerHttp,
}

/// What a route answers, and how its checker talks to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A small JSON document (sized body).
    Json,
    /// A body streamed in chunks of unknown total length (chunked / DATA frames).
    Streamed,
    /// A body streamed in chunks whose total length is announced (`ResponseBody::SizedStream`,
    /// as a proxied download answers).
    SizedStream,
    /// A 3 MiB file through `ServeDir` (past its in-memory limit: a file body): the whole of it.
    File,
    /// The same file, one `Range`.
    FileRange,
    /// The same file, `HEAD`.
    FileHead,
    /// A multipart/form-data upload of a text field and a 200 KiB file.
    Multipart,
    /// A WebSocket echo (HTTP/1.1 Upgrade, or RFC 8441 extended CONNECT on HTTP/2).
    WebSocket,
    /// Server-sent events the client leaves after three (before any keep-alive is written).
    Sse,
    /// A CORS preflight of the upload route.
    Preflight,
}

pub const TRANSPORTS: &[Transport] = &[
    Transport::Plain,
    Transport::Tls,
    Transport::H2c,
    Transport::H2Tls,
];

pub const OBSERVERS: &[Observers] = &[
    Observers::None,
    Observers::EngineEvents,
    Observers::TraceMetricsOtel,
];

pub const MIDDLEWARE: &[Middleware] =
    &[Middleware::None, Middleware::Native, Middleware::TowerHttp];

pub const ROUTES: &[Route] = &[
    Route::Json,
    Route::Streamed,
    Route::SizedStream,
    Route::File,
    Route::FileRange,
    Route::FileHead,
    Route::Multipart,
    Route::WebSocket,
    Route::Sse,
    Route::Preflight,
];

impl Transport {
    pub fn tls(self) -> bool {
        matches!(self, Transport::Tls | Transport::H2Tls)
    }
    pub fn h2(self) -> bool {
        matches!(self, Transport::H2c | Transport::H2Tls)
    }
}

impl Middleware {
    /// Whether the stack answers CORS (both real stacks carry a CORS layer).
    pub fn cors(self) -> bool {
        self != Middleware::None
    }
}

/// One server of the matrix: everything but the route kind.
#[derive(Clone, Copy, Debug)]
pub struct Stack {
    pub transport: Transport,
    pub observers: Observers,
    pub middleware: Middleware,
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} × observers {:?} × middleware {:?}",
            self.transport, self.observers, self.middleware
        )
    }
}

/// Every server of the matrix, in table order.
pub fn stacks() -> Vec<Stack> {
    let mut all = Vec::new();
    for &transport in TRANSPORTS {
        for &observers in OBSERVERS {
            for &middleware in MIDDLEWARE {
                all.push(Stack {
                    transport,
                    observers,
                    middleware,
                });
            }
        }
    }
    all
}
