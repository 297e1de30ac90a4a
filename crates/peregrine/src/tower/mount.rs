//! [`App::mount_service`]: a `tower::Service` (an axum `Router`...) mounted under a path
//! prefix, with its `Send` request body ([`SendBody`]) fed from the engine's.

use super::box_error::{service_error, BoxError};
use super::request::uri_of;
use super::response::from_http;
use crate::app::App;
use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::{Buf, Bytes};
use http_body::{Body as HttpBody, Frame, SizeHint};
use peregrine_server::{Body, BodyError, Response};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

/// The request body a mounted service sees: `Send` (axum requires it), fed from the engine's
/// body as the service reads it, with backpressure (a channel of one chunk).
///
/// ```
/// use peregrine::App;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // An axum handler reading the whole body (`String`), mounted under `/legacy`.
/// let legacy = axum::Router::new().route("/echo", axum::routing::post(|body: String| async move {
///     format!("axum got {} bytes", body.len())
/// }));
/// let client = App::new().mount_service("/legacy", legacy).test();
/// let res = client.post("/legacy/echo").body("x".repeat(100_000)).send().await;
/// assert_eq!(res.text(), "axum got 100000 bytes");
/// # });
/// ```
pub struct SendBody {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, BodyError>>,
    exact: Option<u64>,
}

impl HttpBody for SendBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// A `tower::Service` mounted under a prefix (see [`App::mount_service`]).
struct Mounted<S> {
    prefix: Box<str>,
    svc: S,
}

impl<S, B> Handler for Mounted<S>
where
    S: Service<http::Request<SendBody>, Response = http::Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<BoxError>,
    S::Future: 'static,
    B: HttpBody + 'static,
    B::Data: Buf,
    B::Error: Into<BoxError>,
{
    fn call(&self, mut req: Request) -> BoxFuture<Response> {
        let rest = req.path()[self.prefix.len()..].to_owned();
        let path = if rest.is_empty() {
            "/".to_owned()
        } else {
            rest
        };
        let mut builder = http::Request::builder()
            .method(req.method())
            .uri(uri_of(&path, req.query_string()))
            .version(http::Version::HTTP_11)
            .extension(req.peer_addr());
        if let Some(h) = builder.headers_mut() {
            for (n, v) in req.headers() {
                if let (Ok(n), Ok(v)) = (
                    http::HeaderName::from_bytes(n.as_bytes()),
                    http::HeaderValue::from_bytes(v),
                ) {
                    h.append(n, v);
                }
            }
        }
        // The application's body limit holds here too: a declared length past it is answered
        // 413 before the service runs, a longer stream is cut (the service sees a body error).
        let limit = req.body_limit();
        if req.content_length().is_some_and(|n| n > limit) {
            let res = crate::request::body_error(peregrine_server::BodyError::TooLarge);
            return Box::pin(std::future::ready(res.into_response()));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let body = SendBody {
            rx,
            exact: req.content_length(),
        };
        let http_req = match builder.body(body) {
            Ok(r) => r,
            Err(e) => {
                let res = Error::bad_request()
                    .with_detail(format!(
                        "request not representable for the mounted service: {e}"
                    ))
                    .into_response();
                return Box::pin(std::future::ready(res));
            }
        };
        let mut svc = self.svc.clone();
        let mut engine_body = std::mem::replace(req.inner.body_mut(), Body::empty());
        Box::pin(async move {
            // Feeds the service's Send body from ours, as it reads; runs beside the call (no
            // task spawned: the handler's future drives both).
            let pump = async move {
                let mut read = 0u64;
                loop {
                    let chunk = engine_body.chunk().await;
                    let item = match chunk {
                        Ok(Some(b)) => {
                            read = read.saturating_add(b.len() as u64);
                            if read > limit {
                                Err(peregrine_server::BodyError::TooLarge)
                            } else {
                                Ok(b)
                            }
                        }
                        Ok(None) => break,
                        Err(e) => Err(e),
                    };
                    let done = item.is_err();
                    if tx.send(item).await.is_err() || done {
                        break;
                    }
                }
            };
            let call = async move {
                if let Err(e) = std::future::poll_fn(|cx| svc.poll_ready(cx)).await {
                    return service_error(e.into());
                }
                match svc.call(http_req).await {
                    Ok(res) => from_http(res),
                    Err(e) => service_error(e.into()),
                }
            };
            let mut pump = std::pin::pin!(pump);
            let mut call = std::pin::pin!(call);
            let mut pumping = true;
            std::future::poll_fn(|cx| {
                if pumping && pump.as_mut().poll(cx).is_ready() {
                    pumping = false;
                }
                call.as_mut().poll(cx)
            })
            .await
        })
    }
}

impl App {
    /// Mounts a `tower::Service` (for example an axum `Router`) under `prefix`: requests for
    /// `prefix` and everything below it go to `svc` with the prefix stripped from the path
    /// (`/legacy/users?x=1` → `/users?x=1`, `/legacy` → `/`), whatever their method. The
    /// request body is streamed to the service; the peer address is in the request's
    /// extensions as a `SocketAddr`. Application-wide layers apply to these requests too.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let legacy = axum::Router::new().route("/users/{id}", axum::routing::get(
    ///     |axum::extract::Path(id): axum::extract::Path<u32>| async move { format!("axum user {id}") },
    /// ));
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "peregrine" }))
    ///     .mount_service("/legacy", legacy)
    ///     .test();
    /// assert_eq!(client.get("/legacy/users/7").send().await.text(), "axum user 7");
    /// assert_eq!(client.get("/").send().await.text(), "peregrine");
    /// # });
    /// ```
    ///
    /// # Panics
    /// If `prefix` does not start with `/`, ends with `/`, or clashes with a route.
    pub fn mount_service<S, B>(self, prefix: &str, svc: S) -> Self
    where
        S: Service<http::Request<SendBody>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: 'static,
        B: HttpBody + 'static,
        B::Data: Buf,
        B::Error: Into<BoxError>,
    {
        assert!(
            prefix.starts_with('/') && (prefix == "/" || !prefix.ends_with('/')),
            "mount prefix {prefix:?} must start with '/' and not end with one"
        );
        let base = if prefix == "/" { "" } else { prefix };
        let handler = std::sync::Arc::new(Mounted {
            prefix: base.into(),
            svc,
        });
        let any = |h: std::sync::Arc<Mounted<S>>| crate::router::any(ArcHandler(h));
        let app = self.route(
            &format!("{base}/{{*peregrine_mounted_rest}}"),
            any(handler.clone()),
        );
        if base.is_empty() {
            app.route("/", any(handler))
        } else {
            app.route(base, any(handler))
        }
    }
}

/// One mounted service shared by its two routes (`prefix` and `prefix/...`).
struct ArcHandler<H>(std::sync::Arc<H>);

impl<H: Handler> Handler for ArcHandler<H> {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        self.0.call(req)
    }
}
