//! What a tower layer costs against the equivalent native hook, for
//! `crates/peregrine/bench/cpu-per-request.sh` (see `docs/framework-tower.md`):
//!
//! - `/plaintext`: no layer (the baseline the script divides by);
//! - `/native`: a native [`Hook`] adding `x-frame-options: DENY` to the response;
//! - `/tower`: tower-http's `SetResponseHeaderLayer` doing the same, through [`TowerLayer`];
//! - `/tower-trace`: tower-http's `TraceLayer` (no subscriber installed: its spans are off).
//!
//! ```sh
//! cargo build --release -p peregrine --features tower --example tower_cost
//! PATHS="/plaintext /native /tower /tower-trace" \
//!   crates/peregrine/bench/cpu-per-request.sh target/release/examples/tower_cost
//! ```

use peregrine::middleware::Hook;
use peregrine::tower::TowerLayer;
use peregrine::{get, App, Request, Response};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

async fn plaintext(_req: Request) -> &'static str {
    "Hello, World!"
}

/// The native equivalent of `SetResponseHeaderLayer::overriding(x-frame-options, DENY)`.
struct FrameOptions;

impl Hook for FrameOptions {
    fn after(&self, res: &mut Response) {
        res.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("x-frame-options"));
        res.headers
            .push(("x-frame-options".into(), b"DENY"[..].into()));
    }
}

fn app() -> App {
    App::new()
        .route("/plaintext", get(plaintext))
        .route("/native", get(plaintext).hook(FrameOptions))
        .route(
            "/tower",
            get(plaintext).layer(TowerLayer::new(SetResponseHeaderLayer::overriding(
                http::header::X_FRAME_OPTIONS,
                http::HeaderValue::from_static("DENY"),
            ))),
        )
        .route(
            "/tower-trace",
            get(plaintext).layer(TowerLayer::new(TraceLayer::new_for_http())),
        )
}

fn main() {
    let config = match peregrine::config::from_env_and_args(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tower_cost: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = app().run(config) {
        eprintln!("tower_cost: {e}");
        std::process::exit(1);
    }
}
