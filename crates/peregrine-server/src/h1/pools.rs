//! What the HTTP/1.1 driver keeps per worker: the parser's field table, the response-head
//! cache, and the recycling of read and write buffers, of the shells of connections that went
//! idle (handed to the next connection that goes busy) and of the busy futures' memory (see
//! `docs/performance.md`).

use super::head::HeadCache;
use super::io::{Conn, READ_BUF_INITIAL, READ_SPARE};
use crate::pooled::BlockPool;
use crate::transport::Stream;
use crate::worker::{ConnShared, WorkerShared};
use crate::ServerConfig;
use bytes::BytesMut;
use peregrine_codec::FieldSpan;
use std::cell::RefCell;
use std::rc::Rc;

/// A worker's state as the HTTP/1.1 driver sees it.
pub(crate) type Shared = WorkerShared<Pools>;
/// A connection's hold on its worker (see [`ConnShared`]).
pub(crate) type Held = ConnShared<Pools>;

/// The HTTP/1.1 driver's per-worker state ([`WorkerShared::proto`]).
pub(crate) struct Pools {
    /// The parser's field table, shared by the worker's connections: parsing never yields, so
    /// one table per thread suffices and idle connections do not carry one.
    pub(crate) fields: RefCell<Box<[FieldSpan]>>,
    read_pool: RefCell<Vec<BytesMut>>,
    /// Connection shells of connections that went idle, for the next one that goes busy.
    /// Emptied when the worker stops: each holds an `Rc` to this state (a cycle otherwise).
    conn_pool: RefCell<Vec<Rc<Conn>>>,
    out_pool: RefCell<Vec<Vec<u8>>>,
    /// Memory for the per-batch futures of busy connections (see [`crate::pooled`]).
    pub(crate) busy_blocks: BlockPool,
    pub(crate) head_cache: RefCell<HeadCache>,
}

impl Pools {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let n = config.limits.max_fields.max(1);
        Pools {
            fields: RefCell::new(vec![FieldSpan::default(); n].into_boxed_slice()),
            read_pool: RefCell::new(Vec::new()),
            conn_pool: RefCell::new(Vec::new()),
            out_pool: RefCell::new(Vec::new()),
            busy_blocks: BlockPool::new(),
            head_cache: RefCell::new(HeadCache::new(config.server_name)),
        }
    }

    /// Brings the prepared `Date` line up to date (every `HEAD_CACHE_REFRESH`).
    pub(crate) fn refresh_heads(&self) {
        self.head_cache.borrow_mut().refresh();
    }

    /// Drops the pooled shells (at shutdown: no shell enters the pool from then on, see
    /// `put_conn`), which breaks the cycle between them and the worker's state.
    pub(crate) fn clear_conns(&self) {
        self.conn_pool.borrow_mut().clear();
    }
}

/// Buffers kept per worker for reuse; beyond this they are freed. Only connections that are
/// busy at the same moment on one thread need buffers, so a few suffice.
const POOL_MAX: usize = 16;
/// Output buffers larger than this are freed rather than pooled (after a big response).
const OUT_POOL_MAX_CAP: usize = 64 * 1024;

impl WorkerShared<Pools> {
    pub(crate) fn take_read_buf(&self) -> BytesMut {
        let mut b = self.proto.read_pool.borrow_mut().pop().unwrap_or_default();
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
        let mut pool = self.proto.read_pool.borrow_mut();
        if pool.len() < POOL_MAX {
            pool.push(b);
        }
    }

    /// A connection for `stream`, in a recycled shell if there is one (the allocation, and the
    /// copy of a new `Conn` into it, cost about a tenth of the engine's work per request when
    /// clients do not pipeline).
    pub(crate) fn take_conn(self: &Rc<Self>, stream: Stream) -> Rc<Conn> {
        if let Some(mut conn) = self.proto.conn_pool.borrow_mut().pop() {
            if let Some(c) = Rc::get_mut(&mut conn) {
                c.reuse(stream);
                return conn;
            }
        }
        Rc::new(Conn::new(stream, self.clone()))
    }

    /// Keeps the shell of a connection that went idle (see [`Conn::retire`]).
    pub(crate) fn put_conn(&self, conn: Rc<Conn>) {
        let mut pool = self.proto.conn_pool.borrow_mut();
        if pool.len() < POOL_MAX && !self.is_shutting_down() {
            pool.push(conn);
        }
    }

    pub(crate) fn take_out_buf(&self) -> Vec<u8> {
        self.proto.out_pool.borrow_mut().pop().unwrap_or_default()
    }

    pub(crate) fn put_out_buf(&self, mut b: Vec<u8>) {
        b.clear();
        let mut pool = self.proto.out_pool.borrow_mut();
        if pool.len() < POOL_MAX && b.capacity() <= OUT_POOL_MAX_CAP {
            pool.push(b);
        }
    }
}
