//! An access log of exactly one line per request: the requests the application answered or
//! dropped (a middleware) and the ones the engine refused before any handler saw them (an
//! [`EngineEvents`] listener: malformed requests, heads or bodies over the limits, header
//! timeouts, connections refused at `max_connections_per_addr`). What each kind of request
//! logs is in `docs/reliability.md`.
//!
//! Lines are JSON objects, one per line (JSON Lines), written by a thread of the log's own
//! through a bounded queue: a worker never waits for the disk. A full queue or a failing write
//! (a full disk) drops the line and counts it ([`AccessLog::dropped`]); nothing blocks or
//! panics, and the log picks up again when the disk has room. When the last clone of the log
//! goes (the server stopped and the application dropped), it waits for the writer to write
//! every line still queued, for at most [`CLOSE_WAIT`]: a process that exits after a graceful
//! shutdown loses none of its last requests' lines.
//!
//! ```
//! use peregrine::access_log::AccessLog;
//! use peregrine::config::Config;
//! use peregrine::server::ServerConfig;
//! use peregrine::{get, App, Request};
//! use std::sync::Arc;
//!
//! let dir = tempfile::tempdir()?;
//! let log = AccessLog::to_file(dir.path().join("access.log"))?;
//! // Before routing, so that 404s and 405s are logged too.
//! let app = App::new()
//!     .route("/", get(|_r: Request| async { "hi" }))
//!     .layer_before_routing(log.clone());
//! let config = Config::from(ServerConfig::default()).with_events(Arc::new(log.clone()));
//! # let _ = (app, config);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A line (`source` says who answered: `app`, or `engine` with the engine's `reason`):
//!
//! ```text
//! {"time":"Fri, 27 Nov 2026 14:30:00 GMT","source":"app","peer":"127.0.0.1:50312","method":"GET","target":"/","version":"HTTP/1.1","status":200,"bytes":2,"micros":41,"reason":null}
//! ```

use crate::handler::BoxFuture;
use crate::middleware::observe::on_complete;
use crate::middleware::{Middleware, Next};
use crate::request::Request;
use crate::IntoResponse;
use peregrine_server::events::{EngineEvents, RejectReason, Rejection};
use peregrine_server::{Response, Version};
use serde::Serialize;
use std::fs::OpenOptions;
use std::future::Future;
use std::io::{self, Write};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

/// Lines waiting for the writer before new ones are dropped.
pub const DEFAULT_QUEUE_LINES: usize = 8192;

/// The writer sends at most this much in one write.
const BATCH_BYTES: usize = 64 * 1024;

/// How long dropping the last clone of an [`AccessLog`] waits for the lines still queued to
/// be written (a disk that takes longer loses them, rather than holding the process).
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The access log: a [`Middleware`] for the requests that reach the application and an
/// [`EngineEvents`] listener for the ones the engine answers itself. Clones share one queue,
/// one writer and the counters. See the [module](self) documentation.
#[derive(Clone)]
pub struct AccessLog {
    shared: Arc<Shared>,
}

// Fields drop in order: the queue's sender first, which lets the writer finish, then
// `_writer_done` waits for it.
struct Shared {
    queue: SyncSender<String>,
    counts: Arc<Counts>,
    _writer_done: WriterDone,
}

/// Disconnected when the writer thread has written its last line and ended (in a `Mutex`
/// only for `Sync`: it is touched once, on drop).
struct WriterDone(Mutex<Receiver<()>>);

impl Drop for WriterDone {
    fn drop(&mut self) {
        if let Ok(done) = self.0.get_mut() {
            let _ = done.recv_timeout(CLOSE_WAIT);
        }
    }
}

#[derive(Default)]
struct Counts {
    written: AtomicU64,
    dropped: AtomicU64,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("written", &self.written())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl AccessLog {
    /// Appends to the file at `path` (created if missing).
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<AccessLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        AccessLog::to_writer(file, DEFAULT_QUEUE_LINES)
    }

