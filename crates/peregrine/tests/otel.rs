//! `Trace` with `tracing-opentelemetry` (feature `opentelemetry`): the request span is exported
//! as an OpenTelemetry server span that continues the incoming `traceparent` (same trace id, the
//! caller's span as parent), named after the route template, with the wire status. Exported to
//! the SDK's in-memory exporter (no collector is reachable here).

mod common;
use common::TestServer;
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use peregrine::middleware::Trace;
use peregrine::{get, App, Request};
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn request_spans_continue_the_incoming_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let app = App::new()
        .route(
            "/users/{id}",
            get(|_r: Request| async {
                let _inner = tracing::info_span!("db_query").entered();
                "ok"
            }),
        )
        .layer(Trace::new());
    let s = TestServer::start(app);
    let r = s.get(
        "/users/42",
        &["traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    );
    assert_eq!(r.status, 200);
    // Without a traceparent: a new trace.
    assert_eq!(s.get("/users/43", &[]).status, 200);
    drop(s);
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let server: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "GET /users/{id}")
        .collect();
    assert_eq!(server.len(), 2, "{spans:#?}");
    let continued = server
        .iter()
        .find(|s| {
            s.span_context.trace_id()
                == TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        })
        .expect("the incoming trace continued");
    assert_eq!(continued.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(continued.span_kind, SpanKind::Server);
    let attr = |k: &str| {
        continued
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == k)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(attr("status").as_deref(), Some("200"));
    assert_eq!(attr("route").as_deref(), Some("/users/{id}"));
    // The handler's own span is a child of the request span.
    let child = spans
        .iter()
        .find(|s| s.name == "db_query")
        .expect("child span");
    assert!(
        server
            .iter()
            .any(|s| s.span_context.span_id() == child.parent_span_id),
        "{child:#?}"
    );
    let fresh = server
        .iter()
        .find(|s| s.span_context.trace_id() != continued.span_context.trace_id())
        .unwrap();
    assert_eq!(fresh.parent_span_id, SpanId::INVALID, "a root span");
}
