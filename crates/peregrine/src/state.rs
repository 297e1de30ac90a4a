//! State: shared by every worker ([`State`], registered with
//! [`App::with_state`](crate::App::with_state)) or built once per worker thread ([`Local`],
//! registered with [`App::on_worker_start`](crate::App::on_worker_start)), and the
//! [`Extract`] trait through which handlers declare what they need, so that a missing state is
//! an error when the application is built rather than a 500 on every request.

use crate::error::Error;
pub(crate) use crate::request::context::{
    find_local, find_shared, LocalValue, Locals, StateMapHolder,
};
use crate::request::Request;
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Something a handler needs before it can run; checked when the application is built.
///
/// An extractor that reads application state declares it in [`Extract::needs`], so an
/// application that forgot the state fails to build instead of answering 500.
///
/// ```
/// use peregrine::{get, App, Error, Extract, Need, Request};
/// use std::collections::HashMap;
///
/// /// API keys → tenant, registered with `App::with_state`.
/// struct ApiKeys(HashMap<&'static str, &'static str>);
///
/// /// The tenant of the request's `x-api-key` (401 without a known key).
/// struct Tenant(&'static str);
///
/// impl Extract for Tenant {
///     fn extract(req: &Request) -> Result<Self, Error> {
///         let keys = req.state::<ApiKeys>()?;
///         let key = req.header("x-api-key").unwrap_or_default();
///         keys.0.get(key).map(|t| Tenant(t)).ok_or_else(Error::unauthorized)
///     }
///     fn needs(needs: &mut Vec<Need>) {
///         needs.push(Need::shared::<ApiKeys>());
///     }
/// }
///
/// async fn invoices(_req: Request, Tenant(t): Tenant) -> String {
///     format!("invoices of {t}")
/// }
///
/// let err = App::new().route("/invoices", get(invoices)).try_into_service().err().unwrap();
/// assert!(err.contains("ApiKeys"), "{err}");
///
/// let client = App::new()
///     .with_state(ApiKeys(HashMap::from([("k-acme", "acme")])))
///     .route("/invoices", get(invoices))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/invoices").header("x-api-key", "k-acme").send().await.text(), "invoices of acme");
/// assert_eq!(client.get("/invoices").header("x-api-key", "nope").send().await.status(), 401);
/// # });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    kind: NeedKind,
    id: TypeId,
    name: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NeedKind {
    Shared,
    Local,
}

