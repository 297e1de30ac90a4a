//! The count of handshakes under way from addresses not yet validated: past the limit, the
//! accept loop sends a Retry instead of starting one more. Its own file so the accept loop and
//! the connection driver (which holds the count until the handshake ends) share it without
//! importing each other.

use std::cell::Cell;
use std::rc::Rc;

/// A handshake in progress from an address not yet validated, counted while it lasts.
pub(super) struct Unvalidated(Rc<Cell<usize>>);

impl Unvalidated {
    /// Counts one more handshake in `count` until the returned value is dropped.
    pub(super) fn start(count: &Rc<Cell<usize>>) -> Unvalidated {
        count.set(count.get() + 1);
        Unvalidated(count.clone())
    }
}

impl Drop for Unvalidated {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}
