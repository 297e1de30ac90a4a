//! One worker: a thread with a tokio current-thread runtime, its own `SO_REUSEPORT` listener,
//! and every connection it accepted (no work stealing).

use crate::conn::{self, Conn, READ_BUF_INITIAL, READ_SPARE};
use crate::idle::{IdleSet, NO_KEY};
use crate::pooled::BlockPool;
use crate::{ServerConfig, Service};
use bytes::BytesMut;
use peregrine_codec::response::{status_line, DateCache};
use peregrine_codec::FieldSpan;
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// Buffers kept per worker for reuse; beyond this they are freed. Only connections that are
/// busy at the same moment on one thread need buffers, so a few suffice.
const POOL_MAX: usize = 16;
/// Output buffers larger than this are freed rather than pooled (after a big response).
const OUT_POOL_MAX_CAP: usize = 64 * 1024;

/// State shared by all workers: the connection count behind `max_connections`, and the
/// per-address counts behind `max_connections_per_addr`.
pub(crate) struct Global {
    open: AtomicUsize,
    max: usize,
    /// Woken when a connection closes while the server was full.
    capacity: Notify,
    /// A worker at the limit found no idle connection of its own to close: the next worker to
    /// tick with one closes its oldest (issue 17).
    evict_wanted: AtomicBool,
    /// Open connections per client address, when capped (issue 17). Touched once per accept
    /// and once per close, never per request.
    per_addr: Option<(usize, Mutex<HashMap<IpAddr, usize>>)>,
}

impl Global {
    pub(crate) fn new(max: usize, max_per_addr: Option<usize>) -> Self {
        Global {
            open: AtomicUsize::new(0),
            max: max.max(1),
            capacity: Notify::new(),
            evict_wanted: AtomicBool::new(false),
            per_addr: max_per_addr.map(|m| (m.max(1), Mutex::new(HashMap::new()))),
        }
    }

    /// Counts a new connection from `ip` against the per-address cap: `Err` past the cap,
    /// `Ok(None)` when there is no cap.
    fn hold_addr(self: &Arc<Self>, ip: IpAddr) -> Result<Option<AddrHold>, ()> {
        let Some((max, counts)) = &self.per_addr else {
            return Ok(None);
        };
        let ip = ip.to_canonical();
        let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(ip).or_insert(0);
        if *n >= *max {
            return Err(());
        }
        *n += 1;
        Ok(Some(AddrHold {
            global: self.clone(),
            ip,
        }))
    }

    fn try_acquire(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        let before = self.open.fetch_sub(1, Ordering::AcqRel);
        if before >= self.max {
            self.capacity.notify_waiters();
        }
    }
}

/// A connection's place in its address's count, given back on drop.
struct AddrHold {
    global: Arc<Global>,
    ip: IpAddr,
}

impl Drop for AddrHold {
    fn drop(&mut self) {
        if let Some((_, counts)) = &self.global.per_addr {
            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = counts.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(&self.ip);
                }
            }
        }
    }
}

/// A reserved connection slot, given back on drop unless a connection takes it over.
struct Slot<'a>(&'a Global);

impl<'a> Slot<'a> {
    /// A slot for a connection just accepted. At the limit, an idle keep-alive connection is
    /// closed to make room (issue 17): the one of this worker that waited longest, else one of
    /// another worker (at its next idle tick); if none is idle, this waits for a close, as the
    /// backlog did before.
    async fn acquire(global: &'a Global, idle: &IdleSet) -> Slot<'a> {
        if global.try_acquire() {
            return Slot(global);
        }
        loop {
            if !idle.evict_oldest() {
                global.evict_wanted.store(true, Ordering::Relaxed);
            }
            let notified = global.capacity.notified();
            tokio::pin!(notified);
            // Register before checking again so a release in between is not missed.
            notified.as_mut().enable();
            if global.try_acquire() {
                global.evict_wanted.store(false, Ordering::Relaxed);
                return Slot(global);
            }
            // A connection that goes idle meanwhile is a candidate at the next try.
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(idle.tick_len()) => {}
            }
            if global.try_acquire() {
                global.evict_wanted.store(false, Ordering::Relaxed);
                return Slot(global);
            }
        }
    }