    /// Writes to `out` (each batch of lines with one `write_all`-like loop, from the log's
    /// thread), holding at most `queue_lines` lines that wait for it. An error if the thread
    /// cannot be started.
    ///
    /// ```
    /// use peregrine::access_log::AccessLog;
    /// let log = AccessLog::to_writer(std::io::sink(), 1024)?;
    /// assert_eq!((log.written(), log.dropped()), (0, 0));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn to_writer(
        out: impl Write + Send + 'static,
        queue_lines: usize,
    ) -> io::Result<AccessLog> {
        let (queue, lines) = mpsc::sync_channel(queue_lines.max(1));
        let counts = Arc::new(Counts::default());
        let writer_counts = counts.clone();
        let (done, closed) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("peregrine-access-log".into())
            .spawn(move || {
                write_lines(lines, out, &writer_counts);
                drop(done);
            })?;
        Ok(AccessLog {
            shared: Arc::new(Shared {
                queue,
                counts,
                _writer_done: WriterDone(Mutex::new(closed)),
            }),
        })
    }

    /// Lines written whole so far.
    pub fn written(&self) -> u64 {
        self.shared.counts.written.load(Ordering::Relaxed)
    }

    /// Lines lost so far: the queue was full, or the write failed (a full disk).
    pub fn dropped(&self) -> u64 {
        self.shared.counts.dropped.load(Ordering::Relaxed)
    }

    /// Queues the line, or counts it as dropped (the queue is full, or the writer is gone).
    fn push(&self, line: &Line<'_>) {
        let queued = serde_json::to_string(line).map(|mut text| {
            text.push('\n');
            self.shared.queue.try_send(text)
        });
        if !matches!(queued, Ok(Ok(()))) {
            self.shared.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One line of the log.
#[derive(Serialize)]
struct Line<'a> {
    /// When the line was made (the response's end, or the engine's refusal), HTTP date format.
    time: String,
    /// `app` or `engine`.
    source: &'static str,
    peer: String,
    /// `null` when the engine refused the request before its line was parsed.
    method: Option<&'a str>,
    target: Option<&'a str>,
    version: Option<&'static str>,
    /// 0: the connection was closed without a response.
    status: u16,
    /// Body bytes of the response.
    bytes: u64,
    /// From the request's arrival in the application to its response's end (app lines).
    micros: Option<u64>,
    /// The engine's [`RejectReason`] (engine lines).
    reason: Option<&'static str>,
}

fn now() -> String {
    httpdate::fmt_http_date(SystemTime::now())
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
        Version::Http2 => "HTTP/2",
        Version::Http3 => "HTTP/3",
    }
}

impl Middleware for AccessLog {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let pending = Pending {
            log: self.clone(),
            method: req.method().to_owned(),
            target: req.target().to_owned(),
            version: version_str(req.version()),
            peer: req.peer_addr().to_string(),
            head: req.method_kind() == peregrine_server::Method::Head,
            start: Instant::now(),
        };
        Box::pin(Logged {
            inner: next.run(req),
            pending: Some(pending),
        })
    }
}

/// A request on its way through the application, until its line is written.
struct Pending {
    log: AccessLog,
    method: String,
    target: String,
    version: &'static str,
    peer: String,
    head: bool,
    start: Instant,
}

impl Pending {
    /// Writes the line once the response's body has been handed over (see `on_complete`).
    fn on_complete(self, res: &mut Response) {
        let head = self.head;
        on_complete(res, head, move |status, bytes| self.write(status, bytes));
    }

    fn write(self, status: u16, bytes: u64) {
        self.log.push(&Line {
            time: now(),
            source: "app",
            peer: self.peer,
            method: Some(&self.method),
            target: Some(&self.target),
            version: Some(self.version),
            status,
            bytes,
            micros: Some(self.start.elapsed().as_micros() as u64),
            reason: None,
        });
    }
}

/// The rest of the application with the request's line attached: written with the response,
/// with the `500` the application answers when a handler panics (the panic then goes on to
/// the application, which answers it), or with status 0 when the request is dropped
/// unanswered (its connection or stream went away).
struct Logged {
    inner: BoxFuture<Response>,
    pending: Option<Pending>,
}

