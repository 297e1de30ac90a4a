//! What a request carries of its application at run time, and nothing else of it: the routes'
//! patterns and parameter names (to name what routing found), the shared states, whether
//! bodies are decoded, and this worker's values. The compiled application (its handlers and
//! tables) stays with the application, so this module imports none of it.

use std::any::{Any, TypeId};
use std::rc::Rc;
use std::sync::Arc;

/// Shared state values by type (a short list: applications register a handful).
pub(crate) type StateMap = Vec<(TypeId, Arc<dyn Any + Send + Sync>)>;

/// The shared states, reachable from a request and a `WorkerContext` without the rest of the
/// app.
pub(crate) struct StateMapHolder(pub(crate) StateMap);

impl StateMapHolder {
    /// The state of type `T`, borrowed.
    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.0
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }
}

/// The state of type `T` in `map`, as an owned handle.
pub(crate) fn find_shared<T: Send + Sync + 'static>(
    map: &[(TypeId, Arc<dyn Any + Send + Sync>)],
) -> Option<Arc<T>> {
    let id = TypeId::of::<T>();
    let v = map.iter().find(|(t, _)| *t == id)?.1.clone();
    v.downcast::<T>().ok()
}

/// One per-worker value, by type.
pub(crate) type LocalValue = (TypeId, Rc<dyn Any>);

/// The per-worker value of type `T` in `values`.
pub(crate) fn find_local<T: 'static>(values: &[LocalValue]) -> Option<Rc<T>> {
    let id = TypeId::of::<T>();
    let v = values.iter().find(|(t, _)| *t == id)?.1.clone();
    v.downcast::<T>().ok()
}

/// The per-worker values of one application on one thread.
pub(crate) struct Locals(pub(crate) Vec<LocalValue>);

impl Locals {
    #[inline]
    pub(crate) fn get<T: 'static>(&self) -> Option<Rc<T>> {
        find_local(&self.0)
    }
    #[inline]
    pub(crate) fn get_ref<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.0
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }
}

/// A route as requests see it: its pattern and its parameters' names in pattern order.
pub(crate) struct RouteInfo {
    pub(crate) pattern: Box<str>,
    pub(crate) param_names: Box<[Box<str>]>,
}

/// The application's run-time context every request holds (one reference count each).
pub(crate) struct AppContext {
    /// By route index (the index routing hands the request).
    pub(crate) routes: Box<[RouteInfo]>,
    pub(crate) states: Arc<StateMapHolder>,
    /// [`App::decode_request_bodies`](crate::App::decode_request_bodies).
    pub(crate) decode_bodies: bool,
}

impl AppContext {
    /// The route at `index`; `None` for the special indices (no route, a refused path...).
    #[inline]
    pub(crate) fn route(&self, index: u32) -> Option<&RouteInfo> {
        self.routes.get(index as usize)
    }
}
