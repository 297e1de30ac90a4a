//! Handlers: async functions from [`Request`] to anything that is [`IntoResponse`].

use crate::request::Request;
use crate::response::IntoResponse;
use peregrine_server::Response;
use std::future::Future;
use std::pin::Pin;

/// A boxed future that need not be `Send`: handler futures run on the worker thread that owns
/// the connection (thread-per-core), so they may hold `Rc`s and `RefCell` borrows.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + 'static>>;

/// Something that answers a request. Implemented for every
/// `async fn(Request) -> impl IntoResponse` (and closures returning such futures); the usual
/// return type is `Result<T, Error>`.
///
/// ```
/// use peregrine::{App, Error, Json, Request, get};
///
/// async fn hello(_req: Request) -> &'static str {
///     "Hello, World!"
/// }
/// async fn user(req: Request) -> Result<Json<serde_json::Value>, Error> {
///     let id: u64 = req.param("id")?;
///     Ok(Json(serde_json::json!({ "id": id })))
/// }
/// let app = App::new()
///     .route("/", get(hello))
///     .route("/users/{id}", get(user))
///     .route("/inline", get(|_req: Request| async { "closures work too" }));
/// # let _ = app;
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Answers `req`.
    fn call(&self, req: Request) -> BoxFuture<Response>;
}

impl<F, Fut, R> Handler for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoResponse,
{
    #[inline]
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let fut = self(req);
        // The one allocation per request on the handler path: the handler's future, boxed
        // together with the conversion of its output.
        Box::pin(async move { fut.await.into_response() })
    }
}