impl Future for Logged {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(mut res)) => {
                if let Some(p) = self.pending.take() {
                    p.on_complete(&mut res);
                }
                Poll::Ready(res)
            }
            Err(panic) => {
                if let Some(p) = self.pending.take() {
                    // What the application sends for a panic (`app/service.rs`).
                    p.on_complete(&mut crate::Error::internal().into_response());
                }
                std::panic::resume_unwind(panic)
            }
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.write(0, 0);
        }
    }
}

/// Whether an engine event is a request no application line covers: an error response the
/// engine wrote instead of calling the service (not one that replaced the service's answer),
/// or a new connection refused at its address's cap. Idle closes, silent connections, write
/// timeouts (the request was logged when answered) and waits for a slot are not requests.
fn is_own_request(ev: &Rejection<'_>) -> bool {
    if ev.replaced {
        return false;
    }
    match ev.reason {
        RejectReason::LimitReached => ev.detail == "max_connections_per_addr",
        _ => ev.status != 0,
    }
}

impl EngineEvents for AccessLog {
    fn rejected(&self, ev: &Rejection<'_>) {
        if !is_own_request(ev) {
            return;
        }
        self.push(&Line {
            time: now(),
            source: "engine",
            peer: ev.peer.to_string(),
            method: ev.method,
            target: ev.target,
            version: None,
            status: ev.status,
            bytes: ev.bytes_out,
            micros: None,
            reason: Some(ev.reason.as_str()),
        });
    }
}

/// The writer thread: takes every line waiting (up to [`BATCH_BYTES`]), writes them, counts
/// what was written whole and what was lost. Ends when every [`AccessLog`] is gone.
fn write_lines(lines: Receiver<String>, mut out: impl Write, counts: &Counts) {
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    // The last write stopped inside a line: the next batch starts on a new line.
    let mut cut = false;
    let mut failing = false;
    while let Ok(first) = lines.recv() {
        batch.clear();
        if cut {
            batch.push(b'\n');
        }
        let repair = batch.len();
        batch.extend_from_slice(first.as_bytes());
        let mut n = 1u64;
        while batch.len() < BATCH_BYTES {
            let Ok(line) = lines.try_recv() else { break };
            batch.extend_from_slice(line.as_bytes());
            n += 1;
        }
        let (sent, err) = write_some(&mut out, &batch);
        let mut whole = batch[repair.min(sent)..sent]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        // Stopped just before a line's newline: the line is all there (a reader of the file
        // sees it whole) and its newline comes first in the next batch.
        if sent > repair && batch.get(sent) == Some(&b'\n') {
            whole += 1;
        }
        counts.written.fetch_add(whole, Ordering::Relaxed);
        counts.dropped.fetch_add(n - whole, Ordering::Relaxed);
        if sent > 0 {
            cut = batch[sent - 1] != b'\n';
        }
        match err {
            Some(e) if !failing => {
                failing = true;
                tracing::warn!(
                    target: "peregrine::access_log",
                    error = %e,
                    "access log write failed; dropping lines"
                );
            }
            Some(_) => {}
            None if failing => {
                failing = false;
                tracing::warn!(target: "peregrine::access_log", "access log writes again");
            }
            None => {}
        }
    }
    let _ = out.flush();
}

