//! Handlers: async functions from [`Request`] to anything that is [`IntoResponse`].

use crate::future_slot::FutureSlot;
use crate::request::Request;
use crate::response::IntoResponse;
use crate::state::{Extract, Need};
use peregrine_server::Response;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

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
    /// Answers `req`. Implement it for a handler with configuration of its own.
    ///
    /// ```
    /// use peregrine::{get, App, BoxFuture, Handler, Request, Response, ResponseBody};
    ///
    /// /// Answers every request with one fixed document.
    /// struct Fixed { content_type: &'static str, body: &'static str }
    ///
    /// impl Handler for Fixed {
    ///     fn call(&self, _req: Request) -> BoxFuture<Response> {
    ///         let res = Response::new(200)
    ///             .with_header("content-type", self.content_type.as_bytes())
    ///             .with_body(ResponseBody::Full(bytes::Bytes::from_static(self.body.as_bytes())));
    ///         Box::pin(async move { res })
    ///     }
    /// }
    ///
    /// let manifest = Fixed { content_type: "application/manifest+json", body: r#"{"name":"Falcon"}"# };
    /// let client = App::new().route("/app.webmanifest", get(manifest)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/app.webmanifest").send().await;
    /// assert_eq!(res.header("content-type"), Some("application/manifest+json"));
    /// assert_eq!(res.text(), r#"{"name":"Falcon"}"#);
    /// # });
    /// ```
    fn call(&self, req: Request) -> BoxFuture<Response>;

    /// Answers `req` with a future in a box the worker reuses, or a ready answer (`Err`). The
    /// framework's own handlers (async functions, with or without extractors) use the pool;
    /// the default boxes [`call`](Self::call)'s future. Its return type cannot be named
    /// outside the crate, so it cannot be overridden.
    #[doc(hidden)]
    #[inline]
    fn call_pooled(&self, req: Request) -> Result<FutureSlot, Response> {
        Ok(FutureSlot::boxed(self.call(req)))
    }

    /// Adds what this handler needs from the application (state types), checked when the
    /// application is built. Handlers taking [`Extract`] arguments report theirs; the default
    /// is nothing.
    ///
    /// ```
    /// use peregrine::{get, App, BoxFuture, Handler, Need, Request, Response};
    ///
    /// struct Greeting(String);
    ///
    /// /// Reads the application's `Greeting`, so it says so.
    /// struct Greeter;
    ///
    /// impl Handler for Greeter {
    ///     fn call(&self, req: Request) -> BoxFuture<Response> {
    ///         let text = req.state::<Greeting>().map(|g| g.0.clone());
    ///         Box::pin(async move { peregrine::IntoResponse::into_response(text) })
    ///     }
    ///     fn needs(&self, needs: &mut Vec<Need>) {
    ///         needs.push(Need::shared::<Greeting>());
    ///     }
    /// }
    ///
    /// assert!(App::new().route("/", get(Greeter)).try_into_service().is_err()); // caught at build
    /// let client = App::new().with_state(Greeting("hello".into())).route("/", get(Greeter)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "hello");
    /// # });
    /// ```
    fn needs(&self, needs: &mut Vec<Need>) {
        let _ = needs;
    }
}

impl<F, Fut, R> Handler for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoResponse,
{
    #[inline]
    fn call(&self, req: Request) -> BoxFuture<Response> {
        Box::pin(answer(self(req)))
    }
    #[inline]
    fn call_pooled(&self, req: Request) -> Result<FutureSlot, Response> {
        Ok(FutureSlot::pooled(answer(self(req))))
    }
}

/// The handler's future together with the conversion of its output: what a slot holds.
#[inline]
async fn answer<Fut>(fut: Fut) -> Response
where
    Fut: Future<Output: IntoResponse>,
{
    fut.await.into_response()
}

/// Anything that can be a route's handler: a [`Handler`], or an async function taking the
/// [`Request`] followed by up to three [`Extract`] arguments (such as
/// [`State`](crate::State) and [`Local`](crate::Local)). `M` only tells the implementations
/// apart; it is inferred.
///
/// ```
/// use peregrine::{App, Local, Request, State, get};
/// struct Config { name: String }
/// struct Cache(std::cell::RefCell<Vec<String>>);
///
/// async fn plain(_req: Request) -> &'static str { "plain" }
/// async fn one(_req: Request, State(cfg): State<Config>) -> String { cfg.name.clone() }
/// async fn two(_req: Request, cfg: State<Config>, Local(cache): Local<Cache>) -> String {
///     cache.0.borrow_mut().push(cfg.name.clone());
///     cache.0.borrow().len().to_string()
/// }
/// let app = App::new()
///     .with_state(Config { name: "n".into() })
///     .on_worker_start(|_w| async { Ok::<_, std::io::Error>(Cache(Default::default())) })
///     .route("/a", get(plain))
///     .route("/b", get(one))
///     .route("/c", get(two));
/// assert!(app.try_into_service().is_ok());
/// ```
pub trait IntoHandler<M>: Send + Sync + 'static {
    /// The handler, ready to be shared by every worker.
    fn into_handler(self) -> Arc<dyn Handler>;
}

