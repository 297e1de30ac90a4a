//! One `tracing` span per request, that the handler's own logs nest under, with W3C Trace
//! Context (`traceparent`) propagation.

use super::observe::on_complete;
use super::{Middleware, Next};
use crate::handler::BoxFuture;
use crate::request::Request;
use peregrine_server::{Method, Response};
use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;
use tracing::field::Empty;
use tracing::Instrument;

/// Wraps every request in a span `request` (target `peregrine::request`, level `INFO`) and
/// runs the inner layers and the handler inside it, so whatever they log carries the request's
/// fields. When the response body has been handed to the engine (at once, or at the end of a
/// stream) the span gets its final fields and an access-log event `completed` is emitted in it
/// (the event carries no fields of its own: the outcome is the span's, printed with it by a
/// formatter).
///
/// Span fields: `method`, `route` (the template, `-` if none matched), `path`, `client` (see
/// [`Request::client_addr`]), `peer` (the socket's), `request_id` (from
/// [`RequestIdLayer`](super::RequestIdLayer), wherever it sits in the stack), `trace_id` and
/// `parent_span_id` (from an incoming `traceparent`), then `status` and `bytes` **as written
/// to the wire** (a response the engine refuses to encode is logged as the 500 it sends),
/// `duration_us`, and the OpenTelemetry conventions `otel.name`, `otel.kind`,
/// `otel.status_code`.
///
/// With the `opentelemetry` feature and a `tracing-opentelemetry` layer installed, the span is
/// exported as an OpenTelemetry server span whose parent is the incoming `traceparent`'s: the
/// trace continues across services.
///
/// Cost: when no subscriber is interested in `peregrine::request` at `INFO`, the layer passes
/// the request through after one cached callsite check. Otherwise the fields known at the start
/// are recorded once (values are formatted by the subscriber only if it records them), the
/// outcome in one further call, and the access-log event adds no fields of its own (see
/// `docs/operations.md` for the measured cost).
///
/// ```
/// use peregrine::middleware::{RequestIdLayer, Trace};
/// use peregrine::{get, App, Request};
///
/// async fn hello(_req: Request) -> &'static str {
///     tracing::info!("handler speaking"); // logged inside the request's span
///     "hi"
/// }
/// let app = App::new()
///     .route("/", get(hello))
///     .layer(RequestIdLayer::new())
///     .layer(Trace::new());
/// # let _ = app;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Trace {
    _private: (),
}

impl Trace {
    /// The tracing layer.
    ///
    /// ```
    /// use peregrine::middleware::Trace;
    /// use peregrine::{get, App, Request};
    ///
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Clone, Default)]
    /// # struct Captured(Arc<Mutex<Vec<u8>>>);
    /// # impl std::io::Write for Captured {
    /// #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().extend_from_slice(b); Ok(b.len()) }
    /// #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
    /// # }
    /// # let log = Captured::default();
    /// # let writer = log.clone();
    /// // A subscriber (here one writing into `log`; in a service, `tracing_subscriber::fmt().init()`).
    /// let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    /// let _guard = tracing::subscriber::set_default(subscriber);
    /// async fn show(_req: Request) -> &'static str {
    ///     tracing::info!("loading order"); // carries the request's span
    ///     "order"
    /// }
    ///
    /// let client = App::new().route("/orders/{id}", get(show)).layer(Trace::new()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// client
    ///     .get("/orders/5")
    ///     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    ///     .send()
    ///     .await;
    /// # });
    /// let out = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    /// let handler_line = out.lines().find(|l| l.contains("loading order")).unwrap();
    /// assert!(handler_line.contains("route=/orders/{id}"), "{handler_line}");
    /// assert!(handler_line.contains("trace_id=4bf92f3577b34da6a3ce929d0e0e4736"), "{handler_line}");
    /// assert!(out.lines().any(|l| l.contains("completed") && l.contains("status=200")), "{out}");
    /// ```
    pub fn new() -> Self {
        Trace { _private: () }
    }
}