/// Writes as much of `buf` as `out` takes; the bytes written and the error that stopped it.
fn write_some(out: &mut impl Write, buf: &[u8]) -> (usize, Option<io::Error>) {
    let mut sent = 0;
    while sent < buf.len() {
        match out.write(&buf[sent..]) {
            Ok(0) => return (sent, Some(io::ErrorKind::WriteZero.into())),
            Ok(k) => sent += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (sent, Some(e)),
        }
    }
    match out.flush() {
        Ok(()) => (sent, None),
        Err(e) => (sent, Some(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::JoinHandle;

    /// Takes `room` bytes, then fails like a full disk until given more room.
    #[derive(Clone, Default)]
    struct Disk(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Disk {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut d = self.0.lock().unwrap();
            let room = d.1 - d.0.len();
            if room == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let k = b.len().min(room);
            d.0.extend_from_slice(&b[..k]);
            Ok(k)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A writer thread on a [`Disk`] of `room` bytes, given three 11-byte lines; returns once
    /// it has counted them: the disk, the queue, the counts and the thread.
    fn three_lines_on(room: usize) -> (Disk, SyncSender<String>, Arc<Counts>, JoinHandle<()>) {
        let (tx, rx) = mpsc::sync_channel(16);
        let disk = Disk(Arc::new(Mutex::new((Vec::new(), room))));
        let counts = Arc::new(Counts::default());
        let writer = std::thread::spawn({
            let (disk, counts) = (disk.clone(), counts.clone());
            move || write_lines(rx, disk, &counts)
        });
        for l in ["0123456789\n", "abcdefghij\n", "ABCDEFGHIJ\n"] {
            tx.send(l.to_owned()).unwrap();
        }
        while counts.written.load(Ordering::Relaxed) + counts.dropped.load(Ordering::Relaxed) < 3 {
            std::thread::yield_now();
        }
        (disk, tx, counts, writer)
    }

    #[test]
    fn a_full_disk_drops_and_counts_lines_and_the_log_recovers() {
        let (disk, tx, counts, writer) = three_lines_on(25);
        // 25 bytes of room: two lines whole, the third cut.
        assert_eq!(counts.written.load(Ordering::Relaxed), 2);
        assert_eq!(counts.dropped.load(Ordering::Relaxed), 1);
        // Room again: the next line starts on a line of its own.
        disk.0.lock().unwrap().1 = 1000;
        tx.send("next\n".to_owned()).unwrap();
        drop(tx);
        writer.join().unwrap();
        let text = String::from_utf8(disk.0.lock().unwrap().0.clone()).unwrap();
        assert_eq!(text, "0123456789\nabcdefghij\nABC\nnext\n");
        assert_eq!(counts.written.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_line_cut_only_before_its_newline_counts_as_written() {
        // Room for two lines and the third but its newline.
        let (disk, tx, counts, writer) = three_lines_on(32);
        assert_eq!(counts.written.load(Ordering::Relaxed), 3);
        assert_eq!(counts.dropped.load(Ordering::Relaxed), 0);
        disk.0.lock().unwrap().1 = 1000;
        tx.send("next\n".to_owned()).unwrap();
        drop(tx);
        writer.join().unwrap();
        let text = String::from_utf8(disk.0.lock().unwrap().0.clone()).unwrap();
        assert_eq!(text, "0123456789\nabcdefghij\nABCDEFGHIJ\nnext\n");
        assert_eq!(counts.written.load(Ordering::Relaxed), 4);
    }

    /// Takes nothing until `open` is sent, like a disk that stalls.
    struct Stalled(std::sync::mpsc::Receiver<()>);

    impl Write for Stalled {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let _ = self.0.recv();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn a_line() -> Line<'static> {
        Line {
            time: now(),
            source: "app",
            peer: "127.0.0.1:1".into(),
            method: Some("GET"),
            target: Some("/"),
            version: Some("HTTP/1.1"),
            status: 200,
            bytes: 0,
            micros: Some(1),
            reason: None,
        }
    }

    /// Takes each write after a pause, like a slow disk.
    struct Slow(Arc<Mutex<Vec<u8>>>);

    impl Write for Slow {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_millis(20));
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn dropping_the_last_clone_writes_every_queued_line_first() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let log = AccessLog::to_writer(Slow(out.clone()), 64).unwrap();
        let line = a_line();
        let clone = log.clone();
        for _ in 0..20 {
            clone.push(&line);
        }
        drop(clone);
        drop(log);
        // A process exiting now (its server stopped) would keep every line.
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 20, "{text}");
    }

    #[test]
    fn a_full_queue_drops_lines_instead_of_blocking() {
        let (open, stalled) = mpsc::channel();
        let log = AccessLog::to_writer(Stalled(stalled), 2).unwrap();
        let line = a_line();
        // The writer takes the first line and stalls on it; the queue holds two more; the other
        // seven are dropped, and no push waits for the writer.
        log.push(&line);
        std::thread::sleep(std::time::Duration::from_millis(50));
        for _ in 0..9 {
            log.push(&line);
        }
        assert_eq!(log.dropped(), 7, "{log:?}");
        drop(open);
        while log.written() + log.dropped() < 10 {
            std::thread::yield_now();
        }
        assert_eq!(log.written() + log.dropped(), 10);
    }
}
