//! Where the future answering a request lives while the engine polls it: a box taken from a
//! per-worker pool and given back when the answer is ready, so a worker answering request
//! after request with the same handler allocates none (glibc's `malloc` + `free` of the boxed
//! future were ~140 instructions of the framework's ~1,670 per pipelined request).

use peregrine_server::Response;
use reusable_box_future::ReusableLocalBoxFuture;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The handler module's `BoxFuture<Response>`, spelled out: that module uses this one, and the
/// two must not import each other.
type BoxFuture = Pin<Box<dyn Future<Output = Response> + 'static>>;

/// Boxes a worker keeps for reuse; the pool holds no more (those past it are freed), so a
/// burst of concurrent requests leaves at most this many behind.
const POOL_MAX: usize = 64;

thread_local! {
    /// This worker's finished boxes. Each holds a future that has completed: an `async` block
    /// drops everything it captured when it returns, so a pooled box keeps no request alive.
    static POOL: RefCell<Vec<ReusableLocalBoxFuture<Response>>> = const { RefCell::new(Vec::new()) };
}

/// A handler's future, boxed: in a box of the worker's pool, or in one of its own. Public
/// only so that [`Handler`]'s hidden method can name it: its module is private, so no code
/// outside the crate can.
///
/// [`Handler`]: crate::Handler
pub struct FutureSlot(Held);

enum Held {
    Boxed(BoxFuture),
    Reused(ReusableLocalBoxFuture<Response>),
}

impl FutureSlot {
    /// `fut` in a box of the worker's pool (reusing its allocation when the layouts match), or
    /// a new one when the pool is empty.
    ///
    /// Only for `async` blocks: they hold nothing once complete, so a pooled box keeps no
    /// resource alive.
    #[inline]
    pub(crate) fn pooled<F: Future<Output = Response> + 'static>(fut: F) -> Self {
        let spare = POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten();
        FutureSlot(Held::Reused(match spare {
            Some(mut b) => {
                b.set(fut);
                b
            }
            None => ReusableLocalBoxFuture::new(fut),
        }))
    }

    /// A future boxed on its own.
    #[inline]
    pub(crate) fn boxed(fut: BoxFuture) -> Self {
        FutureSlot(Held::Boxed(fut))
    }

    /// The future as a [`BoxFuture`], for code that hands futures on (its pooled box, if it
    /// has one, is not given back).
    pub(crate) fn into_boxed(self) -> BoxFuture {
        match self.0 {
            Held::Boxed(f) => f,
            // Unpin (it is a pointer), so it boxes as it is.
            Held::Reused(f) => Box::pin(f),
        }
    }

    /// Polls the future.
    #[inline]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Response> {
        match &mut self.0 {
            Held::Boxed(f) => f.as_mut().poll(cx),
            Held::Reused(f) => f.poll(cx),
        }
    }

    /// Gives a pooled box back to the worker once its future has completed; a box of its own
    /// is freed.
    #[inline]
    pub(crate) fn recycle(self) {
        if let Held::Reused(b) = self.0 {
            let spare = POOL
                .try_with(|p| {
                    let mut p = p.borrow_mut();
                    if p.len() < POOL_MAX {
                        p.push(b);
                        None
                    } else {
                        Some(b)
                    }
                })
                .unwrap_or(None);
            // Freed outside the pool's borrow.
            drop(spare);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::rc::Rc;
    use std::task::Waker;

    fn poll_ready(slot: &mut FutureSlot) -> Response {
        match slot.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(r) => r,
            Poll::Pending => panic!("not ready"),
        }
    }

    fn pool_len() -> usize {
        POOL.with(|p| p.borrow().len())
    }

    #[test]
    fn a_recycled_box_is_reused_and_keeps_nothing_alive() {
        POOL.with(|p| p.borrow_mut().clear());
        let held = Rc::new(());
        let h = held.clone();
        let mut slot = FutureSlot::pooled(async move {
            let _h = h;
            Response::new(201)
        });
        assert_eq!(poll_ready(&mut slot).status, 201);
        slot.recycle();
        assert_eq!(pool_len(), 1);
        // The completed async block dropped what it captured.
        assert_eq!(Rc::strong_count(&held), 1);

        let h = held.clone();
        let mut slot = FutureSlot::pooled(async move {
            let _h = h;
            Response::new(202)
        });
        assert_eq!(pool_len(), 0, "the pooled box was taken");
        assert_eq!(poll_ready(&mut slot).status, 202);
        slot.recycle();
        assert_eq!(pool_len(), 1);
    }

    #[test]
    fn a_future_of_another_layout_gets_a_box_of_its_own_size() {
        POOL.with(|p| p.borrow_mut().clear());
        let mut small = FutureSlot::pooled(async { Response::new(200) });
        poll_ready(&mut small);
        small.recycle();
        let big = [7u8; 512];
        let mut slot = FutureSlot::pooled(async move { Response::new(200 + big[511] as u16) });
        assert_eq!(poll_ready(&mut slot).status, 207);
        slot.recycle();
        assert_eq!(pool_len(), 1);
    }

    #[test]
    fn a_slot_dropped_before_completion_drops_its_future_and_pools_nothing() {
        POOL.with(|p| p.borrow_mut().clear());
        let held = Rc::new(());
        let h = held.clone();
        let mut slot = FutureSlot::pooled(async move {
            let _h = h;
            std::future::pending::<()>().await;
            Response::new(200)
        });
        assert!(slot
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        assert_eq!(Rc::strong_count(&held), 2);
        drop(slot);
        assert_eq!(Rc::strong_count(&held), 1);
        assert_eq!(pool_len(), 0);
    }

    #[test]
    fn the_pool_keeps_at_most_its_limit() {
        POOL.with(|p| p.borrow_mut().clear());
        let mut slots: Vec<FutureSlot> = (0..POOL_MAX + 10)
            .map(|_| FutureSlot::pooled(async { Response::new(200) }))
            .collect();
        for s in &mut slots {
            poll_ready(s);
        }
        for s in slots {
            s.recycle();
        }
        assert_eq!(pool_len(), POOL_MAX);
    }

    #[test]
    fn a_panicking_future_can_be_dropped_and_the_pool_still_serves() {
        POOL.with(|p| p.borrow_mut().clear());
        let mut slot = FutureSlot::pooled(async {
            if true {
                panic!("handler bug");
            }
            Response::new(200)
        });
        let polled = catch_unwind(AssertUnwindSafe(|| {
            slot.poll(&mut Context::from_waker(Waker::noop()))
        }));
        assert!(polled.is_err());
        drop(slot);
        let mut slot = FutureSlot::pooled(async { Response::new(200) });
        assert_eq!(poll_ready(&mut slot).status, 200);
    }

    #[test]
    fn into_boxed_keeps_the_future() {
        let slot = FutureSlot::pooled(async { Response::new(204) });
        let mut fut = slot.into_boxed();
        let polled = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Ready(r) if r.status == 204));
    }
}
