//! axum with tower-http's `TraceLayer`, for the cost-of-tracing comparison in
//! `crates/peregrine/bench/observability-cost.sh` (not a lab contract peer: it answers
//! `GET /plaintext` only). `OBS=trace`: a span per request and a response event at INFO, written
//! by `tracing-subscriber`'s fmt layer (as `OBS=trace` in Peregrine's observability example);
//! `OBS=off`: the same router with no layer and no subscriber. `ADDR`, `WORKERS` as the peers.

use axum::routing::get;
use axum::Router;
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing_subscriber::filter::LevelFilter;

async fn plaintext() -> &'static str {
    "Hello, World!"
}

fn main() {
    let addr = peers::addr();
    let mut app = Router::new().route("/plaintext", get(plaintext));
    if std::env::var("OBS").as_deref() != Ok("off") {
        tracing_subscriber::fmt()
            .with_max_level(LevelFilter::INFO)
            .init();
        // `tracing::Level` through the subscriber crate (no extra dependency line).
        let info = LevelFilter::INFO.into_level().expect("INFO is a level");
        app = app.layer(
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(info))
                .on_response(DefaultOnResponse::new().level(info)),
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(peers::workers())
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .expect("bind ADDR");
            axum::serve(listener, app).await.expect("serve");
        });
}
