//! Fault injection for the engine's own failure tests (cargo feature `fault-injection`, never
//! in a default build): makes a worker thread die outside any handler, the way a bug in the
//! engine or in a library it runs would, so the tests can check what the server does about it.

use crate::listener::AsyncListener;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;

/// How an injected fault kills a worker.
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
}

/// One worker's fault trigger, kept across its restarts.
#[derive(Default)]
pub(crate) struct Slot {
    armed: Mutex<Option<Fault>>,
    fire: Notify,
}

impl Slot {
    /// Arms the fault; the worker fires it at once (or as soon as it accepts again).
    pub(crate) fn arm(&self, fault: Fault) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = Some(fault);
        self.fire.notify_one();
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

/// Runs `work` (the accept loop) until the slot's fault fires, then carries the fault out.
pub(crate) async fn or_killed<F: Future>(work: F, slot: &Slot, listener: &AsyncListener) {
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
