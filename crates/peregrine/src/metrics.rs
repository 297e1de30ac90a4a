//! Prometheus metrics: a layer that counts requests and times them by route template and status
//! class, an engine-event listener for connections and the engine's own refusals, and the
//! `/metrics` endpoint.
//!
//! Built on the `metrics` facade and `metrics-exporter-prometheus` (rather than
//! `prometheus-client`): any library in the process that reports through `metrics` appears in
//! the same scrape, and the exporter renders real Prometheus histograms from our bucket bounds.
//! Without a recorder installed, every `metrics` call is a no-op.
//!
//! **Zero cost when disabled**: nothing here runs unless the application adds the [`Metrics`]
//! layer and gives the engine an [`EngineObserver`] (`Config::with_events`); without them the
//! request path has no metrics code at all.
//!
//! ```
//! use peregrine::metrics::{self, Metrics};
//! use peregrine::{get, App, Request};
//!
//! let prometheus = metrics::install().expect("no other metrics recorder installed");
//! let app = App::new()
//!     .route("/hello/{name}", get(|_r: Request| async { "hi" }))
//!     .route("/metrics", prometheus.endpoint())
//!     .layer(Metrics::new());
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = app.test();
//! client.get("/hello/ada").send().await;
//! client.get("/hello/bob").send().await;
//!
//! let scrape = client.get("/metrics").send().await;
//! // Counted by route template, not by path, so the label set stays bounded.
//! assert!(scrape.text().contains(r#"peregrine_http_requests_total{method="GET",route="/hello/{name}",status="2xx"} 2"#));
//! assert!(scrape.text().contains("peregrine_http_request_duration_seconds_bucket{"));
//! # });
//! ```
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `peregrine_http_requests_total` | counter | `method`, `route`, `status` (`2xx`...) |
//! | `peregrine_http_request_duration_seconds` | histogram | `method`, `route`, `status` |
//! | `peregrine_http_request_body_bytes_total` | counter | `route` (declared `Content-Length`) |
//! | `peregrine_http_response_body_bytes_total` | counter | `route` (as written to the wire) |
//! | `peregrine_rejections_total` | counter | `reason` (engine refusals, `rate_limited`) |
//! | `peregrine_connections_open` | gauge | `worker` |
//! | `peregrine_connections_idle` | gauge | `worker` (keep-alive connections waiting) |
//! | `peregrine_connections_total` | counter | `worker` |
//! | `peregrine_transport_received_bytes_total` | counter | `worker` (read from the socket) |
//! | `peregrine_transport_sent_bytes_total` | counter | `worker` (written to the socket) |
//!
//! The idle gauge and the byte counters are the engine's own counts, reported by each worker a
//! few times per idle timeout (at least once a second), not per request; the byte counters
//! count every byte read and written on HTTP/1 connections (heads, bodies, chunk framing; for
//! TLS the plaintext), unlike the `_body_bytes_` counters of the requests.

use crate::handler::BoxFuture;
use crate::middleware::observe::{on_complete, status_class};
use crate::middleware::{Middleware, Next};
use crate::request::Request;
use crate::router::{get, MethodRouter};
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use peregrine_server::events::{
    ConnectionClosed, ConnectionOpened, EngineEvents, Rejection, WorkerStats,
};
use peregrine_server::{Method, Response};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Latency bucket bounds, seconds: 100 µs to 10 s, roughly ×2.5 apart.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

static INSTALLED: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus recorder, to render scrapes.
#[derive(Clone)]
pub struct Prometheus {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prometheus")
    }
}

/// Installs the Prometheus recorder as the process's `metrics` recorder (once; later calls
/// return the same one) and starts its upkeep thread (which drains histogram samples every
/// 5 s so memory stays bounded between scrapes).
///
/// Fails if another `metrics` recorder was installed by someone else first.
///
/// ```
/// use peregrine::metrics;
///
/// let prometheus = metrics::install()?;
/// // Any library reporting through the `metrics` facade lands in the same scrape.
/// ::metrics::counter!("orders_placed_total", "channel" => "web").increment(3);
/// assert!(prometheus.render().contains(r#"orders_placed_total{channel="web"} 3"#));
/// // Installing again gives the same recorder.
/// assert!(metrics::install()?.render().contains("orders_placed_total"));
/// # Ok::<(), String>(())
/// ```
pub fn install() -> Result<Prometheus, String> {
    if let Some(h) = INSTALLED.get() {
        return Ok(Prometheus { handle: h.clone() });
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("peregrine_http_request_duration_seconds".into()),
            LATENCY_BUCKETS,
        )
        .map_err(|e| e.to_string())?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| e.to_string())?;
    let handle = INSTALLED.get_or_init(|| handle).clone();
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("peregrine-metrics".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_secs(5));
            upkeep.run_upkeep();
        })
        .map_err(|e| e.to_string())?;
    Ok(Prometheus { handle })
}

