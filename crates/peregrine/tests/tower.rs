//! tower interop (feature `tower`): tower-http layers on the app, a route and before routing;
//! an axum Router mounted under a prefix. Run with `cargo test -p peregrine --features tower`.
#![cfg(feature = "tower")]

mod common;
use common::gunzip_text;

use peregrine::tower::TowerLayer;
use peregrine::{get, post, App, Error, Json, Request, StreamBody};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower_http::compression::CompressionLayer;
use tower_http::normalize_path::NormalizePathLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

fn big() -> String {
    "peregrine falcon ".repeat(200)
}

#[tokio::test]
async fn trace_layer_sees_every_request() {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let trace = TraceLayer::new_for_http().on_response(
        move |res: &http::Response<_>, _latency: Duration, _span: &tracing::Span| {
            assert!(res.status().is_success() || res.status() == 404);
            s.fetch_add(1, Ordering::SeqCst);
        },
    );
    let c = App::new()
        .route("/", get(|_r: Request| async { "hi" }))
        .layer(TowerLayer::new(trace))
        .test();
    let r = c.get("/").send().await;
    assert_eq!(r.text(), "hi");
    // TraceLayer wraps the body; a body ready at once still goes out whole (content-length),
    // not chunked: the test client sees what the engine would frame.
    assert!(!r.is_streamed());
    assert_eq!(c.get("/missing").send().await.status(), 404);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn compression_layer_compresses_full_and_streamed_bodies() {
    let c = App::new()
        .route("/full", get(|_r: Request| async { big() }))
        .route(
            "/stream",
            get(|_r: Request| async {
                let (tx, body) = StreamBody::channel(4);
                tokio::task::spawn_local(async move {
                    for _ in 0..4 {
                        tx.send("peregrine falcon ".repeat(50)).await.unwrap();
                    }
                });
                body.content_type("text/plain")
            }),
        )
        .layer(TowerLayer::new(CompressionLayer::new()))
        .test();
    let r = c
        .get("/full")
        .header("accept-encoding", "gzip")
        .send()
        .await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert!(r.bytes().len() < big().len() / 4);
    assert_eq!(gunzip_text(r.bytes()), big());
    // No content-length from the layer: the engine frames the body.
    assert!(r.header("content-length").is_none());
    let r = c
        .get("/stream")
        .header("accept-encoding", "gzip")
        .send()
        .await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip_text(r.bytes()), "peregrine falcon ".repeat(200));
    // Without accept-encoding the body passes through untouched.
    let r = c.get("/full").send().await;
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.text(), big());
}

#[tokio::test]
async fn request_id_layers_change_the_request_the_handler_sees() {
    let c = App::new()
        .route(
            "/",
            get(|req: Request| async move {
                let from_ext = req
                    .extension::<http::Extensions>()
                    .and_then(|e| e.get::<tower_http::request_id::RequestId>())
                    .is_some();
                format!(
                    "{} {from_ext}",
                    req.header("x-request-id").unwrap_or("none")
                )
            }),
        )
        .layer(TowerLayer::new(PropagateRequestIdLayer::x_request_id()))
        .layer(TowerLayer::new(SetRequestIdLayer::x_request_id(
            MakeRequestUuid,
        )))
        .test();
    let r = c.get("/").send().await;
    let id = r
        .header("x-request-id")
        .expect("propagated to the response")
        .to_owned();
    assert_eq!(id.len(), 36);
    assert_eq!(r.text(), format!("{id} true"));
    // A client's id is kept.
    let r = c.get("/").header("x-request-id", "abc").send().await;
    assert_eq!(r.text(), "abc true");
}

#[tokio::test]
async fn timeout_layer_answers_for_a_slow_route_only() {
    let c = App::new()
        .route(
            "/slow",
            get(|_r: Request| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            })
            .layer(TowerLayer::new(TimeoutLayer::with_status_code(
                http::StatusCode::REQUEST_TIMEOUT,
                Duration::from_millis(20),
            ))),
        )
        .route("/fast", get(|_r: Request| async { "ok" }))
        .layer(TowerLayer::new(SetResponseHeaderLayer::overriding(
            http::header::HeaderName::from_static("x-app"),
            http::HeaderValue::from_static("peregrine"),
        )))
        .test();
    let r = c.get("/slow").send().await;
    assert_eq!(r.status(), 408);
    assert_eq!(r.header("x-app"), Some("peregrine"));
    let r = c.get("/fast").send().await;
    assert_eq!((r.status(), r.text()), (200, "ok"));
}

#[tokio::test]
async fn a_tower_layer_before_routing_rewrites_the_path() {
    let c = App::new()
        .route("/users", get(|_r: Request| async { "users" }))
        .layer_before_routing(TowerLayer::new(NormalizePathLayer::trim_trailing_slash()))
        .test();
    assert_eq!(c.get("/users/").send().await.text(), "users");
    // Without the layer, the trailing slash is another path.
    let plain = App::new()
        .route("/users", get(|_r: Request| async { "users" }))
        .test();
    assert_eq!(plain.get("/users/").send().await.status(), 404);
}