impl Middleware for Trace {
    fn call(&self, mut req: Request, next: Next) -> BoxFuture<Response> {
        if !tracing::enabled!(target: "peregrine::request", tracing::Level::INFO) {
            return next.run(req);
        }
        let start = Instant::now();
        let route = req.route().unwrap_or("-");
        let span = tracing::info_span!(
            target: "peregrine::request",
            "request",
            otel.name = %OtelName(req.method(), route),
            otel.kind = "server",
            otel.status_code = Empty,
            method = %req.method(),
            route = %route,
            path = %req.path(),
            client = %req.client_addr(),
            peer = %req.peer_addr(),
            request_id = Empty,
            trace_id = Empty,
            parent_span_id = Empty,
            status = Empty,
            bytes = Empty,
            duration_us = Empty,
        );
        if let Some(id) = req.extension::<super::RequestId>() {
            span.record("request_id", id.as_str());
        }
        if let Some(tp) = req.header("traceparent").and_then(TraceParent::parse) {
            span.record("trace_id", tracing::field::display(tp.trace_id_hex()));
            span.record(
                "parent_span_id",
                tracing::field::display(tp.parent_id_hex()),
            );
            #[cfg(feature = "opentelemetry")]
            otel::set_parent(&span, &tp);
            req.insert_extension(tp);
        }
        let head = req.method_kind() == Method::Head;
        // The synchronous part of the inner layers runs in the span too.
        let fut = span.in_scope(|| next.run(req));
        Box::pin(async move {
            let mut res = fut.instrument(span.clone()).await;
            on_complete(&mut res, head, move |status, bytes| {
                let micros = start.elapsed().as_micros() as u64;
                record_outcome(&span, status, bytes, micros);
                // The outcome is in the span (a formatter prints it with the event, an
                // exporter sends it with the span): not repeated here, to format it once.
                tracing::info!(target: "peregrine::request", parent: &span, "completed");
            });
            res
        })
    }
}

/// Records `status`, `bytes`, `duration_us` (and `otel.status_code` for a 5xx) on the request
/// span in one call to the subscriber: one span lookup and one formatting pass instead of
/// four.
fn record_outcome(span: &tracing::Span, status: u16, bytes: u64, micros: u64) {
    use tracing::field::{Field, Value};
    static FIELDS: OnceLock<Option<[Field; 4]>> = OnceLock::new();
    let Some(meta) = span.metadata() else {
        return;
    };
    let set = meta.fields();
    // The span has one callsite, so its fields are found once.
    let found = FIELDS.get_or_init(|| {
        let f = |name| set.field(name);
        Some([
            f("status")?,
            f("bytes")?,
            f("duration_us")?,
            f("otel.status_code")?,
        ])
    });
    let Some([s, b, d, o]) = found else {
        return;
    };
    let error = (status >= 500).then_some("ERROR");
    let values: [(&Field, Option<&dyn Value>); 4] = [
        (s, Some(&status)),
        (b, Some(&bytes)),
        (d, Some(&micros)),
        (o, error.as_ref().map(|e| e as &dyn Value)),
    ];
    span.record_all(&set.value_set(&values));
}

/// `GET /users/{id}`, formatted only if a subscriber records it.
struct OtelName<'a>(&'a str, &'a str);

impl fmt::Display for OtelName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.1)
    }
}

