//! Values a request carries beyond HTTP: the application's shared state, this worker's values
//! (from `App::on_worker_start`) and per-request extensions that middleware leaves for
//! handlers.

use super::Request;
use crate::error::Error;
use std::any::TypeId;
use std::rc::Rc;
use std::sync::Arc;

impl Request {
    /// Shared application state of type `T`, registered with
    /// [`App::with_state`](crate::App::with_state). Fails with a (logged) 500 if no state of
    /// that type was registered.
    ///
    /// ```
    /// use peregrine::{App, Error, Request, get};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// struct Hits(AtomicU64);
    ///
    /// async fn hit(req: Request) -> Result<String, Error> {
    ///     let hits = req.state::<Hits>()?;
    ///     Ok(hits.0.fetch_add(1, Ordering::Relaxed).to_string())
    /// }
    /// let app = App::new().with_state(Hits(AtomicU64::new(0))).route("/", get(hit));
    /// # let _ = app;
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, Error> {
        self.ctx.states.get::<T>().ok_or_else(|| {
            Error::internal().with_detail(format!(
                "no application state of type {} registered",
                std::any::type_name::<T>()
            ))
        })
    }

    /// Shared state of type `T` as an owned handle (what [`State<T>`](crate::State) holds).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    /// use std::sync::Arc;
    ///
    /// struct Greeting(String);
    /// async fn greet(req: Request) -> Result<String, Error> {
    ///     let g: Arc<Greeting> = req.state_arc()?; // owned: may outlive `req`, move into a task
    ///     Ok(tokio::task::spawn_local(async move { g.0.clone() }).await.unwrap())
    /// }
    /// let client = App::new().with_state(Greeting("hello".into())).route("/", get(greet)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "hello");
    /// # });
    /// ```
    pub fn state_arc<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, Error> {
        super::context::find_shared::<T>(&self.ctx.states.0)
            .ok_or_else(|| missing_state("application", std::any::type_name::<T>()))
    }

    /// This worker's value of type `T`, built by
    /// [`App::on_worker_start`](crate::App::on_worker_start) (or
    /// [`App::worker_local`](crate::App::worker_local)). Fails with a (logged) 500 if no
    /// initialiser builds a `T`; prefer a [`Local<T>`](crate::Local) handler argument, which
    /// is checked when the app is built.
    ///
    /// ```
    /// use peregrine::{App, Error, Request, get};
    /// use std::cell::Cell;
    /// struct Served(Cell<u64>);
    /// async fn count(req: Request) -> Result<String, Error> {
    ///     let served = req.local::<Served>()?;
    ///     served.0.set(served.0.get() + 1);
    ///     Ok(served.0.get().to_string())
    /// }
    /// let app = App::new().worker_local(|_w| Served(Cell::new(0))).route("/", get(count));
    /// # let _ = app;
    /// ```
    pub fn local<T: 'static>(&self) -> Result<&T, Error> {
        self.locals
            .as_ref()
            .and_then(|l| l.get_ref::<T>())
            .ok_or_else(|| missing_state("per-worker", std::any::type_name::<T>()))
    }

    /// This worker's value of type `T` as an owned handle (what [`Local<T>`](crate::Local)
    /// holds).
    ///
    /// ```
    /// use peregrine::{get, App, Error, Request};
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    ///
    /// struct Served(Cell<u64>);
    /// async fn count(req: Request) -> Result<String, Error> {
    ///     let served: Rc<Served> = req.local_rc()?; // owned: kept after `req` is gone
    ///     drop(req);
    ///     served.0.set(served.0.get() + 1);
    ///     Ok(served.0.get().to_string())
    /// }
    /// let client = App::new().worker_local(|_w| Served(Cell::new(0))).route("/", get(count)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "1");
    /// assert_eq!(client.get("/").send().await.text(), "2");
    /// # });
    /// ```
    pub fn local_rc<T: 'static>(&self) -> Result<Rc<T>, Error> {
        self.locals
            .as_ref()
            .and_then(|l| l.get::<T>())
            .ok_or_else(|| missing_state("per-worker", std::any::type_name::<T>()))
    }

    /// Stores a per-request value (middleware passing data to handlers, e.g. the request id).
    /// Replaces a previous value of the same type.
    ///
    /// ```
    /// use peregrine::middleware::Hook;
    /// use peregrine::{get, App, Request, Response};
    ///
    /// #[derive(Clone)]
    /// struct User(String);
    /// /// Leaves the caller's name for the handler.
    /// struct Auth;
    /// impl Hook for Auth {
    ///     fn before(&self, req: &mut Request) -> Result<(), Response> {
    ///         let name = req.header("x-user").unwrap_or("anonymous").to_owned();
    ///         req.insert_extension(User(name));
    ///         Ok(())
    ///     }
    /// }
    /// async fn me(req: Request) -> String {
    ///     req.extension::<User>().map(|u| u.0.clone()).unwrap_or_default()
    /// }
    /// let client = App::new().route("/me", get(me)).hook(Auth).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/me").header("x-user", "ada").send().await.text(), "ada");
    /// assert_eq!(client.get("/me").send().await.text(), "anonymous");
    /// # });
    /// ```
    pub fn insert_extension<T: 'static>(&mut self, value: T) {
        let ext = &mut self.extras.get_or_insert_with(Default::default).extensions;
        let id = TypeId::of::<T>();
        match ext.iter_mut().find(|(t, _)| *t == id) {
            Some(slot) => slot.1 = Box::new(value),
            None => ext.push((id, Box::new(value))),
        }
    }

    /// A per-request value stored by [`Request::insert_extension`].
    ///
    /// ```
    /// use peregrine::middleware::RequestId;
    /// async fn show(req: peregrine::Request) -> String {
    ///     req.extension::<RequestId>().map(|id| id.as_str().to_owned()).unwrap_or_default()
    /// }
    /// # let _ = show;
    /// ```
    pub fn extension<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.extras
            .as_ref()?
            .extensions
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }
}

fn missing_state(kind: &str, type_name: &str) -> Error {
    Error::internal().with_detail(format!("no {kind} state of type {type_name} registered"))
}