#[tokio::test]
async fn a_request_body_transformed_by_a_layer_is_read_up_to_the_limit() {
    // tower's MapRequestBody stands for any body-transforming layer (decompression...).
    use http_body_util::BodyExt;
    let upper =
        tower::util::MapRequestLayer::new(|req: http::Request<peregrine::tower::LocalBody>| {
            req.map(|b| {
                b.map_frame(|f| {
                    f.map_data(|d: bytes::Bytes| bytes::Bytes::from(d.to_ascii_uppercase()))
                })
            })
        });
    let c = App::new()
        .route(
            "/",
            post(|mut req: Request| async move { req.text().await }),
        )
        .body_limit(8)
        .layer(TowerLayer::new(upper))
        .test();
    let r = c.post("/").body("shout").send().await;
    assert_eq!(r.text(), "SHOUT");
    let r = c.post("/").body("far too long").send().await;
    assert_eq!(r.status(), 413);
}

#[tokio::test]
async fn an_axum_router_is_mounted_under_a_prefix() {
    use axum::extract::{Json as AxJson, Path};
    use axum::routing::{get as ax_get, post as ax_post};
    let legacy = axum::Router::new()
        .route("/", ax_get(|| async { "axum root" }))
        .route(
            "/users/{id}",
            ax_get(|Path(id): Path<u32>| async move { format!("axum user {id}") }),
        )
        .route(
            "/echo",
            ax_post(|AxJson(v): AxJson<serde_json::Value>| async move { AxJson(v) }),
        );
    let c = App::new()
        .route(
            "/native",
            get(|_r: Request| async {
                Ok::<_, Error>(Json(serde_json::json!({"from": "peregrine"})))
            }),
        )
        .mount_service("/legacy", legacy)
        .test();
    assert_eq!(c.get("/legacy/users/7").send().await.text(), "axum user 7");
    assert_eq!(c.get("/legacy").send().await.text(), "axum root");
    let r = c
        .post("/legacy/echo?x=1")
        .json(&serde_json::json!({"big": "x".repeat(100_000)}))
        .send()
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<serde_json::Value>()["big"].as_str().unwrap().len(),
        100_000
    );
    // axum's own 404 inside the mount; peregrine's outside it.
    assert_eq!(c.get("/legacy/nope").send().await.status(), 404);
    assert_eq!(
        c.get("/native").send().await.json::<serde_json::Value>()["from"],
        "peregrine"
    );
    assert_eq!(c.get("/legacyx").send().await.status(), 404);
}

/// A `!Send` streamed body (as a worker-local stream would be), to show it survives the
/// governor layer through `ResponseBodyAs`.
fn local_stream() -> StreamBody {
    let not_send = std::rc::Rc::new(());
    StreamBody::new(futures_util::stream::iter((0..3).map(move |i| {
        let _keep = &not_send;
        Ok::<_, std::io::Error>(bytes::Bytes::from(format!("part {i};")))
    })))
}

/// Rate-limit key: the connection's peer IP, from the `SocketAddr` extension the bridge sets
/// (tower_governor's `PeerIpKeyExtractor` reads axum's `ConnectInfo` only).
#[derive(Clone)]
struct PeerIp;

impl tower_governor::key_extractor::KeyExtractor for PeerIp {
    type Key = std::net::IpAddr;
    fn extract<T>(
        &self,
        req: &http::Request<T>,
    ) -> Result<Self::Key, tower_governor::GovernorError> {
        req.extensions()
            .get::<std::net::SocketAddr>()
            .map(|a| a.ip())
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

#[tokio::test]
async fn tower_governor_limits_through_response_body_as() {
    use peregrine::tower::ResponseBodyAs;
    use tower_governor::{governor::GovernorConfigBuilder, GovernorLayer};
    // Per client IP: a burst of 3, then one request per 60 s (nothing refills during the test).
    let config = GovernorConfigBuilder::default()
        .key_extractor(PeerIp)
        .per_second(60)
        .burst_size(3)
        .finish()
        .unwrap();
    let client = App::new()
        .route("/", get(|_req: Request| async { "ok" }))
        .route("/stream", get(|_req: Request| async { local_stream() }))
        .layer(TowerLayer::new(
            tower::ServiceBuilder::new()
                .layer(GovernorLayer::new(Arc::new(config)))
                .layer(ResponseBodyAs::<axum::body::Body>::new()),
        ))
        .test()
        .with_peer("203.0.113.9:5000".parse().unwrap());
    let r = client.get("/").send().await;
    assert_eq!((r.status(), r.text()), (200, "ok"));
    // A streamed body is sent as is (set aside past the layer, not lost or buffered).
    let r = client.get("/stream").send().await;
    assert_eq!((r.status(), r.text()), (200, "part 0;part 1;part 2;"));
    assert!(r.is_streamed());
    assert_eq!(client.get("/").send().await.status(), 200);
    // The fourth request within the window: governor's own 429.
    let r = client.get("/").send().await;
    assert_eq!(r.status(), 429);
    assert!(r.text().starts_with("Too Many Requests"), "{}", r.text());
}
