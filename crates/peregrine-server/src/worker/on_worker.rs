//! Connection tasks spawned on the worker's runtime itself rather than on its `LocalSet`.
//!
//! A `LocalSet` task is scheduled through the set: a wake-up from the reactor pushes it on the
//! set's queue and wakes the set's own waker, and the runtime then polls the set's `run_until`
//! future, which pops and polls the task. Per request at c=1 that is about 300 user-space
//! instructions of scheduling (cachegrind, `bench/instructions.sh`, see docs/performance.md).
//! A task of the current-thread runtime is pushed on the runtime's queue and polled from its
//! loop directly. Tokio asks such tasks to be `Send`; connection tasks are not (they hold the
//! worker's `Rc`s), and [`OnWorker`] vouches for them, which is sound only because the worker's
//! runtime is a current-thread runtime that lives and dies on the worker thread (see
//! [`spawn_on_worker`]). This is what tokio's own `LocalRuntime` does, which is not stable yet.
//!
//! Handlers keep their `spawn_local` (the worker enters its `LocalSet` for its whole life).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that is polled and dropped only on the worker thread (see the module docs).
struct OnWorker<F>(F);

// SAFETY: `OnWorker` is only made by `spawn_on_worker`, which spawns it on the worker's
// current-thread runtime. That runtime polls its tasks only inside its `block_on`, which runs on
// the worker thread, and drops the tasks left at its shutdown, which happens when the worker
// thread drops the runtime (`worker::run`, also when unwinding). Wakers may be sent to other
// threads (they only queue the task), and `Handle::block_on` on another thread runs only its own
// future, never the runtime's tasks; the future itself never leaves the worker thread.
unsafe impl<F> Send for OnWorker<F> {}

impl<F: Future<Output = ()>> Future for OnWorker<F> {
    type Output = ();

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: structural pinning of the only field; `OnWorker` has no `Drop` and never
        // moves the field out.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll(cx)
    }
}

/// Spawns a connection's task on the current worker's runtime (see the module docs).
///
/// Must be called from a worker (inside `worker::run`'s `block_on`), whose runtime is a
/// current-thread runtime owned by the worker thread.
pub(super) fn spawn_on_worker<F: Future<Output = ()> + 'static>(future: F) {
    debug_assert_eq!(
        tokio::runtime::Handle::current().runtime_flavor(),
        tokio::runtime::RuntimeFlavor::CurrentThread,
        "connection tasks run on the worker's current-thread runtime only"
    );
    drop(tokio::task::spawn(OnWorker(future)));
}
