//! The recycling the HTTP/1.1 driver does per worker ([`Pools`], declared in `io.rs` beside the
//! connection shells it holds): read and write buffers, and the shells of connections that went
//! idle, handed to the next connection that goes busy (see `docs/performance.md`).

use super::head::HeadCache;
use super::io::{Conn, Pools, READ_BUF_INITIAL, READ_SPARE};
use crate::pooled::BlockPool;
use crate::transport::Stream;
use crate::worker::WorkerShared;
use crate::ServerConfig;
use bytes::BytesMut;
use peregrine_codec::FieldSpan;
use std::cell::RefCell;
use std::rc::Rc;

impl Pools {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let n = config.limits.parser.max_fields.max(1);
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

/// A worker's state for the driver's own tests (no worker thread, no connection limit).
#[cfg(test)]
pub(crate) fn shared_for_test() -> Rc<super::Shared> {
    let config = ServerConfig::default();
    let pools = Pools::new(&config);
    let global = std::sync::Arc::new(crate::worker::Global::new(usize::MAX, None));
    Rc::new(WorkerShared::new(config, None, global, pools))
}
