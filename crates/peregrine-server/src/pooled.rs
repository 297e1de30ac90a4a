//! Recycled heap blocks for the per-batch future of a connection.
//!
//! A connection's task stays small while idle because the work of answering requests runs in a
//! separate heap-allocated future that exists only while the connection is busy (see
//! `h1::serve`). Without pipelining that future is created once per request, and a fresh
//! `Box` for it cost a `malloc` and a `free` of several hundred bytes per request: about 270
//! instructions per request at 50 connections (callgrind, `bench/instructions.sh`), more than a
//! tenth of the engine's own work. The worker keeps the freed blocks instead and hands them to
//! the next busy connection: taking and returning one is a `Vec` pop and push.
//!
//! Blocks have one size per worker (every connection of a worker runs the same service, so the
//! same future type); a future of another layout falls back to its own allocation.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Free blocks kept per worker; beyond this they are freed. Only connections busy at the same
/// moment need one, so a few dozen cover bursts without pinning much memory.
const POOL_MAX: usize = 64;

/// Free blocks of one layout, owned by one worker thread.
pub(crate) struct BlockPool {
    /// The layout of every block in `free` (set by the first block returned).
    layout: Cell<Option<Layout>>,
    free: RefCell<Vec<NonNull<u8>>>,
}

impl BlockPool {
    pub(crate) fn new() -> Self {
        BlockPool {
            layout: Cell::new(None),
            free: RefCell::new(Vec::new()),
        }
    }

    /// A block for `layout` (non-zero size): a recycled one if the pool holds that layout, else
    /// a new allocation.
    fn take(&self, layout: Layout) -> NonNull<u8> {
        if self.layout.get() == Some(layout) {
            if let Some(p) = self.free.borrow_mut().pop() {
                return p;
            }
        }
        // SAFETY: `layout` has a non-zero size (checked by the caller).
        let p = unsafe { alloc(layout) };
        NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout))
    }

    /// Takes back a block allocated for `layout` that no longer holds a live value.
    fn put(&self, p: NonNull<u8>, layout: Layout) {
        let mut free = self.free.borrow_mut();
        match self.layout.get() {
            None => self.layout.set(Some(layout)),
            Some(l) if l == layout => {}
            Some(_) => {
                // SAFETY: `p` was allocated with `layout` (by `take`) and holds nothing.
                unsafe { dealloc(p.as_ptr(), layout) };
                return;
            }
        }
        if free.len() < POOL_MAX {
            free.push(p);
        } else {
            // SAFETY: as above.
            unsafe { dealloc(p.as_ptr(), layout) };
        }
    }
}

impl Drop for BlockPool {
    fn drop(&mut self) {
        if let Some(layout) = self.layout.get() {
            for p in self.free.get_mut().drain(..) {
                // SAFETY: every block in `free` was allocated with `layout` and holds nothing.
                unsafe { dealloc(p.as_ptr(), layout) };
            }
        }
    }
}

/// A future stored in a block of a [`BlockPool`]: like `Pin<Box<F>>`, except that the memory goes
/// back to the pool when the future completes or is dropped.
pub(crate) struct PooledFuture<'p, F: Future> {
    ptr: NonNull<F>,
    pool: &'p BlockPool,
}

impl<'p, F: Future> PooledFuture<'p, F> {
    /// Moves `fut` into a block of `pool`. Zero-sized futures need no block and are not supported
    /// (the per-batch future never is one).
    #[cfg(test)]
    pub(crate) fn new(pool: &'p BlockPool, fut: F) -> Self {
        Self::new_with(pool, || fut)
    }

    /// Builds the future returned by `make` in a block of `pool`: called with the block at hand,
    /// an `async fn` call writes its (small) initial state straight into the block instead of a
    /// whole future's size being copied there.
    #[inline(always)]
    pub(crate) fn new_with(pool: &'p BlockPool, make: impl FnOnce() -> F) -> Self {
        let layout = Layout::new::<F>();
        assert!(layout.size() > 0, "zero-sized futures are not pooled");
        let ptr = pool.take(layout).cast::<F>();
        // SAFETY: `ptr` is valid for writes of `F` and suitably aligned: it was allocated with
        // `F`'s layout (the pool only returns blocks of the exact layout asked for).
        unsafe { ptr.as_ptr().write(make()) };
        PooledFuture { ptr, pool }
    }
}

