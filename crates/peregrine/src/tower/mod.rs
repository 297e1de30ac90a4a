//! tower interoperability, both directions (cargo feature `tower`):
//!
//! - [`TowerLayer`] applies any `tower::Layer` (tower-http's `TraceLayer`, `CompressionLayer`,
//!   `SetRequestIdLayer`, `TimeoutLayer`, rate limiters...) as a peregrine [`Middleware`], on
//!   the app, a group or a route (and before routing with
//!   [`App::layer_before_routing`]);
//! - [`App::mount_service`] mounts a `tower::Service` (an axum `Router`, a tonic-less gRPC
//!   gateway, any hyper-style service) under a path prefix.
//!
//! The bridge converts between peregrine's types and `http`'s: per request it builds an
//! `http::Request` (method, URI, headers; the body is streamed, not copied), lets the layer
//! run, and converts its `http::Response` back. What a layer changes on the request (method,
//! headers, body, extensions) is what the handler sees; what it changes on the response goes
//! out. Costs are measured in `docs/framework-tower.md`.
//!
//! ```
//! use peregrine::tower::TowerLayer;
//! use peregrine::{get, App, Request};
//! use tower_http::compression::CompressionLayer;
//! use tower_http::request_id::{MakeRequestUuid, SetRequestIdLayer};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = App::new()
//!     .route("/", get(|req: Request| async move {
//!         // A header a tower layer added to the request.
//!         req.header("x-request-id").unwrap_or("none").repeat(20)
//!     }))
//!     .layer(TowerLayer::new(CompressionLayer::new()))
//!     .layer(TowerLayer::new(SetRequestIdLayer::x_request_id(MakeRequestUuid)))
//!     .test();
//! let res = client.get("/").header("accept-encoding", "gzip").send().await;
//! assert_eq!(res.header("content-encoding"), Some("gzip"));
//! # });
//! ```
//!
//! One concept per module: `layer` ([`TowerLayer`], [`NextService`]), `request` and `response`
//! (converting each way between peregrine's types and `http`'s), `body` ([`LocalBody`],
//! [`LocalResBody`]), `stash` (the per-thread place for what is not `Send` while tower holds its
//! `http` form), `response_body_as` ([`ResponseBodyAs`]), `mount` ([`App::mount_service`],
//! [`SendBody`]).
//!
//! [`Middleware`]: crate::middleware::Middleware
//! [`App::layer_before_routing`]: crate::App::layer_before_routing
//! [`App::mount_service`]: crate::App::mount_service

mod body;
mod box_error;
mod layer;
mod mount;
mod request;
mod response;
mod response_body_as;
mod stash;

pub use body::{LocalBody, LocalResBody};
pub use box_error::BoxError;
pub use layer::{NextService, TowerLayer};
pub use mount::SendBody;
pub use response_body_as::{ResponseBodyAs, ResponseBodyAsService};