impl Need {
    /// Shared state of type `T` ([`App::with_state`](crate::App::with_state)).
    pub fn shared<T: 'static>() -> Self {
        Need {
            kind: NeedKind::Shared,
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }
    /// Per-worker state of type `T` ([`App::on_worker_start`](crate::App::on_worker_start)).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Extract, Need, Request};
    /// use std::cell::RefCell;
    /// use std::collections::HashSet;
    /// use std::rc::Rc;
    ///
    /// /// Nonces seen by this worker (a per-worker cache: no lock).
    /// struct Seen(RefCell<HashSet<String>>);
    ///
    /// /// A request nonce not seen before on this worker (409 for a replay).
    /// struct FreshNonce(String);
    ///
    /// impl Extract for FreshNonce {
    ///     fn extract(req: &Request) -> Result<Self, Error> {
    ///         let seen: Rc<Seen> = req.local_rc::<Seen>()?;
    ///         let nonce = req.header("x-nonce").ok_or_else(Error::bad_request)?.to_owned();
    ///         if !seen.0.borrow_mut().insert(nonce.clone()) {
    ///             return Err(Error::conflict().with_detail("nonce already used"));
    ///         }
    ///         Ok(FreshNonce(nonce))
    ///     }
    ///     fn needs(needs: &mut Vec<Need>) {
    ///         needs.push(Need::local::<Seen>());
    ///     }
    /// }
    ///
    /// async fn pay(_req: Request, FreshNonce(n): FreshNonce) -> String {
    ///     format!("paid ({n})")
    /// }
    ///
    /// assert!(App::new().route("/pay", get(pay)).try_into_service().is_err());
    /// let client = App::new()
    ///     .worker_local(|_w| Seen(RefCell::default()))
    ///     .route("/pay", get(pay))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/pay").header("x-nonce", "n1").send().await.text(), "paid (n1)");
    /// assert_eq!(client.get("/pay").header("x-nonce", "n1").send().await.status(), 409);
    /// # });
    /// ```
    pub fn local<T: 'static>() -> Self {
        Need {
            kind: NeedKind::Local,
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// Is this need met by the registered shared states and per-worker initialisers?
    pub(crate) fn met(
        &self,
        shared: &[(TypeId, Arc<dyn Any + Send + Sync>)],
        locals: &[WorkerInit],
    ) -> bool {
        match self.kind {
            NeedKind::Shared => shared.iter().any(|(t, _)| *t == self.id),
            NeedKind::Local => locals.iter().any(|i| i.id == self.id),
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            NeedKind::Shared => write!(
                f,
                "State<{0}>, but no App::with_state({0}) was registered",
                self.name
            ),
            NeedKind::Local => write!(
                f,
                "Local<{0}>, but no App::on_worker_start building a {0} was registered",
                self.name
            ),
        }
    }
}

/// A value taken from the request before the handler runs, as extra handler arguments after
/// the [`Request`]: `async fn show(req: Request, State(db): State<Db>)`.
///
/// An extractor declares what it needs in [`Extract::needs`]; the application checks every
/// route's needs when it is built ([`App::try_into_service`](crate::App::try_into_service)),
/// so a handler taking `State<Db>` in an application without `with_state(Db)` does not start.
///
/// ```
/// use peregrine::{App, Error, Extract, Need, Request, get};
///
/// /// The caller, from the `x-user` header (401 without it).
/// struct User(String);
///
/// impl Extract for User {
///     fn extract(req: &Request) -> Result<Self, Error> {
///         req.header("x-user").map(|u| User(u.to_owned())).ok_or_else(Error::unauthorized)
///     }
/// }
///
/// async fn me(_req: Request, User(name): User) -> String {
///     name
/// }
/// let app = App::new().route("/me", get(me));
/// # let _ = app;
/// ```
pub trait Extract: Sized + 'static {
    /// Takes the value from the request; an `Err` is the answer (the handler does not run).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Extract, Request};
    ///
    /// /// A page number from `?page=` (1 when absent, 400 when not a positive number).
    /// struct Page(u32);
    ///
    /// impl Extract for Page {
    ///     fn extract(req: &Request) -> Result<Self, Error> {
    ///         #[derive(serde::Deserialize)]
    ///         struct Q { page: Option<u32> }
    ///         match req.query::<Q>()?.page {
    ///             None => Ok(Page(1)),
    ///             Some(0) => Err(Error::bad_request().with_detail("page starts at 1")),
    ///             Some(n) => Ok(Page(n)),
    ///         }
    ///     }
    /// }
    ///
    /// async fn list(_req: Request, Page(p): Page) -> String {
    ///     format!("page {p}")
    /// }
    ///
    /// let client = App::new().route("/items", get(list)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/items").send().await.text(), "page 1");
    /// assert_eq!(client.get("/items?page=3").send().await.text(), "page 3");
    /// let bad = client.get("/items?page=0").send().await;
    /// assert_eq!(bad.status(), 400);
    /// assert_eq!(bad.header("content-type"), Some("application/problem+json"));
    /// assert_eq!(client.get("/items?page=x").send().await.status(), 400);
    /// # });
    /// ```
    fn extract(req: &Request) -> Result<Self, Error>;
    /// Adds what this extractor needs from the application (default: nothing).
    fn needs(needs: &mut Vec<Need>) {
        let _ = needs;
    }
}

/// Shared application state of type `T` as a handler argument, registered with
/// [`App::with_state`](crate::App::with_state). Checked at build time: a route whose handler
/// takes `State<T>` in an application without that state is an error from
/// [`App::try_into_service`](crate::App::try_into_service) (and `serve`/`run`).
///
/// ```
/// use peregrine::{App, Request, State, get};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// struct Hits(AtomicU64);
///
/// async fn hit(_req: Request, State(hits): State<Hits>) -> String {
///     hits.0.fetch_add(1, Ordering::Relaxed).to_string()
/// }
///
/// // Forgetting the state is caught when the app is built, not per request:
/// let err = App::new().route("/", get(hit)).try_into_service().err().unwrap();
/// assert!(err.contains("State<"), "{err}");
///
/// let ok = App::new().with_state(Hits(AtomicU64::new(0))).route("/", get(hit)).try_into_service();
/// assert!(ok.is_ok());
/// ```
pub struct State<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> Extract for State<T> {
    #[inline]
    fn extract(req: &Request) -> Result<Self, Error> {
        req.state_arc::<T>().map(State)
    }
    fn needs(needs: &mut Vec<Need>) {
        needs.push(Need::shared::<T>());
    }
}

