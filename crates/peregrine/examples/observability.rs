//! A dashboard-ready service: a span per request exported through OpenTelemetry (to stdout here:
//! point an OTLP exporter at your collector instead), an access log, Prometheus metrics on
//! `/metrics`, liveness/readiness with a drain on SIGTERM, a per-client rate limit, and client
//! addresses taken from trusted proxies.
//!
//! ```sh
//! cargo run --release --features opentelemetry,metrics,rate-limit --example observability
//! curl -s localhost:8080/hello/ada -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
//! curl -s localhost:8080/metrics
//! ```
//!
//! Environment: `ADDR`, `WORKERS` (see `peregrine::config`), and
//! * `OBS` = `full` (default: access log, OpenTelemetry spans, metrics, engine events),
//!   `trace` (the `Trace` layer and a plain access log only), or `off` (none of it: the
//!   baseline for `bench/cpu-per-request.sh`);
//! * `OTEL_STDOUT=0` keeps the OpenTelemetry pipeline but drops the exported spans (for
//!   measuring without a terminal's cost);
//! * `TRUSTED_PROXIES` = comma-separated networks (default `127.0.0.1,::1`) whose
//!   `X-Forwarded-For` / `X-Forwarded-Proto` are believed;
//! * `DRAIN_DELAY_MS` (here default 2000, `peregrine::config`): how long readiness is off
//!   before the listener closes;
//! * `RATE_LIMIT` requests per second per client (default 0: no limit).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use peregrine::health::Health;
use peregrine::metrics::{self, EngineObserver, Metrics};
use peregrine::middleware::{RateLimit, RequestIdLayer, Trace};
use peregrine::proxy::{ForwardedHeader, ProtoHeader, TrustedProxies};
use peregrine::{get, App, Error, Json, Request};
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

async fn plaintext(_req: Request) -> &'static str {
    "Hello, World!"
}

async fn hello(req: Request) -> Result<Json<serde_json::Value>, Error> {
    let name = req.param_str("name")?;
    // Logged inside the request's span: it carries the request id, route and trace id.
    tracing::info!(%name, "greeting");
    Ok(Json(
        serde_json::json!({ "hello": name, "client": req.client_addr() }),
    ))
}

async fn slow(_req: Request) -> &'static str {
    tokio::time::sleep(Duration::from_millis(120)).await;
    "slow\n"
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> std::io::Result<()> {
    let mut config = peregrine::config::from_env_and_args(std::env::args().skip(1))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mode = std::env::var("OBS").unwrap_or_else(|_| "full".into());
    if std::env::var_os("DRAIN_DELAY_MS").is_none() {
        config.server.timeouts.drain_delay = Duration::from_secs(2);
    }
    let trusted = std::env::var("TRUSTED_PROXIES").unwrap_or_else(|_| "127.0.0.1,::1".into());
    let trusted = TrustedProxies::new(trusted.split(',').filter(|s| !s.is_empty()))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?
        .client_ip_from(ForwardedHeader::XForwardedFor)
        .proto_from(ProtoHeader::XForwardedProto);
    let health = Health::new(&config.drain_signal);

    let mut app = App::new()
        .route("/plaintext", get(plaintext))
        .route("/hello/{name}", get(hello))
        .route("/slow", get(slow))
        .route("/livez", health.liveness())
        .route("/readyz", health.readiness())
        .hook(health.close_when_draining())
        .with_state(trusted);
    let rate: u32 = env("RATE_LIMIT", 0);
    if rate > 0 {
        app = app.hook(RateLimit::per_second(rate).burst(rate * 2));
    }

    let mut provider = None;
    match mode.as_str() {
        "off" => {}
        "trace" => {
            tracing_subscriber::fmt()
                .with_env_filter(EnvFilter::new("info"))
                .init();
            app = app.layer(Trace::new());
        }
        _ => {
            // OpenTelemetry: spans batched and exported to stdout (an OTLP exporter in
            // production); the incoming `traceparent` becomes the server span's parent.
            let builder = SdkTracerProvider::builder().with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("observability-example")
                    .build(),
            );
            let builder = if env("OTEL_STDOUT", 1) == 1 {
                builder.with_batch_exporter(opentelemetry_stdout::SpanExporter::default())
            } else {
                builder
                    .with_batch_exporter(opentelemetry_sdk::testing::trace::NoopSpanExporter::new())
            };
            let p = builder.build();
            let tracer = p.tracer("observability-example");
            tracing_subscriber::registry()
                .with(EnvFilter::new("info"))
                .with(tracing_subscriber::fmt::layer())
                .with(tracing_opentelemetry::layer().with_tracer(tracer))
                .init();
            provider = Some(p);
            let prometheus = metrics::install().map_err(std::io::Error::other)?;
            config.events = Some(Arc::new(EngineObserver::new()));
            app = app
                .route("/metrics", prometheus.endpoint())
                .layer(Metrics::new())
                .layer(RequestIdLayer::new())
                .layer(Trace::new());
        }
    }
    let result = app.run(config);
    if let Some(p) = provider {
        let _ = p.shutdown();
    }
    result
}