/// A W3C Trace Context `traceparent` (version 00), stored as a request extension by
/// [`Trace`] when the request carries a valid one. Use it to propagate the trace to calls the
/// handler makes ([`TraceParent::child`]).
///
/// ```
/// use peregrine::middleware::TraceParent;
/// let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
/// assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(tp.sampled());
/// assert_eq!(
///     tp.child([1, 2, 3, 4, 5, 6, 7, 8]),
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
/// );
/// assert!(TraceParent::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace (16 bytes, not all zero).
    pub trace_id: [u8; 16],
    /// The caller's span (8 bytes, not all zero).
    pub parent_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` value; `None` if it is not valid per the W3C recommendation
    /// (lower-case hex, version not `ff`, non-zero ids, version 00 exactly 55 characters;
    /// later versions may append `-`-separated data, which is ignored).
    ///
    /// ```
    /// use peregrine::middleware::TraceParent;
    /// let id = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /// assert!(TraceParent::parse(&format!("00-{id}")).is_some());
    /// assert!(TraceParent::parse(&format!("00-{}", id.to_uppercase())).is_none()); // hex must be lower-case
    /// assert!(TraceParent::parse(&format!("00-{id}-extra")).is_none()); // version 00 has no more
    /// assert!(TraceParent::parse(&format!("01-{id}-extra")).is_some()); // a later version may
    /// assert!(TraceParent::parse(&format!("ff-{id}")).is_none());
    /// ```
    pub fn parse(v: &str) -> Option<TraceParent> {
        let b = v.as_bytes();
        if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = hex_u8(&b[0..2])?;
        if version == 0xff || (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, out) in trace_id.iter_mut().enumerate() {
            *out = hex_u8(&b[3 + 2 * i..5 + 2 * i])?;
        }
        let mut parent_id = [0u8; 8];
        for (i, out) in parent_id.iter_mut().enumerate() {
            *out = hex_u8(&b[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_u8(&b[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// Whether the caller sampled this trace (flag bit 0).
    ///
    /// ```
    /// use peregrine::middleware::TraceParent;
    /// let on = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    /// let off = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
    /// assert!(on.sampled() && !off.sampled());
    /// ```
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id in lower-case hex.
    ///
    /// ```
    /// use peregrine::middleware::TraceParent;
    /// let tp = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    /// assert_eq!(tp.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
    /// ```
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The parent span id in lower-case hex (the caller's span).
    ///
    /// ```
    /// use peregrine::middleware::TraceParent;
    /// let tp = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    /// assert_eq!(tp.parent_id_hex(), "b7ad6b7169203331");
    /// ```
    pub fn parent_id_hex(&self) -> String {
        hex(&self.parent_id)
    }

    /// The `traceparent` for an outgoing call made from span `span_id` of this trace.
    ///
    /// ```
    /// use peregrine::middleware::{Trace, TraceParent};
    /// use peregrine::{get, App, Request};
    ///
    /// // The handler calls another service: it passes the trace on, from a span id of its own.
    /// async fn checkout(req: Request) -> String {
    ///     match req.extension::<TraceParent>() {
    ///         Some(tp) => tp.child(*b"\x11\x22\x33\x44\x55\x66\x77\x88"), // the header for the outgoing call
    ///         None => "no trace".to_owned(),
    ///     }
    /// }
    ///
    /// # let _guard = tracing::subscriber::set_default(tracing_subscriber::fmt().with_writer(std::io::sink).finish());
    /// // `Trace` stores the parsed header when a subscriber records requests.
    /// let client = App::new().route("/checkout", get(checkout)).layer(Trace::new()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client
    ///     .get("/checkout")
    ///     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    ///     .send()
    ///     .await;
    /// assert_eq!(res.text(), "00-4bf92f3577b34da6a3ce929d0e0e4736-1122334455667788-01");
    /// # });
    /// ```
    pub fn child(&self, span_id: [u8; 8]) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id_hex(),
            hex(&span_id),
            self.flags
        )
    }
}

fn hex_u8(two: &[u8]) -> Option<u8> {
    let d = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(d(two[0])? << 4 | d(two[1])?)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use super::TraceParent;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// Makes the incoming `traceparent` the remote parent of the request's OpenTelemetry span.
    pub(super) fn set_parent(span: &tracing::Span, tp: &TraceParent) {
        let remote = SpanContext::new(
            TraceId::from_bytes(tp.trace_id),
            SpanId::from_bytes(tp.parent_id),
            TraceFlags::new(tp.flags),
            true,
            TraceState::default(),
        );
        // Fails only when no OpenTelemetry layer is installed: nothing to parent then.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_parsed_strictly() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(ok).unwrap();
        assert_eq!(tp.parent_id_hex(), "00f067aa0ba902b7");
        assert_eq!(tp.flags, 1);
        // Future versions may carry more after a dash; version 00 may not.
        assert!(TraceParent::parse(&format!("01{}-extra", &ok[2..])).is_some());
        for bad in [
            &format!("{ok}-x")[..],
            &ok.to_uppercase(),
            &format!("ff{}", &ok[2..]),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
    }
}