/// State of type `T` built once per worker thread by
/// [`App::on_worker_start`](crate::App::on_worker_start), as a handler argument. It need not be
/// `Send` or `Sync` (an `Rc`, a `RefCell`, a connection pool bound to the worker's runtime).
/// Checked at build time like [`State`].
///
/// ```
/// use peregrine::{App, Local, Request, get};
/// use std::cell::Cell;
///
/// /// A per-worker counter: no atomics, no locks.
/// struct Served(Cell<u64>);
///
/// async fn count(_req: Request, Local(served): Local<Served>) -> String {
///     served.0.set(served.0.get() + 1);
///     served.0.get().to_string()
/// }
/// let app = App::new()
///     .on_worker_start(|_w| async { Ok::<_, std::convert::Infallible>(Served(Cell::new(0))) })
///     .route("/", get(count));
/// assert!(app.try_into_service().is_ok());
/// ```
pub struct Local<T: ?Sized>(pub Rc<T>);

impl<T: ?Sized> Clone for Local<T> {
    fn clone(&self) -> Self {
        Local(self.0.clone())
    }
}

impl<T: ?Sized> Deref for Local<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: 'static> Extract for Local<T> {
    #[inline]
    fn extract(req: &Request) -> Result<Self, Error> {
        req.local_rc::<T>().map(Local)
    }
    fn needs(needs: &mut Vec<Need>) {
        needs.push(Need::local::<T>());
    }
}

/// What a per-worker initialiser gets: which worker it runs on, the shared states, and the
/// per-worker values built by the initialisers registered before it.
///
/// ```
/// use peregrine::{get, App, Local, Request, WorkerContext};
///
/// struct Settings { greeting: String }
/// /// Built once per worker from the shared settings.
/// struct Greeter { text: String, worker: usize }
///
/// async fn hello(_req: Request, Local(g): Local<Greeter>) -> String {
///     format!("{} from worker {}", g.text, g.worker)
/// }
///
/// let client = App::new()
///     .with_state(Settings { greeting: "hello".into() })
///     .on_worker_start(|w: WorkerContext| async move {
///         let settings = w.state::<Settings>().expect("registered with with_state");
///         Ok::<_, std::io::Error>(Greeter { text: settings.greeting.clone(), worker: w.index() })
///     })
///     .route("/", get(hello))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/").send().await.text(), "hello from worker 0");
/// # });
/// ```
pub struct WorkerContext {
    index: usize,
    shared: Arc<StateMapHolder>,
    built: Rc<RefCell<Vec<LocalValue>>>,
}

impl WorkerContext {
    /// This worker's number for this application: 0, 1, ... in the order the workers started
    /// initialising.
    ///
    /// ```
    /// use peregrine::{get, App, Local, Request, WorkerContext};
    ///
    /// struct Shard(usize);
    /// let client = App::new()
    ///     .on_worker_start(|w: WorkerContext| async move { Ok::<_, std::io::Error>(Shard(w.index())) })
    ///     .route("/", get(|_r: Request, Local(s): Local<Shard>| async move { format!("shard {}", s.0) }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "shard 0"); // the test client is one worker
    /// # });
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }
    /// The name of the worker thread (`peregrine-w0`, ... under the engine).
    pub fn thread_name(&self) -> Option<String> {
        std::thread::current().name().map(str::to_owned)
    }
    /// Shared state of type `T` registered with [`App::with_state`](crate::App::with_state)
    /// (for example the configuration a pool is built from).
    ///
    /// ```
    /// use peregrine::{get, App, Local, Request, WorkerContext};
    ///
    /// struct Config { pool_size: usize }
    /// struct Pool { size: usize }
    /// let client = App::new()
    ///     .with_state(Config { pool_size: 4 })
    ///     .on_worker_start(|w: WorkerContext| async move {
    ///         let size = w.state::<Config>().map_or(1, |c| c.pool_size);
    ///         Ok::<_, std::io::Error>(Pool { size })
    ///     })
    ///     .route("/", get(|_r: Request, Local(p): Local<Pool>| async move { p.size.to_string() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "4");
    /// # });
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        find_shared(&self.shared.0)
    }
    /// A per-worker value built by an initialiser registered earlier.
    ///
    /// ```
    /// use peregrine::{get, App, Local, Request};
    /// use std::rc::Rc;
    ///
    /// struct Conn { id: u32 }
    /// /// Needs the worker's `Conn`, so it is registered after it.
    /// struct Repo { conn: Rc<Conn> }
    ///
    /// async fn show(_req: Request, Local(repo): Local<Repo>) -> String {
    ///     format!("repo on conn {}", repo.conn.id)
    /// }
    ///
    /// let client = App::new()
    ///     .worker_local(|_w| Conn { id: 7 })
    ///     .worker_local(|w| Repo { conn: w.local::<Conn>().expect("built before") })
    ///     .route("/", get(show))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "repo on conn 7");
    /// # });
    /// ```
    pub fn local<T: 'static>(&self) -> Option<Rc<T>> {
        find_local(&self.built.borrow())
    }
}

