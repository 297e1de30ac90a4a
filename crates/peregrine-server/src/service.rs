//! The interface between the engine and whatever answers requests.

use crate::{Request, Response};
use std::future::Future;

/// Something that answers requests. One clone is made per worker thread at startup; the futures
/// it returns run on that worker's current-thread runtime and need not be `Send`.
pub trait Service: Clone + Send + 'static {
    /// The future answering one request.
    type Future: Future<Output = Response> + 'static;
    /// Answers `req`. A panic inside the returned future is caught by the engine and answered
    /// with 500 (and `Connection: close`); the worker keeps serving.
    fn call(&self, req: Request) -> Self::Future;
}

/// A [`Service`] made from an async function or closure.
#[derive(Clone)]
pub struct ServiceFn<F>(F);

/// Wraps `f` as a [`Service`].
///
/// ```
/// use peregrine_server::{service_fn, Request, Response};
/// let svc = service_fn(|_req: Request| async { Response::text("Hello, World!") });
/// # let _ = svc;
/// ```
pub fn service_fn<F, Fut>(f: F) -> ServiceFn<F>
where
    F: Fn(Request) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + 'static,
{
    ServiceFn(f)
}

impl<F, Fut> Service for ServiceFn<F>
where
    F: Fn(Request) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + 'static,
{
    type Future = Fut;
    fn call(&self, req: Request) -> Fut {
        (self.0)(req)
    }
}