impl<F: Future> Future for PooledFuture<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the future lives at `ptr` from `new` until `drop` and is never moved out of
        // it (nothing hands out `&mut F` except this pin), so pinning it is sound; `&mut self`
        // makes this the only reference.
        unsafe { Pin::new_unchecked(&mut *self.ptr.as_ptr()) }.poll(cx)
    }
}

impl<F: Future> Drop for PooledFuture<'_, F> {
    fn drop(&mut self) {
        // SAFETY: `ptr` holds a live `F` (written in `new`, dropped only here); after dropping it
        // in place the block holds nothing and is handed back with the layout it was taken for.
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            self.pool.put(self.ptr.cast(), Layout::new::<F>());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Counts its drops, so a test can check that every pooled future is dropped exactly once.
    struct Tracked {
        drops: Rc<Cell<usize>>,
        payload: [u64; 16],
    }

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.drops.set(self.drops.get() + 1);
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn blocks_are_reused_and_values_dropped_once() {
        let pool = BlockPool::new();
        let drops = Rc::new(Cell::new(0));
        let mut addrs = Vec::new();
        for i in 0..5u64 {
            let t = Tracked {
                drops: drops.clone(),
                payload: [i; 16],
            };
            let fut = PooledFuture::new(&pool, async move {
                // The whole `t` (not just its `Copy` field) moves into the future.
                let t = t;
                tokio::task::yield_now().await;
                t.payload.iter().sum::<u64>()
            });
            addrs.push(fut.ptr.as_ptr() as usize);
            assert_eq!(run(fut), 16 * i);
            assert_eq!(drops.get(), i as usize + 1);
        }
        // One block served all five futures, one after the other.
        assert!(addrs.iter().all(|&a| a == addrs[0]));
        assert_eq!(pool.free.borrow().len(), 1);
    }

    #[test]
    fn a_future_dropped_before_completion_is_dropped_and_its_block_returned() {
        let pool = BlockPool::new();
        let drops = Rc::new(Cell::new(0));
        let t = Tracked {
            drops: drops.clone(),
            payload: [7; 16],
        };
        let fut = PooledFuture::new(&pool, async move {
            std::future::pending::<()>().await;
            drop(t);
        });
        drop(fut);
        assert_eq!(drops.get(), 1);
        assert_eq!(pool.free.borrow().len(), 1);
    }

    /// One future type for several values (same layout each time).
    async fn hold<T>(v: T) -> T {
        tokio::task::yield_now().await;
        v
    }

    #[test]
    fn concurrent_futures_get_distinct_blocks_and_other_layouts_their_own() {
        let pool = BlockPool::new();
        let a = PooledFuture::new(&pool, hold([1u8; 100]));
        let b = PooledFuture::new(&pool, hold([2u8; 100]));
        assert_ne!(a.ptr.as_ptr() as usize, b.ptr.as_ptr() as usize);
        assert_eq!(run(a), [1u8; 100]);
        assert_eq!(run(b), [2u8; 100]);
        assert_eq!(pool.free.borrow().len(), 2);
        // A future of another layout is allocated and freed on its own, leaving the pool as is.
        let c = PooledFuture::new(&pool, hold([3u64; 40]));
        assert_eq!(run(c), [3u64; 40]);
        assert_eq!(pool.free.borrow().len(), 2);
        let d = PooledFuture::new(&pool, hold([4u8; 100]));
        assert_eq!(run(d), [4u8; 100]);
        assert_eq!(pool.free.borrow().len(), 2);
    }

    #[test]
    fn the_pool_keeps_at_most_pool_max_blocks() {
        let pool = BlockPool::new();
        let futs: Vec<_> = (0..POOL_MAX + 10)
            .map(|i| PooledFuture::new(&pool, async move { i }))
            .collect();
        drop(futs);
        assert_eq!(pool.free.borrow().len(), POOL_MAX);
    }
}
