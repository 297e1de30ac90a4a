use super::{Middleware, Next};
use crate::error::Error;
use crate::handler::BoxFuture;
use crate::request::Request;
use crate::response::IntoResponse;
use peregrine_server::Response;
use std::time::Duration;

/// Answers `503 Service Unavailable` (a problem document) when the inner layers and handler
/// take longer than the limit; the handler's future is dropped at that point (cancelled).
///
/// ```
/// use peregrine::middleware::Timeout;
/// use peregrine::{get, App, Request};
/// use std::time::Duration;
///
/// async fn slow_report(_req: Request) -> &'static str {
///     tokio::time::sleep(Duration::from_secs(30)).await; // a stuck dependency
///     "report"
/// }
///
/// let client = App::new()
///     .route("/report", get(slow_report))
///     .route("/fast", get(|_r: Request| async { "fast" }))
///     .layer(Timeout::new(Duration::from_secs(5)))
///     .test();
/// // (The clock is paused in this example, so it does not wait 5 s.)
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let res = client.get("/report").send().await;
/// assert_eq!(res.status(), 503);
/// assert_eq!(res.header("content-type"), Some("application/problem+json"));
/// assert_eq!(client.get("/fast").send().await.text(), "fast");
/// # });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Timeout {
    limit: Duration,
    status: u16,
}

impl Timeout {
    /// A per-request time limit (the handler and the layers inside this one; the body of a
    /// streamed response is not counted).
    ///
    /// ```
    /// use peregrine::middleware::Timeout;
    /// use peregrine::{get, App, Request};
    /// use std::time::Duration;
    ///
    /// // A tighter limit for one group of routes.
    /// let search = peregrine::Router::new()
    ///     .route("/search", get(|_r: Request| async {
    ///         tokio::time::sleep(Duration::from_millis(800)).await;
    ///         "results"
    ///     }))
    ///     .layer(Timeout::new(Duration::from_millis(500)));
    /// let client = App::new().merge(search).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
    /// assert_eq!(client.get("/search").send().await.status(), 503);
    /// # });
    /// ```
    pub fn new(limit: Duration) -> Self {
        Timeout { limit, status: 503 }
    }
    /// Answer with another status instead, e.g. 504 behind a gateway.
    ///
    /// ```
    /// use peregrine::middleware::Timeout;
    /// use peregrine::{get, App, Request};
    /// use std::time::Duration;
    ///
    /// let client = App::new()
    ///     .route("/upstream", get(|_r: Request| async {
    ///         tokio::time::sleep(Duration::from_secs(60)).await;
    ///         "late"
    ///     }))
    ///     .layer(Timeout::new(Duration::from_secs(10)).with_status(504))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
    /// assert_eq!(client.get("/upstream").send().await.status(), 504);
    /// # });
    /// ```
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}

impl Middleware for Timeout {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let Timeout { limit, status } = *self;
        let fut = next.run(req);
        Box::pin(async move {
            match tokio::time::timeout(limit, fut).await {
                Ok(res) => res,
                Err(_) => {
                    tracing::warn!(limit_ms = limit.as_millis() as u64, "request timed out");
                    Error::new(status)
                        .with_detail("the request took too long")
                        .into_response()
                }
            }
        })
    }
}