    /// Hands the slot to a connection ([`ConnShared`] releases it).
    fn keep(self) {
        // Holds only a reference: forgetting it leaks nothing.
        std::mem::forget(self);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// The start of every response head, prepared once per refresh instead of per response: the
/// `Date` line (from the codec's formatter) and `Server` line, and the whole prefix of a 200.
/// Refreshed by a worker task every `HEAD_CACHE_REFRESH`, so `Date` is never more than that
/// behind; per response this saves a clock read and several small copies.
pub(crate) struct HeadCache {
    server: Vec<u8>,
    date_server: Vec<u8>,
    date_only: Vec<u8>,
    ok_prefix: Vec<u8>,
    /// Whole response heads recently encoded for responses whose fields are all `'static`
    /// (see [`HeadMemo`]); cleared with every refresh, since they contain the `Date` line.
    pub(crate) memo: Vec<HeadMemo>,
}

/// At most this many memoized heads per worker (a few routes answering in turn); each lookup
/// compares against all of them, so few.
pub(crate) const HEAD_MEMO_MAX: usize = 4;
/// Responses with more fields than this are not memoized (the key compare would cost more).
pub(crate) const HEAD_MEMO_FIELDS: usize = 4;

/// Identity of a response's field list whose names and values are all `Cow::Borrowed`
/// `'static` data: (name address, name length, value address, value length) per field. A
/// `&'static` slice is immutable and never freed, so equal address and length mean equal bytes:
/// a handler returning the same constant fields gets the same key, and an equal key can only come
/// from the same bytes.
pub(crate) type FieldsKey = SmallVec<[(usize, usize, usize, usize); HEAD_MEMO_FIELDS]>;

/// Which `Connection` line a response head carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnLine {
    /// None (HTTP/1.1 keep-alive is the default).
    Default,
    /// `Connection: close`.
    Close,
    /// `Connection: keep-alive` (HTTP/1.0 kept open).
    KeepAlive,
}

/// Which framing line a response head carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// None (bodiless status, HEAD of a streamed body, or HTTP/1.0 stream delimited by close).
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A complete response head (status line to the empty line) as the engine encoded it, kept so the
/// next response with the same status, the same `'static` fields, the same framing and the same
/// `Connection` line is one copy: no field validation, no number formatting, one `memcpy`.
/// Everything in the head is a function of this key and of the cached `Date`/`Server` lines.
pub(crate) struct HeadMemo {
    pub(crate) status: u16,
    pub(crate) key: FieldsKey,
    pub(crate) conn: ConnLine,
    pub(crate) framing: Framing,
    /// The fields themselves ask for `Connection: close`.
    pub(crate) close: bool,
    /// `bytes[..fields_len]` is the head up to the `Connection` and framing lines.
    pub(crate) fields_len: usize,
    pub(crate) bytes: Vec<u8>,
}

/// How often [`HeadCache`] is refreshed (`Date` has one-second resolution; well under a second
/// keeps it current).
const HEAD_CACHE_REFRESH: Duration = Duration::from_millis(250);

impl HeadCache {
    fn new(server_name: Option<&str>) -> Self {
        let server = server_name
            .map(|n| [b"Server: ".as_slice(), n.as_bytes(), b"\r\n"].concat())
            .unwrap_or_default();
        let mut c = HeadCache {
            server,
            date_server: Vec::new(),
            date_only: Vec::new(),
            ok_prefix: Vec::new(),
            memo: Vec::new(),
        };
        c.refresh();
        c
    }

    fn refresh(&mut self) {
        self.memo.clear();
        self.date_only.clear();
        DateCache::write_date_header(&mut self.date_only);
        self.date_server.clear();
        self.date_server.extend_from_slice(&self.date_only);
        self.date_server.extend_from_slice(&self.server);
        self.ok_prefix.clear();
        self.ok_prefix.extend_from_slice(status_line(200));
        self.ok_prefix.extend_from_slice(&self.date_server);
    }

