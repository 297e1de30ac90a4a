//! The start of a worker's graceful shutdown as a connection outside the drivers sees it: an
//! upgraded connection (WebSocket) takes it from the thread it is made on, whichever protocol
//! driver made it, so neither driver has to carry it through. A leaf: the worker implements
//! [`ShutdownWatch`] and registers itself; `upgrade.rs` reads it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};

/// What an upgraded connection watches of its worker.
pub(crate) trait ShutdownWatch {
    /// Whether the worker's graceful shutdown has started.
    fn is_shutting_down(&self) -> bool;
    /// Resolves once it has started (at once if it has).
    fn shutdown_started(&self) -> Pin<Box<dyn Future<Output = ()> + '_>>;
}

thread_local! {
    /// The worker running on this thread (one worker per thread, for its whole life).
    static CURRENT: RefCell<Option<Weak<dyn ShutdownWatch>>> = const { RefCell::new(None) };
}

/// Registers the worker running on this thread.
pub(crate) fn set_current(worker: Weak<dyn ShutdownWatch>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(worker));
}

/// The worker running on this thread, if one is (and is still alive).
pub(crate) fn current() -> Option<Rc<dyn ShutdownWatch>> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(Weak::upgrade))
}
