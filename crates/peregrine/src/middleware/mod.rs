//! Onion-style middleware, composed once when the application is built.
//!
//! A middleware receives the request and a [`Next`] standing for the rest of the stack; it may
//! act before calling `next.run(req)`, after it (on the response), or not call it at all
//! (short-circuit). Layers are wrapped around each handler when [`App`](crate::App) compiles
//! its routes, so at request time a stack of N layers is N direct calls: nothing is looked up,
//! and a route without layers pays nothing.
//!
//! Order: the layer added last is the outermost (it sees the request first and the response
//! last), as with tower/axum.
//!
//! ```
//! use peregrine::{App, IntoResponse, Request, get};
//! use peregrine::middleware::{from_fn, Next};
//!
//! let app = App::new()
//!     .route("/", get(|_req: Request| async { "hi" }))
//!     .layer(from_fn(|req: Request, next: Next| async move {
//!         if req.header("authorization").is_none() {
//!             return peregrine::Error::unauthorized().into_response(); // short-circuit
//!         }
//!         let mut res = next.run(req).await;                  // inner layers + handler
//!         res.headers.push(("x-checked".into(), b"1"[..].into()));
//!         res
//!     }));
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = app.test();
//! assert_eq!(client.get("/").send().await.status(), 401);
//! let res = client.get("/").header("authorization", "Bearer t").send().await;
//! assert_eq!((res.text(), res.header("x-checked")), ("hi", Some("1")));
//! # });
//! ```

// Accept-Encoding negotiation is shared with static files' precompressed siblings.
#[cfg(any(feature = "compression", feature = "static-files"))]
pub(crate) mod compression;
mod cors;
mod logger;
pub(crate) mod observe;
#[cfg(feature = "rate-limit")]
mod rate_limit;
mod request_id;
mod stack;
mod timeout;
mod trace;

#[cfg(feature = "compression")]
#[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
pub use compression::Compression;
pub use cors::Cors;
pub use logger::Logger;
#[cfg(feature = "rate-limit")]
#[cfg_attr(docsrs, doc(cfg(feature = "rate-limit")))]
pub use rate_limit::RateLimit;
pub use request_id::{RequestId, RequestIdLayer};
pub use stack::{from_fn, FromFn, Hook, Middleware, Next};
pub(crate) use stack::{has_header, wrap, Layer};
pub use timeout::Timeout;
pub use trace::{Trace, TraceParent};