    /// Appends the status line, `Date`, and (if `with_server`) the configured `Server` line.
    pub(crate) fn write_prefix(&self, out: &mut Vec<u8>, status: u16, with_server: bool) {
        match (status, with_server) {
            (200, true) => out.extend_from_slice(&self.ok_prefix),
            (_, true) => {
                out.extend_from_slice(status_line(status));
                out.extend_from_slice(&self.date_server);
            }
            (_, false) => {
                out.extend_from_slice(status_line(status));
                out.extend_from_slice(&self.date_only);
            }
        }
    }
}

/// Per-worker state every connection of the worker can reach (not generic over the service).
pub(crate) struct WorkerShared {
    pub(crate) config: ServerConfig,
    /// The parser's field table, shared by the worker's connections: parsing never yields, so
    /// one table per thread suffices and idle connections do not carry one.
    pub(crate) fields: RefCell<Box<[FieldSpan]>>,
    read_pool: RefCell<Vec<BytesMut>>,
    /// Connection shells of connections that went idle, for the next one that goes busy.
    /// Emptied when the worker stops: each holds an `Rc` to this state (a cycle otherwise).
    conn_pool: RefCell<Vec<Rc<Conn>>>,
    out_pool: RefCell<Vec<Vec<u8>>>,
    shutting_down: Cell<bool>,
    /// Idle connections, woken when they time out or shutdown starts.
    pub(crate) idle: IdleSet,
    /// Memory for the per-batch futures of busy connections (see [`crate::pooled`]).
    pub(crate) busy_blocks: BlockPool,
    pub(crate) head_cache: RefCell<HeadCache>,
    live: Cell<usize>,
    all_closed: Notify,
    /// The server-wide connection count.
    global: Arc<Global>,
}

impl WorkerShared {
    pub(crate) fn new(config: ServerConfig, global: Arc<Global>) -> Self {
        let n = config.limits.max_fields.max(1);
        WorkerShared {
            fields: RefCell::new(vec![FieldSpan::default(); n].into_boxed_slice()),
            read_pool: RefCell::new(Vec::new()),
            conn_pool: RefCell::new(Vec::new()),
            out_pool: RefCell::new(Vec::new()),
            shutting_down: Cell::new(false),
            idle: IdleSet::new(config.idle_timeout, config.header_timeout),
            busy_blocks: BlockPool::new(),
            head_cache: RefCell::new(HeadCache::new(config.server_name)),
            live: Cell::new(0),
            all_closed: Notify::new(),
            global,
            config,
        }
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    pub(crate) fn take_read_buf(&self) -> BytesMut {
        let mut b = self.read_pool.borrow_mut().pop().unwrap_or_default();
        // A recycled buffer starts where the last request consumed from it ended (`advance`
        // only moves its start). Moving it back to the start of its allocation (or replacing
        // it while a body chunk still holds a piece) costs a `reserve_inner` and a `memmove`,
        // so it is done only once the room left is short, not on every take.
        if b.capacity() - b.len() < READ_SPARE {
            b.reserve(READ_BUF_INITIAL);
        }
        b
    }

    pub(crate) fn put_read_buf(&self, mut b: BytesMut) {
        b.clear();
        let mut pool = self.read_pool.borrow_mut();
        if pool.len() < POOL_MAX {
            pool.push(b);
        }
    }

    /// A connection for `stream`, in a recycled shell if there is one (the allocation, and the
    /// copy of a new `Conn` into it, cost about a tenth of the engine's work per request when
    /// clients do not pipeline).
    pub(crate) fn take_conn(self: &Rc<Self>, stream: TcpStream) -> Rc<Conn> {
        if let Some(mut conn) = self.conn_pool.borrow_mut().pop() {
            if let Some(c) = Rc::get_mut(&mut conn) {
                c.reuse(stream);
                return conn;
            }
        }
        Rc::new(Conn::new(stream, self.clone()))
    }

    /// Keeps the shell of a connection that went idle (see [`Conn::retire`]).
    pub(crate) fn put_conn(&self, conn: Rc<Conn>) {
        let mut pool = self.conn_pool.borrow_mut();
        if pool.len() < POOL_MAX && !self.is_shutting_down() {
            pool.push(conn);
        }
    }

    pub(crate) fn take_out_buf(&self) -> Vec<u8> {
        self.out_pool.borrow_mut().pop().unwrap_or_default()
    }

    pub(crate) fn put_out_buf(&self, mut b: Vec<u8>) {
        b.clear();
        let mut pool = self.out_pool.borrow_mut();
        if pool.len() < POOL_MAX && b.capacity() <= OUT_POOL_MAX_CAP {
            pool.push(b);
        }
    }
}

/// Set when the worker's main task has ended (normally or by a panic), waking `block_on`.
#[derive(Default)]
struct Finished {
    done: Cell<bool>,
    waker: RefCell<Option<std::task::Waker>>,
}

impl Finished {
    fn poll(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.done.get() {
            return std::task::Poll::Ready(());
        }
        let mut w = self.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

/// Marks [`Finished`] when dropped: at the end of the main task, or while unwinding from it.
struct FinishedGuard(Rc<Finished>);

impl Drop for FinishedGuard {
    fn drop(&mut self) {
        self.0.done.set(true);
        if let Some(w) = self.0.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// A connection's hold on its worker: the worker's shared state, and the connection's place in
/// the server-wide count (`max_connections`), in the worker's live count and in its idle
/// registry, all given back on drop. Two words, because it is part of every idle connection's
/// state (see `conn::serve`).
pub(crate) struct ConnShared {
    shared: Rc<WorkerShared>,
    /// The connection's entry in [`WorkerShared::idle`], from its first idle wait on.
    pub(crate) idle_key: Cell<u32>,
}

impl ConnShared {
    fn new(shared: &Rc<WorkerShared>, slot: Slot<'_>) -> Self {
        slot.keep();
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }

    /// A hold taken without `accept` (tests of the connection driver).
    #[cfg(test)]
    pub(crate) fn for_test(shared: &Rc<WorkerShared>) -> Self {
        assert!(shared.global.try_acquire(), "the test's server is full");
        shared.live.set(shared.live.get() + 1);
        ConnShared {
            shared: shared.clone(),
            idle_key: Cell::new(NO_KEY),
        }
    }
}

impl std::ops::Deref for ConnShared {
    type Target = Rc<WorkerShared>;
    fn deref(&self) -> &Rc<WorkerShared> {
        &self.shared
    }
}

impl Drop for ConnShared {
    fn drop(&mut self) {
        let shared = &self.shared;
        let key = self.idle_key.get();
        if crate::idle::is_entry(key) {
            shared.idle.remove(key as usize);
        }
        shared.global.release();
        let n = shared.live.get() - 1;
        shared.live.set(n);
        if n == 0 {
            shared.all_closed.notify_one();
        }
    }
}

/// The body of a worker thread: accept until shutdown, then drain, then return (dropping what
/// is left, which force-closes it).
pub(crate) fn run<S: Service>(
    listener: std::net::TcpListener,
    config: ServerConfig,
    service: S,
    global: Arc<Global>,
    mut stop: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<std::io::Result<()>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        drop(ready);
        // The worker's own work runs in a task of its own, and `block_on` only waits for it to
        // finish. `LocalSet::block_on` polls its main future again every time any local task
        // is woken, that is, once per connection event: keeping accept/stop out of the main
        // future saves polling the listener and the stop channel each time.
        let finished = Rc::new(Finished::default());
        let guard = FinishedGuard(finished.clone());
        tokio::task::spawn_local(async move {
            let _guard = guard;
            let shared = Rc::new(WorkerShared::new(config, global));
            let service = Rc::new(service);
            let dates = shared.clone();
            tokio::task::spawn_local(async move {
                let mut tick = tokio::time::interval(HEAD_CACHE_REFRESH);
                loop {
                    tick.tick().await;
                    dates.head_cache.borrow_mut().refresh();
                }
            });
            let sweeper = shared.clone();
            tokio::task::spawn_local(async move {
                let mut tick = tokio::time::interval(sweeper.idle.tick_len());
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    sweeper.idle.sweep();
                    // Another worker is full and had no idle connection to close (issue 17).
                    let global = &sweeper.global;
                    if global.evict_wanted.load(Ordering::Relaxed) && sweeper.idle.evict_oldest() {
                        global.evict_wanted.store(false, Ordering::Relaxed);
                    }
                }
            });
            tokio::select! {
                _ = accept_loop(&listener, &shared, &service) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            // Stop accepting: connections still in this listener's backlog are refused.
            drop(listener);
            shared.shutting_down.set(true);
            // No shell enters the pool from now on (see `put_conn`): emptying it breaks the
            // cycle between the pooled shells and this state.
            shared.conn_pool.borrow_mut().clear();
            shared.idle.wake_all();
            let deadline = tokio::time::sleep(shared.config.shutdown_timeout);
            tokio::pin!(deadline);
            while shared.live.get() > 0 {
                tokio::select! {
                    _ = shared.all_closed.notified() => {}
                    _ = &mut deadline => {
                        tracing::warn!(
                            open = shared.live.get(),
                            "shutdown deadline passed; closing remaining connections"
                        );
                        break;
                    }
                }
            }
        });
        std::future::poll_fn(|cx| finished.poll(cx)).await;
    });
    // Dropping the set drops the connections still open (force-close after the deadline).
    let _guard = rt.enter();
    drop(local);
}

async fn accept_loop<S: Service>(
    listener: &TcpListener,
    shared: &Rc<WorkerShared>,
    service: &Rc<S>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE/ENFILE/ENOBUFS and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Past its address's cap, the connection is closed at once (issue 17).
        let Ok(addr_hold) = shared.global.hold_addr(peer.ip()) else {
            tracing::debug!(%peer, "per-address connection cap reached; closing");
            continue;
        };
        // Then a slot: at the limit, this closes an idle connection or waits (the next clients
        // wait in the backlog meanwhile).
        let slot = Slot::acquire(&shared.global, &shared.idle).await;
        // Responses are written once per batch, so Nagle would only add delay.
        let _ = stream.set_nodelay(true);
        let serve = conn::serve(service.clone(), ConnShared::new(shared, slot), stream, peer);
        match addr_hold {
            None => {
                tokio::task::spawn_local(serve);
            }
            // Only with a cap: the hold lives as long as the connection (a larger task, by the
            // hold's 32 bytes, so the uncapped default keeps its size).
            Some(hold) => {
                tokio::task::spawn_local(async move {
                    let _hold = hold;
                    serve.await
                });
            }
        }
    }
}