impl Prometheus {
    /// The current scrape, in the Prometheus text format (to push it somewhere, or serve it
    /// from a handler of your own).
    ///
    /// ```
    /// use peregrine::metrics::{self, Prometheus};
    /// use peregrine::{get, App, Error, Request, State};
    ///
    /// // A scrape behind a token, with the recorder kept as shared state.
    /// async fn scrape(req: Request, State(p): State<Prometheus>) -> Result<String, Error> {
    ///     if req.header("authorization") != Some("Bearer scrape-token") {
    ///         return Err(Error::unauthorized());
    ///     }
    ///     Ok(p.render())
    /// }
    ///
    /// let prometheus = metrics::install()?;
    /// ::metrics::gauge!("queue_depth").set(4.0);
    /// let client = App::new().with_state(prometheus).route("/internal/metrics", get(scrape)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/internal/metrics").send().await.status(), 401);
    /// let res = client.get("/internal/metrics").header("authorization", "Bearer scrape-token").send().await;
    /// assert!(res.text().contains("queue_depth 4"));
    /// # });
    /// # Ok::<(), String>(())
    /// ```
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// A `GET` route answering the scrape (`text/plain; version=0.0.4`).
    ///
    /// ```
    /// use peregrine::{metrics, App};
    ///
    /// let client = App::new().route("/metrics", metrics::install()?.endpoint()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/metrics").send().await;
    /// assert_eq!(res.status(), 200);
    /// assert_eq!(res.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    /// # });
    /// # Ok::<(), String>(())
    /// ```
    pub fn endpoint(&self) -> MethodRouter {
        let me = self.clone();
        get(move |_req: Request| {
            let body = me.render();
            async move {
                Response::new(200)
                    .with_header(
                        "content-type",
                        Cow::Borrowed(&b"text/plain; version=0.0.4; charset=utf-8"[..]),
                    )
                    .with_body(peregrine_server::ResponseBody::Full(body.into()))
            }
        })
    }
}

/// Counts and times every request by method, route template and status class (the status as
/// written to the wire, at the end of the body for streams). Unmatched paths count as route
/// `-`, methods outside the standard ones as `OTHER`, so label sets stay bounded whatever
/// clients send.
///
/// Handles to the per-label series are cached per worker thread: after the first request of a
/// kind, a request costs a small hash lookup and a few atomic adds.
///
/// ```
/// use peregrine::metrics::{self, Metrics};
/// use peregrine::{get, App, Request};
///
/// let prometheus = metrics::install()?;
/// let client = App::new()
///     .route("/orders/{id}", get(|_r: Request| async { "order" }))
///     .layer(Metrics::new())
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// client.get("/orders/17").send().await;
/// client.get("/no/such/page").send().await; // 404: route "-"
/// let scrape = prometheus.render();
/// assert!(scrape.contains(r#"peregrine_http_requests_total{method="GET",route="/orders/{id}",status="2xx"} 1"#));
/// assert!(scrape.contains(r#"peregrine_http_requests_total{method="GET",route="-",status="4xx"} 1"#));
/// # });
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics {
    _private: (),
}

impl Metrics {
    /// The metrics layer.
    pub fn new() -> Self {
        Metrics { _private: () }
    }
}

struct Series {
    route: Box<str>,
    requests: Counter,
    duration: Histogram,
    body_in: Counter,
    body_out: Counter,
}

thread_local! {
    /// (route pattern address, method, status class) → handles; the pattern text is kept and
    /// compared so an address reused by another application is not mistaken for the old one.
    static SERIES: RefCell<HashMap<(usize, u8, u8), Series>> = RefCell::new(HashMap::new());
}

fn method_label(m: Method) -> &'static str {
    match m {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        Method::Options => "OPTIONS",
        Method::Patch => "PATCH",
        Method::Connect => "CONNECT",
        Method::Trace => "TRACE",
        Method::Other => "OTHER",
    }
}

fn record(route: &str, method: Method, status: u16, secs: f64, body_in: u64, out: u64) {
    let class = status_class(status);
    let key = (route.as_ptr() as usize, method as u8, (status / 100) as u8);
    SERIES.with(|cell| {
        let mut map = cell.borrow_mut();
        let fresh = |route: &str| {
            let labels = [
                ("method", method_label(method).to_owned()),
                ("route", route.to_owned()),
                ("status", class.to_owned()),
            ];
            Series {
                route: route.into(),
                requests: metrics::counter!("peregrine_http_requests_total", &labels),
                duration: metrics::histogram!("peregrine_http_request_duration_seconds", &labels),
                body_in: metrics::counter!(
                    "peregrine_http_request_body_bytes_total",
                    "route" => route.to_owned()
                ),
                body_out: metrics::counter!(
                    "peregrine_http_response_body_bytes_total",
                    "route" => route.to_owned()
                ),
            }
        };
        let s = map.entry(key).or_insert_with(|| fresh(route));
        if &*s.route != route {
            *s = fresh(route);
        }
        s.requests.increment(1);
        s.duration.record(secs);
        if body_in > 0 {
            s.body_in.increment(body_in);
        }
        if out > 0 {
            s.body_out.increment(out);
        }
    });
}