type InitError = Box<dyn std::error::Error + Send + Sync>;
type InitFuture = Pin<Box<dyn Future<Output = Result<Rc<dyn Any>, InitError>>>>;

/// One registered per-worker initialiser, building a value of one type.
pub(crate) struct WorkerInit {
    pub(crate) id: TypeId,
    run: Box<dyn Fn(WorkerContext) -> InitFuture + Send + Sync>,
}

impl WorkerInit {
    pub(crate) fn new<F, Fut, T, E>(init: F) -> Self
    where
        F: Fn(WorkerContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + 'static,
        T: 'static,
        E: Into<InitError>,
    {
        WorkerInit {
            id: TypeId::of::<T>(),
            run: Box::new(move |ctx| {
                let fut = init(ctx);
                Box::pin(async move {
                    match fut.await {
                        Ok(v) => Ok(Rc::new(v) as Rc<dyn Any>),
                        Err(e) => Err(e.into()),
                    }
                })
            }),
        }
    }
}

/// Every application's per-worker initialisers, and the identity used to find its values in
/// each thread's table.
pub(crate) struct WorkerInits {
    app_id: u64,
    inits: Vec<WorkerInit>,
    next_index: AtomicUsize,
    states: Arc<StateMapHolder>,
}

static NEXT_APP_ID: AtomicU64 = AtomicU64::new(1);

/// Per-thread initialisation status of one application.
type Slot = Rc<tokio::sync::OnceCell<Rc<Locals>>>;

thread_local! {
    /// Per-worker values of every application served on this thread, by application id.
    static WORKER_LOCALS: RefCell<Vec<(u64, Slot)>> = const { RefCell::new(Vec::new()) };
}

impl WorkerInits {
    pub(crate) fn new(inits: Vec<WorkerInit>, states: Arc<StateMapHolder>) -> Self {
        WorkerInits {
            app_id: NEXT_APP_ID.fetch_add(1, Ordering::Relaxed),
            inits,
            next_index: AtomicUsize::new(0),
            states,
        }
    }

    /// This thread's slot for this application (created empty on first use).
    fn slot(&self) -> Slot {
        WORKER_LOCALS.with(|t| {
            let mut t = t.borrow_mut();
            if let Some((_, s)) = t.iter().find(|(id, _)| *id == self.app_id) {
                return s.clone();
            }
            let s = Slot::default();
            t.push((self.app_id, s.clone()));
            s
        })
    }

    /// The values, if this thread has built them already (the per-request fast path).
    #[inline]
    pub(crate) fn ready(&self) -> Option<Rc<Locals>> {
        WORKER_LOCALS.with(|t| {
            let t = t.borrow();
            let (_, s) = t.iter().find(|(id, _)| *id == self.app_id)?;
            s.get().cloned()
        })
    }

    /// Builds this thread's values (once; concurrent callers on the thread wait for the same
    /// run, and a failed run is retried by the next caller).
    pub(crate) async fn init(self: &Arc<Self>) -> Result<Rc<Locals>, InitError> {
        let slot = self.slot();
        let me = self.clone();
        slot.get_or_try_init(|| async move {
            let index = me.next_index.fetch_add(1, Ordering::Relaxed);
            let built: Rc<RefCell<Vec<LocalValue>>> = Rc::default();
            for init in &me.inits {
                let ctx = WorkerContext {
                    index,
                    shared: me.states.clone(),
                    built: built.clone(),
                };
                let value = (init.run)(ctx).await?;
                let mut b = built.borrow_mut();
                b.retain(|(t, _)| *t != init.id);
                b.push((init.id, value));
            }
            let values = std::mem::take(&mut *built.borrow_mut());
            tracing::debug!(worker = index, values = values.len(), "worker state built");
            Ok(Rc::new(Locals(values)))
        })
        .await
        .cloned()
    }
}
