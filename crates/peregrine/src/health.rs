//! Liveness and readiness endpoints for load balancers and orchestrators, and the drain that
//! makes restarts lossless: on SIGTERM (or [`ServerHandle::shutdown`]) readiness turns false at
//! once while the server keeps accepting for `timeouts.drain_delay`, so the balancer
//! stops sending new connections before the listeners close. The recipe for Kubernetes and
//! HAProxy is in the crate README ("Running in production").
//!
//! ```no_run
//! use peregrine::health::Health;
//! use peregrine::{get, App, Request};
//! use std::time::Duration;
//!
//! // Drain delay > the balancer's check interval × failures.
//! let server = peregrine::ServerConfig::builder().drain_delay(Duration::from_secs(5)).build();
//! let config = peregrine::config::Config::from(server);
//! let health = Health::new(&config.drain_signal); // the signal the server will raise
//! App::new()
//!     .route("/", get(|_r: Request| async { "hi" }))
//!     .route("/livez", health.liveness())
//!     .route("/readyz", health.readiness())
//!     .hook(health.close_when_draining())
//!     .run(config)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`ServerHandle::shutdown`]: peregrine_server::ServerHandle::shutdown

use crate::middleware::Hook;
use crate::request::Request;
use crate::router::{get, MethodRouter};
use peregrine_server::{DrainSignal, Response};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The process's health: the engine's drain signal, plus an application switch for "not ready
/// yet" (warming caches, a dependency down).
///
/// ```
/// use peregrine::health::Health;
/// use peregrine::{get, App, DrainSignal, Request};
///
/// let drain = DrainSignal::default();
/// let health = Health::new(&drain);
/// let client = App::new()
///     .route("/", get(|_r: Request| async { "hi" }))
///     .route("/livez", health.liveness())
///     .route("/readyz", health.readiness())
///     .hook(health.close_when_draining())
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/readyz").send().await.text(), "ready\n");
///
/// drain.start(); // what SIGTERM or `ServerHandle::shutdown` does
/// let ready = client.get("/readyz").send().await;
/// assert_eq!((ready.status(), ready.text()), (503, "draining\n"));
/// assert_eq!(client.get("/livez").send().await.status(), 200); // alive, only leaving
/// assert_eq!(client.get("/").send().await.header("connection"), Some("close"));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Health {
    drain: DrainSignal,
    not_ready: Arc<AtomicBool>,
}

impl Health {
    /// Health tied to `drain`: the drain signal the server will raise (the one in the
    /// [`Config`](crate::config::Config) it runs with, or given to
    /// [`Server::with_drain_signal`](peregrine_server::Server::with_drain_signal)).
    ///
    /// ```
    /// use peregrine::health::Health;
    /// use peregrine::DrainSignal;
    ///
    /// let drain = DrainSignal::default();
    /// let health = Health::new(&drain);
    /// assert!(health.is_ready());
    /// drain.start();
    /// assert!(!health.is_ready()); // the same signal the server raises on shutdown
    /// ```
    pub fn new(drain: &DrainSignal) -> Self {
        Health {
            drain: drain.clone(),
            not_ready: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Marks the application itself ready or not (independent of draining). Ready by default.
    ///
    /// ```
    /// use peregrine::health::Health;
    /// use peregrine::App;
    ///
    /// let health = Health::new(&peregrine::DrainSignal::default());
    /// let client = App::new().route("/readyz", health.readiness()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// health.set_ready(false); // e.g. until the cache is warm
    /// assert_eq!(client.get("/readyz").send().await.status(), 503);
    /// health.set_ready(true);
    /// let res = client.get("/readyz").send().await;
    /// assert_eq!((res.status(), res.text()), (200, "ready\n"));
    /// # });
    /// ```
    pub fn set_ready(&self, ready: bool) {
        self.not_ready.store(!ready, Ordering::Relaxed);
    }

    /// Whether readiness answers 200: not draining and not marked unready.
    ///
    /// ```
    /// use peregrine::health::Health;
    ///
    /// let health = Health::new(&peregrine::DrainSignal::default());
    /// health.set_ready(false);
    /// assert!(!health.is_ready());
    /// health.set_ready(true);
    /// assert!(health.is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        !self.drain.is_draining() && !self.not_ready.load(Ordering::Relaxed)
    }

    /// `GET` (and `HEAD`) answering `200 ok` while the process can serve at all. It stays 200
    /// during a drain: the process is alive, only leaving.
    ///
    /// ```
    /// use peregrine::health::Health;
    /// use peregrine::App;
    ///
    /// let health = Health::new(&peregrine::DrainSignal::default());
    /// let client = App::new().route("/livez", health.liveness()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// health.set_ready(false); // not ready is not dead
    /// let res = client.get("/livez").send().await;
    /// assert_eq!((res.status(), res.text()), (200, "ok\n"));
    /// assert_eq!(client.head("/livez").send().await.status(), 200);
    /// # });
    /// ```
    pub fn liveness(&self) -> MethodRouter {
        get(|_r: Request| async { plain(200, "ok\n") })
    }

    /// `GET` (and `HEAD`) answering `200 ready`, or `503 draining` / `503 not ready` (with
    /// `Connection: close`, so a checker's keep-alive connection does not pin it here).
    ///
    /// ```
    /// use peregrine::health::Health;
    /// use peregrine::{App, DrainSignal};
    ///
    /// let drain = DrainSignal::default();
    /// let health = Health::new(&drain);
    /// let client = App::new().route("/readyz", health.readiness()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// drain.start();
    /// let res = client.get("/readyz").send().await;
    /// assert_eq!((res.status(), res.text()), (503, "draining\n"));
    /// assert_eq!(res.header("connection"), Some("close"));
    /// # });
    /// ```
    pub fn readiness(&self) -> MethodRouter {
        let me = self.clone();
        get(move |_r: Request| {
            let res = if me.drain.is_draining() {
                plain(503, "draining\n").with_header("connection", &b"close"[..])
            } else if me.not_ready.load(Ordering::Relaxed) {
                plain(503, "not ready\n")
            } else {
                plain(200, "ready\n")
            };
            async move { res }
        })
    }

    /// A hook that adds `Connection: close` to every response once draining has started, so
    /// keep-alive clients move to other instances during the drain delay instead of being cut
    /// off when the server stops.
    ///
    /// ```
    /// use peregrine::health::Health;
    /// use peregrine::{get, App, DrainSignal, Request};
    ///
    /// let drain = DrainSignal::default();
    /// let health = Health::new(&drain);
    /// let client = App::new()
    ///     .route("/api/items", get(|_r: Request| async { "[]" }))
    ///     .hook(health.close_when_draining())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/api/items").send().await.header("connection"), None);
    /// drain.start();
    /// let res = client.get("/api/items").send().await;
    /// assert_eq!((res.text(), res.header("connection")), ("[]", Some("close")));
    /// # });
    /// ```
    pub fn close_when_draining(&self) -> CloseWhenDraining {
        CloseWhenDraining(self.drain.clone())
    }
}

/// See [`Health::close_when_draining`].
#[derive(Debug, Clone)]
pub struct CloseWhenDraining(DrainSignal);

impl Hook for CloseWhenDraining {
    fn after(&self, res: &mut Response) {
        if self.0.is_draining() {
            res.headers
                .push((Cow::Borrowed("connection"), Cow::Borrowed(&b"close"[..])));
        }
    }
}

fn plain(status: u16, body: &'static str) -> Response {
    Response::text(body).with_status(status)
}
