//! Fault injection for the engine's own failure tests (cargo feature `fault-injection`, never
//! in a default build): makes a worker thread die outside any handler, the way a bug in the
//! engine or in a library it runs would, or its `accept` fail as when the system runs out of
//! open files, so the tests can check what the server does about it.

use crate::listener::AsyncListener;
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// What an injected fault does to a worker.
///
/// ```no_run
/// use peregrine_server::server::Fault;
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let config = ServerConfig::builder().workers(2).build();
/// let handle = Server::new(config)
///     .serve(service_fn(|_req: Request| async { Response::text("hi") }))
///     .unwrap();
/// handle.inject_fault(1, Fault::Panic); // worker 1 dies; the supervisor restarts it
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The worker's own task panics (outside any handler); unwinding closes its socket.
    Panic,
    /// The worker's thread stops accepting, keeps its listening socket open for a while (new
    /// connections pile up in the backlog), then ends with the descriptor still open: a
    /// thread that is gone while its socket is not, the case that leaves a dead socket in the
    /// `SO_REUSEPORT` group.
    LeakSocket,
    /// [`Fault::Panic`] in every incarnation of the worker, restarts included: a panic loop.
    PanicAlways,
    /// Every `accept` of the worker fails with this OS error (`libc::ENFILE`: the system-wide
    /// table of open files is full, which a test cannot do to a shared machine) until
    /// [`Fault::AcceptRecovers`]; the connections stay queued in the backlog, as the kernel
    /// leaves them when it cannot give one a descriptor. The worker lives on.
    AcceptFails(i32),
    /// Ends [`Fault::AcceptFails`]: the worker accepts again.
    AcceptRecovers,
}

/// One worker's fault trigger, kept across its restarts.
#[derive(Default)]
pub(crate) struct Slot {
    armed: Mutex<Option<Fault>>,
    fire: Notify,
    /// The OS error every accept fails with; 0 while accepts are not failed.
    accept_errno: AtomicI32,
    /// Wakes an accept that was already waiting when accepts started to fail.
    accept_failing: Notify,
}

thread_local! {
    /// The fault slot of the worker running on this thread (set by [`or_killed`]), read by
    /// the accept loop, which is not handed the slot.
    static CURRENT: RefCell<Option<Arc<Slot>>> = const { RefCell::new(None) };
}

impl Slot {
    /// Arms the fault; the worker fires it at once (or as soon as it accepts again). Accept
    /// failures start or end at the next accept instead, and kill nothing.
    pub(crate) fn arm(&self, fault: Fault) {
        match fault {
            Fault::AcceptFails(errno) => {
                self.accept_errno.store(errno, Ordering::SeqCst);
                self.accept_failing.notify_waiters();
            }
            Fault::AcceptRecovers => self.accept_errno.store(0, Ordering::SeqCst),
            kill => {
                *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = Some(kill);
                self.fire.notify_one();
            }
        }
    }

    /// The injected accept error, while there is one.
    fn accept_error(&self) -> Option<std::io::Error> {
        let errno = self.accept_errno.load(Ordering::SeqCst);
        (errno != 0).then(|| std::io::Error::from_raw_os_error(errno))
    }

    async fn fired(&self) -> Fault {
        loop {
            let notified = self.fire.notified();
            let fault = {
                let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
                match *armed {
                    Some(Fault::PanicAlways) => Some(Fault::PanicAlways),
                    other => {
                        *armed = None;
                        other
                    }
                }
            };
            if let Some(fault) = fault {
                return fault;
            }
            notified.await;
        }
    }
}

/// `accept` (the listener's), unless the worker on this thread has an accept error injected
/// ([`Fault::AcceptFails`]): then that error, at once or as soon as it is injected (an accept
/// that is waiting gives up, which loses nothing: tokio's accept is cancel safe).
pub(crate) async fn or_accept_error<T, F>(accept: F) -> std::io::Result<T>
where
    F: Future<Output = std::io::Result<T>>,
{
    let Some(slot) = CURRENT.with(|current| current.borrow().clone()) else {
        return accept.await;
    };
    let failing = slot.accept_failing.notified();
    if let Some(e) = slot.accept_error() {
        return Err(e);
    }
    tokio::select! {
        accepted = accept => accepted,
        // Ended again before this woke: the loop's back-off, then a real accept.
        () = failing => Err(slot
            .accept_error()
            .unwrap_or_else(|| std::io::ErrorKind::Interrupted.into())),
    }
}

/// Runs `work` (the accept loop) until the slot's fault fires, then carries the fault out.
pub(crate) async fn or_killed<F: Future>(work: F, slot: &Arc<Slot>, listener: &AsyncListener) {
    CURRENT.with(|current| *current.borrow_mut() = Some(slot.clone()));
    let fault = tokio::select! {
        _ = work => return,
        f = slot.fired() => f,
    };
    if fault == Fault::LeakSocket {
        if let AsyncListener::Tcp(l) = listener {
            // A second descriptor nobody will close: the socket outlives this thread.
            if let Ok(leaked) = socket2::SockRef::from(l).try_clone() {
                std::mem::forget(leaked);
            }
        }
        // Blocks the thread (no accepting) while connections queue up on the socket.
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "fault injection: {fault:?} kills worker {}",
        crate::events::current_worker()
    );
}

/// Makes the next `n` growths of a connection's read buffer fail as if the allocator had
/// refused the memory (see `grow.rs`): each such connection is closed, the server goes on.
pub fn refuse_read_buffer_growth(n: usize) {
    crate::grow::REFUSE.store(n, std::sync::atomic::Ordering::SeqCst);
}
