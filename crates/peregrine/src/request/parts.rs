//! The [`Request`] type itself, its fields and construction, a leaf the accessor modules
//! beside it (`line`, `params`, `headers`, `rewrite`, `extensions`, `body`) add to.

use super::context::{AppContext, Locals};
use peregrine_server::Method;
use smallvec::SmallVec;
use std::any::{Any, TypeId};
use std::rc::Rc;
use std::sync::Arc;

/// Route index meaning "no route matched".
pub(crate) const NO_ROUTE: u32 = u32::MAX;
/// Route index while middleware that runs before routing has the request.
pub(crate) const PRE_ROUTING: u32 = u32::MAX - 2;
/// Route index meaning "the path was refused by [`crate::path::normalize`]" (answered 400).
pub(crate) const BAD_PATH: u32 = u32::MAX - 1;

/// Per-request values by type; a short list beats a hash map for the one or two entries
/// requests carry, and nothing is allocated until the first insert.
pub(super) type Extensions = Vec<(TypeId, Box<dyn Any>)>;

/// What few requests carry, in one box so that a request without any drops one `None`: what
/// middleware changed (headers are copied out of the engine's request on the first change,
/// then edited here) and the per-request extensions.
#[derive(Default)]
pub(super) struct Extras {
    pub(super) method: Option<(Box<str>, Method)>,
    pub(super) headers: Option<Vec<OwnedField>>,
    pub(super) extensions: Extensions,
}

/// A header field owned by the request (after a rewrite).
pub(super) type OwnedField = (Box<str>, Box<[u8]>);

/// An incoming request: the engine's parsed request plus what routing found (the route and
/// its parameters), the application's state and per-request extensions.
///
/// Every accessor that can fail returns [`Error`](crate::Error) with the status a client should
/// see, so a handler uses `?` throughout:
///
/// ```
/// use peregrine::{Error, Json, Request};
/// #[derive(serde::Deserialize)]
/// struct Page { limit: Option<u32> }
///
/// async fn list(req: Request) -> Result<Json<Vec<u32>>, Error> {
///     let org: u32 = req.param("org")?;            // 400 if not a number
///     let page: Page = req.query()?;               // 400 if malformed
///     let _agent = req.header("user-agent");       // case-insensitive
///     let _sid = req.cookie("sid");
///     Ok(Json(vec![org, page.limit.unwrap_or(10)]))
/// }
/// # let _ = list;
/// ```
pub struct Request {
    pub(crate) inner: peregrine_server::Request,
    /// The application's run-time context (routes' names, states...), not the app itself.
    pub(crate) ctx: Arc<AppContext>,
    pub(crate) route: u32,
    /// Parameter values as byte ranges into the (still encoded) path, in pattern order. Ranges
    /// rather than strings: matching allocates nothing.
    pub(crate) params: SmallVec<[(u32, u32); 4]>,
    /// The normalised path when it differs from the one sent (see [`crate::path`]); routing
    /// and the parameter ranges refer to it.
    pub(super) normalized_path: Option<Box<str>>,
    /// This worker's values from [`App::on_worker_start`](crate::App::on_worker_start), set
    /// before middleware and handler run when the app has any.
    pub(crate) locals: Option<Rc<Locals>>,
    /// Method and headers as rewritten by middleware, and the extensions; `None` (the usual
    /// case) reads the engine's parsed request and has no extensions.
    pub(super) extras: Option<Box<Extras>>,
}

impl Request {
    pub(crate) fn new(
        inner: peregrine_server::Request,
        ctx: Arc<AppContext>,
        route: u32,
        params: SmallVec<[(u32, u32); 4]>,
    ) -> Self {
        Request {
            inner,
            ctx,
            route,
            params,
            normalized_path: None,
            locals: None,
            extras: None,
        }
    }

    /// Records the normalised path that was routed (only when it differs from the one sent).
    pub(crate) fn set_normalized_path(&mut self, path: Box<str>) {
        self.normalized_path = Some(path);
    }

    /// The engine's request underneath.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// // The engine's request has the path as sent; the framework's, as routed (normalised).
    /// let client = App::new()
    ///     .route("/a/b", get(|req: Request| async move {
    ///         format!("{} {}", req.as_server_request().path(), req.path())
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/a//b").send().await.text(), "/a//b /a/b");
    /// # });
    /// ```
    pub fn as_server_request(&self) -> &peregrine_server::Request {
        &self.inner
    }
}