/// Marker for [`IntoHandler`] implemented by a [`Handler`] itself.
pub enum IsHandler {}

impl<H: Handler> IntoHandler<IsHandler> for H {
    #[inline]
    fn into_handler(self) -> Arc<dyn Handler> {
        Arc::new(self)
    }
}

/// A handler argument taken from the request, rejecting with a response type of its own
/// (axum's `FromRequestParts` with its `Rejection`). Every [`Extract`] is one, rejecting with
/// [`Error`](crate::Error); implement this trait instead when the rejection should be your
/// own [`IntoResponse`] type (your API's error format).
///
/// ```
/// use peregrine::{get, App, IntoResponse, Json, Request, Response, TryExtract};
///
/// /// The caller's token from `Authorization: Bearer ...`.
/// struct Bearer(String);
///
/// /// The API's own error body.
/// struct ApiError(&'static str);
/// impl IntoResponse for ApiError {
///     fn into_response(self) -> Response {
///         (401, Json(serde_json::json!({ "error": self.0 }))).into_response()
///     }
/// }
///
/// impl TryExtract for Bearer {
///     type Rejection = ApiError;
///     fn try_extract(req: &Request) -> Result<Self, ApiError> {
///         let h = req.header("authorization").ok_or(ApiError("missing token"))?;
///         let token = h.strip_prefix("Bearer ").ok_or(ApiError("not a bearer token"))?;
///         Ok(Bearer(token.to_owned()))
///     }
/// }
///
/// async fn me(_req: Request, Bearer(token): Bearer) -> String {
///     format!("token {token}")
/// }
///
/// let client = App::new().route("/me", get(me)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/me").send().await;
/// assert_eq!(res.status(), 401);
/// assert_eq!(res.text(), r#"{"error":"missing token"}"#);
/// let res = client.get("/me").header("authorization", "Bearer abc").send().await;
/// assert_eq!(res.text(), "token abc");
/// # });
/// ```
pub trait TryExtract: Sized + 'static {
    /// What answers the request when extraction fails (the handler does not run).
    type Rejection: IntoResponse;
    /// Takes the value from the request.
    fn try_extract(req: &Request) -> Result<Self, Self::Rejection>;
    /// Adds what this extractor needs from the application (default: nothing); see
    /// [`Extract::needs`].
    fn needs(needs: &mut Vec<Need>) {
        let _ = needs;
    }
}

impl<T: Extract> TryExtract for T {
    type Rejection = crate::Error;
    #[inline]
    fn try_extract(req: &Request) -> Result<Self, crate::Error> {
        T::extract(req)
    }
    fn needs(needs: &mut Vec<Need>) {
        <T as Extract>::needs(needs);
    }
}

/// A function of the request and extractors, as a [`Handler`].
struct WithExtractors<F, A> {
    f: F,
    // `fn() -> A`: the handler holds no `A`, so it stays `Send + Sync` whatever `A` is.
    _args: PhantomData<fn() -> A>,
}

macro_rules! extractor_handlers {
    ($($a:ident),+) => {
        impl<F, Fut, R, $($a),+> Handler for WithExtractors<F, ($($a,)+)>
        where
            F: Fn(Request, $($a),+) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + 'static,
            R: IntoResponse,
            $($a: TryExtract),+
        {
            fn call(&self, req: Request) -> BoxFuture<Response> {
                match self.extract_then_call(req) {
                    Ok(fut) => Box::pin(answer(fut)),
                    Err(rejected) => Box::pin(std::future::ready(rejected)),
                }
            }
            #[inline]
            fn call_pooled(&self, req: Request) -> Result<FutureSlot, Response> {
                self.extract_then_call(req).map(|fut| FutureSlot::pooled(answer(fut)))
            }
            fn needs(&self, needs: &mut Vec<Need>) {
                $($a::needs(needs);)+
            }
        }

        impl<F, Fut, R, $($a),+> WithExtractors<F, ($($a,)+)>
        where
            F: Fn(Request, $($a),+) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + 'static,
            R: IntoResponse,
            $($a: TryExtract),+
        {
            /// Takes each argument from `req`, then calls the function: its future, or the
            /// first extractor's rejection as the answer.
            #[inline]
            fn extract_then_call(&self, req: Request) -> Result<Fut, Response> {
                #[allow(non_snake_case)]
                let ($($a,)+) = ($(match $a::try_extract(&req) {
                    Ok(v) => v,
                    Err(e) => return Err(e.into_response()),
                },)+);
                Ok((self.f)(req, $($a),+))
            }
        }

        impl<F, Fut, R, $($a),+> IntoHandler<(Request, $($a,)+)> for F
        where
            F: Fn(Request, $($a),+) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + 'static,
            R: IntoResponse,
            $($a: TryExtract),+
        {
            fn into_handler(self) -> Arc<dyn Handler> {
                Arc::new(WithExtractors::<F, ($($a,)+)> { f: self, _args: PhantomData })
            }
        }
    };
}

extractor_handlers!(A);
extractor_handlers!(A, B);
extractor_handlers!(A, B, C);
