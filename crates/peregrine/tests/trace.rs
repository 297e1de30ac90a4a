//! The `Trace` layer over real sockets: one span per request with its fields, handler logs nest
//! under it, `traceparent` is taken up, the request id lands in the span, the logged status and
//! size are the wire's (a handler's 101 is logged as the 500 the engine sends), the client
//! address comes through trusted proxies only. Checked with a capturing `tracing` layer that
//! records every span's fields and, for each event, the fields of the request span around it.

mod common;
use common::TestServer;
use peregrine::middleware::{Logger, RequestIdLayer, Trace};
use peregrine::proxy::{ForwardedHeader, TrustedProxies};
use peregrine::{get, App, Request, Response, StreamBody};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

type Fields = BTreeMap<String, String>;

#[derive(Debug, Clone)]
struct Seen {
    target: String,
    fields: Fields,
    /// Fields of the nearest enclosing span named `request`, as they were at the event.
    request_span: Option<Fields>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().to_owned(), format!("{v:?}"));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().to_owned(), v.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::new();
        attrs.record(&mut Visitor(&mut f));
        ctx.span(id).unwrap().extensions_mut().insert(f);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut ext = span.extensions_mut();
        values.record(&mut Visitor(ext.get_mut::<Fields>().unwrap()));
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let request_span = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find(|s| s.name() == "request")
                .map(|s| s.extensions().get::<Fields>().cloned().unwrap())
        });
        self.0.lock().unwrap().push(Seen {
            target: event.metadata().target().to_owned(),
            fields,
            request_span,
        });
    }
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn spans_fields_nesting_traceparent_and_wire_status() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let app = App::new()
        .route(
            "/users/{id}",
            get(|req: Request| async move {
                tracing::info!(user = req.param_raw("id").unwrap_or(""), "inside handler");
                "hello"
            }),
        )
        .route(
            "/switch",
            get(|_r: Request| async { Response::new(101).with_header("upgrade", &b"x"[..]) }),
        )
        .route(
            "/stream",
            get(|_r: Request| async {
                let (tx, body) = StreamBody::channel(4);
                tokio::task::spawn_local(async move {
                    for _ in 0..3 {
                        let _ = tx.send("0123456789").await;
                    }
                });
                body
            }),
        )
        .layer(RequestIdLayer::new())
        .layer(Trace::new())
        .with_state(
            TrustedProxies::new(["127.0.0.1"])
                .unwrap()
                .client_ip_from(ForwardedHeader::XForwardedFor),
        );
    let s = TestServer::start(app);

    let r = s.get(
        "/users/7",
        &[
            "x-request-id: req-abc-123",
            &format!("traceparent: {TRACEPARENT}"),
            "x-forwarded-for: 6.6.6.6, 203.0.113.7",
        ],
    );
    assert_eq!((r.status, r.text()), (200, "hello"));
    let r = s.get("/switch", &[]);
    assert_eq!(r.status, 500, "the engine refuses a final 101");
    let r = s.send("HEAD /users/8 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    let r = s.get("/stream", &[]);
    assert_eq!(r.body.len(), 30);
    drop(s);

    let seen = capture.0.lock().unwrap().clone();
    let handler = seen
        .iter()
        .find(|e| e.fields.get("message").map(String::as_str) == Some("inside handler"))
        .expect("the handler's event");
    let span = handler
        .request_span
        .as_ref()
        .expect("nested in the request span");
    assert_eq!(span["method"], "GET");
    assert_eq!(span["route"], "/users/{id}");
    assert_eq!(span["path"], "/users/7");
    assert_eq!(span["request_id"], "req-abc-123");
    assert_eq!(span["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(span["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(span["otel.name"], "GET /users/{id}");
    assert_eq!(span["client"], "203.0.113.7", "through the trusted proxy");
    assert!(span["peer"].starts_with("127.0.0.1:"), "{span:?}");

    let completed: Vec<&Seen> = seen
        .iter()
        .filter(|e| {
            e.target == "peregrine::request"
                && e.fields.get("message").map(String::as_str) == Some("completed")
        })
        .collect();
    assert_eq!(completed.len(), 4, "{completed:#?}");
    let done = |path: &str, method: &str| {
        completed
            .iter()
            .find(|e| {
                let s = e.request_span.as_ref().unwrap();
                s["path"] == path && s["method"] == method
            })
            .unwrap_or_else(|| panic!("{method} {path}: {completed:#?}"))
    };
    let users = done("/users/7", "GET");
    let span = users.request_span.as_ref().unwrap();
    assert_eq!(
        (span["status"].as_str(), span["bytes"].as_str()),
        ("200", "5")
    );
    assert!(span["duration_us"].parse::<u64>().is_ok());
    // The event has no fields of its own: the outcome is the span's.
    assert!(!users.fields.contains_key("status"), "{users:?}");
    // What the engine sent, not what the handler returned.
    let switch = done("/switch", "GET");
    let switch_span = switch.request_span.as_ref().unwrap();
    assert_eq!(switch_span["status"], "500");
    assert_eq!(switch_span["bytes"], "30");
    assert_eq!(
        switch.request_span.as_ref().unwrap()["otel.status_code"],
        "ERROR"
    );
    assert_eq!(
        done("/users/8", "HEAD").request_span.as_ref().unwrap()["bytes"],
        "0"
    );
    // Request id generated when none came; the stream's size counted at its end.
    let stream = done("/stream", "GET");
    assert_eq!(stream.request_span.as_ref().unwrap()["bytes"], "30");
    assert_eq!(
        stream.request_span.as_ref().unwrap()["request_id"].len(),
        24
    );
}

#[test]
fn logger_logs_the_wire_status_and_client() {
    // The same subscriber may already be global (tests share the process): only add events.
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = App::new()
        .route("/switch", get(|_r: Request| async { Response::new(101) }))
        .layer(Logger::new());
    let svc = app.into_service();
    let req = peregrine::server::Request::from_bytes(
        b"GET /switch HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
        "127.0.0.1:9".parse().unwrap(),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    use peregrine::server::Service;
    let res = rt.block_on(svc.call(req));
    assert_eq!(
        res.status, 101,
        "the handler's answer, the engine turns it into 500"
    );
    let seen = capture.0.lock().unwrap().clone();
    let ev = seen
        .iter()
        .find(|e| e.target == "peregrine::request")
        .expect("logged");
    assert_eq!(ev.fields["status"], "500");
    assert_eq!(
        ev.fields["client"], "127.0.0.1",
        "no trusted proxies: the peer"
    );
}
