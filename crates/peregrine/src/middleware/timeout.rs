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
/// let app = peregrine::App::new().layer(Timeout::new(std::time::Duration::from_secs(5)));
/// # let _ = app;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Timeout {
    limit: Duration,
    status: u16,
}

impl Timeout {
    /// A per-request time limit.
    pub fn new(limit: Duration) -> Self {
        Timeout { limit, status: 503 }
    }
    /// Answer with another status instead, e.g. 504 behind a gateway.
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
