use super::observe::on_complete;
use super::{Middleware, Next};
use crate::handler::BoxFuture;
use crate::request::Request;
use peregrine_server::Response;
use std::time::Instant;

/// Logs one `tracing` event per request at `INFO` (target `peregrine::request`): method, path,
/// matched route, status and bytes as written to the wire, duration, client (see
/// [`Request::client_addr`]) and peer. With no subscriber interested, the cost is one cached
/// callsite check. For a span per request that handler logs nest under, use
/// [`Trace`](super::Trace) instead.
///
/// ```
/// let app = peregrine::App::new().layer(peregrine::middleware::Logger::new());
/// # let _ = app;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Logger {
    _private: (),
}

impl Logger {
    /// The logging layer.
    ///
    /// ```
    /// use peregrine::middleware::Logger;
    /// use peregrine::{get, App, Request};
    ///
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Clone, Default)]
    /// # struct Captured(Arc<Mutex<Vec<u8>>>);
    /// # impl std::io::Write for Captured {
    /// #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().extend_from_slice(b); Ok(b.len()) }
    /// #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
    /// # }
    /// # let log = Captured::default();
    /// # let writer = log.clone();
    /// // A subscriber (here one writing into `log`; in a service, `tracing_subscriber::fmt().init()`).
    /// let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    /// let _guard = tracing::subscriber::set_default(subscriber);
    /// let client = App::new()
    ///     .route("/users/{id}", get(|_r: Request| async { "ada" }))
    ///     .layer(Logger::new())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// client.get("/users/7").send().await;
    /// # });
    /// let line = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    /// assert!(line.contains("peregrine::request"), "{line}");
    /// assert!(line.contains("method=GET path=/users/7 route=/users/{id} status=200 bytes=3"), "{line}");
    /// ```
    pub fn new() -> Self {
        Logger { _private: () }
    }
}

impl Middleware for Logger {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        if !tracing::enabled!(target: "peregrine::request", tracing::Level::INFO) {
            return next.run(req);
        }
        // Copy what the event needs before the request moves into the handler.
        let method = req.method().to_owned();
        let path = req.path().to_owned();
        let route = req.route().map(str::to_owned);
        let peer = req.peer_addr();
        let client = req.client_addr();
        let head = req.method_kind() == peregrine_server::Method::Head;
        let start = Instant::now();
        let fut = next.run(req);
        Box::pin(async move {
            let mut res = fut.await;
            on_complete(&mut res, head, move |status, bytes| {
                tracing::info!(
                    target: "peregrine::request",
                    %method,
                    %path,
                    route = %route.as_deref().unwrap_or("-"),
                    status,
                    bytes,
                    micros = start.elapsed().as_micros() as u64,
                    %client,
                    %peer,
                    "request"
                );
            });
            res
        })
    }
}