impl Middleware for Metrics {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let start = Instant::now();
        // The application's context holds the route patterns: keep it (one reference count)
        // rather than copying the pattern per request.
        let ctx = req.ctx.clone();
        let route_index = req.route;
        let method = req.method_kind();
        let body_in = req.content_length().unwrap_or(0);
        let head = method == Method::Head;
        let fut = next.run(req);
        Box::pin(async move {
            let mut res = fut.await;
            on_complete(&mut res, head, move |status, bytes| {
                let route = ctx.route(route_index).map_or("-", |r| &*r.pattern);
                record(
                    route,
                    method,
                    status,
                    start.elapsed().as_secs_f64(),
                    body_in,
                    bytes,
                );
            });
            res
        })
    }
}

/// Connection gauges and the engine's own refusals, for `Config::with_events`; it also writes
/// each refusal to the access log (target `peregrine::request`, event `rejected`, with its
/// `reason`), next to the requests handlers answered.
///
/// ```
/// use peregrine::metrics::EngineObserver;
/// use peregrine::config::Config;
/// use peregrine::server::ServerConfig;
/// use std::sync::Arc;
/// let config = Config::from(ServerConfig::default()).with_events(Arc::new(EngineObserver::new()));
/// # let _ = config;
/// ```
#[derive(Debug, Default)]
pub struct EngineObserver {
    _private: (),
}

impl EngineObserver {
    /// The observer.
    pub fn new() -> Self {
        EngineObserver { _private: () }
    }
}

struct WorkerGauges {
    open: metrics::Gauge,
    idle: metrics::Gauge,
    opened: Counter,
    bytes_in: Counter,
    bytes_out: Counter,
}

thread_local! {
    /// Each worker is one thread: its gauges, made once.
    static WORKER: RefCell<Option<WorkerGauges>> = const { RefCell::new(None) };
}

fn with_worker(worker: usize, f: impl FnOnce(&WorkerGauges)) {
    WORKER.with(|cell| {
        let mut g = cell.borrow_mut();
        let g = g.get_or_insert_with(|| {
            let w = worker.to_string();
            WorkerGauges {
                open: metrics::gauge!("peregrine_connections_open", "worker" => w.clone()),
                idle: metrics::gauge!("peregrine_connections_idle", "worker" => w.clone()),
                opened: metrics::counter!("peregrine_connections_total", "worker" => w.clone()),
                bytes_in: metrics::counter!(
                    "peregrine_transport_received_bytes_total",
                    "worker" => w.clone()
                ),
                bytes_out: metrics::counter!("peregrine_transport_sent_bytes_total", "worker" => w),
            }
        });
        f(g)
    })
}

impl EngineEvents for EngineObserver {
    fn connection_opened(&self, ev: &ConnectionOpened) {
        with_worker(ev.worker, |g| {
            g.open.increment(1.0);
            g.opened.increment(1);
        });
        tracing::debug!(target: "peregrine::connection", peer = %ev.peer, worker = ev.worker, "opened");
    }

    fn connection_closed(&self, ev: &ConnectionClosed) {
        with_worker(ev.worker, |g| g.open.decrement(1.0));
        tracing::debug!(
            target: "peregrine::connection",
            peer = %ev.peer,
            worker = ev.worker,
            duration_us = ev.duration.as_micros() as u64,
            "closed"
        );
    }

    fn worker_stats(&self, ev: &WorkerStats) {
        with_worker(ev.worker, |g| {
            g.open.set(ev.open as f64);
            g.idle.set(ev.idle as f64);
            g.bytes_in.absolute(ev.bytes_in);
            g.bytes_out.absolute(ev.bytes_out);
        });
    }

    fn rejected(&self, ev: &Rejection<'_>) {
        metrics::counter!("peregrine_rejections_total", "reason" => ev.reason.as_str())
            .increment(1);
        tracing::info!(
            target: "peregrine::request",
            reason = ev.reason.as_str(),
            status = ev.status,
            bytes = ev.bytes_out,
            method = ev.method.unwrap_or("-"),
            path = ev.target.unwrap_or("-"),
            detail = ev.detail,
            peer = %ev.peer,
            worker = ev.worker,
            "rejected"
        );
    }
}
