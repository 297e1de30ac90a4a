//! Failures of the engine's own threads and of the process's resources, over real sockets:
//! a worker that dies outside a handler (injected with the hidden `fault-injection` API) never
//! leaves a socket that accepts nobody's connections; a worker that keeps dying stops the
//! server with an error; a handler's panic stays contained; running out of descriptors
//! (`EMFILE`) neither stops existing connections nor spins the accept loop.
//!
//! Run with `cargo test -p peregrine-server --features fault-injection --test faults`.
#![cfg(feature = "fault-injection")]

mod common;
use peregrine_server::server::Fault;
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig, ServerHandle};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Every client gives up after this long: a connection that hits it waited on a dead socket.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a client got.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// A complete response; the worker thread's name that answered it.
    Answered(String),
    /// The connection was reset or closed unanswered (it was in a dead socket's backlog).
    Closed,
    /// Nothing within [`CLIENT_TIMEOUT`]: the failure these tests exist for.
    TimedOut,
}

/// One request on a new connection (`Connection: close`), read to the end.
fn fetch(addr: SocketAddr, path: &str) -> Outcome {
    let mut s = match TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::TimedOut => return Outcome::TimedOut,
        Err(_) => return Outcome::Closed,
    };
    s.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    let sent = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    );
    if sent.is_err() {
        return Outcome::Closed;
    }
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            return Outcome::TimedOut
        }
        Err(_) => return Outcome::Closed,
    }
    let text = String::from_utf8_lossy(&out);
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => {
            Outcome::Answered(body.to_owned())
        }
        Some((head, _)) => Outcome::Answered(format!("status: {head}")),
        None => Outcome::Closed,
    }
}

/// `n` clients at once (from 20 threads), each on its own connection.
fn storm(addr: SocketAddr, n: usize) -> Vec<Outcome> {
    let threads: Vec<_> = (0..20)
        .map(|t| {
            std::thread::spawn(move || {
                (0..n)
                    .filter(|i| i % 20 == t)
                    .map(|_| fetch(addr, "/who"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// A server of two workers whose responses name the worker thread; counts worker starts (each
/// start, restarts included, runs the `on_worker_start` hook).
fn two_workers(server: Server) -> (ServerHandle, Arc<AtomicUsize>) {
    let starts = Arc::new(AtomicUsize::new(0));
    let counter = starts.clone();
    let handle = server
        .on_worker_start(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .serve(service_fn(|req: Request| async move {
            if req.path() == "/panic" {
                panic!("a handler panics on purpose");
            }
            let me = std::thread::current().name().unwrap_or("?").to_owned();
            Response::text(me)
        }))
        .unwrap();
    (handle, starts)
}

fn config(workers: usize) -> ServerConfig {
    ServerConfig {
        workers,
        ..common::config()
    }
}

/// Waits until `starts` reaches `n` (a restart ran its hooks), or fails after 10 s.
fn wait_for_starts(starts: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while starts.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "the dead worker was not restarted: {} starts, expected {n}",
            starts.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// After a restart: every one of 200 new connections is answered, by both workers.
fn all_answered_by_both(addr: SocketAddr) {
    let outcomes = storm(addr, 200);
    let mut by = std::collections::BTreeMap::new();
    for o in &outcomes {
        match o {
            Outcome::Answered(who) => *by.entry(who.clone()).or_insert(0) += 1,
            other => panic!("after the restart a connection got {other:?} ({outcomes:?})"),
        }
    }
    assert_eq!(
        by.keys().cloned().collect::<Vec<_>>(),
        ["peregrine-w0", "peregrine-w1"],
        "both workers answer again: {by:?}"
    );
}

/// A worker thread that is gone while its listening socket is still open (the descriptor
/// outlived it): the socket is shut down (its backlog reset, not left waiting), and a new
/// worker on a new socket takes its place. Without the supervisor, about half of the clients
/// wait on the dead socket until their timeout.
#[test]
fn a_dead_workers_socket_is_closed_and_the_worker_restarted() {
    let (handle, starts) = two_workers(Server::new(config(2)));
    let addr = handle.local_addr();
    assert_eq!(storm(addr, 20).len(), 20);
    handle.inject_fault(1, Fault::LeakSocket);
    // Straight away, while the dead worker's socket still queues connections: each client is
    // answered (by the live worker) or reset, none waits until its timeout.
    let during = storm(addr, 200);
    let waited = during.iter().filter(|o| **o == Outcome::TimedOut).count();
    assert_eq!(
        waited, 0,
        "clients left waiting on a dead socket: {during:?}"
    );
    assert!(during
        .iter()
        .any(|o| matches!(o, Outcome::Answered(w) if w == "peregrine-w0")));
    wait_for_starts(&starts, 3);
    all_answered_by_both(addr);
    handle.shutdown();
}

/// A worker whose own task panics (outside any handler) is started again, on a new socket,
/// after its back-off; before, the server went on with one worker fewer for good.
#[test]
fn a_panicking_worker_is_restarted_and_serves_again() {
    let (handle, starts) = two_workers(Server::new(config(2)));
    let addr = handle.local_addr();
    handle.inject_fault(1, Fault::Panic);
    let during = storm(addr, 200);
    assert!(
        !during.contains(&Outcome::TimedOut),
        "no client waits: {during:?}"
    );
    wait_for_starts(&starts, 3);
    all_answered_by_both(addr);
    handle.shutdown();
}

/// A worker on a shared (injected) listener is restarted on another handle of it.
#[test]
fn a_worker_on_an_injected_listener_is_restarted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = Server::new(config(2)).with_listener(listener.into());
    let (handle, starts) = two_workers(server);
    let addr = handle.local_addr();
    handle.inject_fault(0, Fault::Panic);
    wait_for_starts(&starts, 3);
    all_answered_by_both(addr);
    handle.shutdown();
}

/// A panic loop (the worker dies again at every start) is not restarted forever: after five
/// restarts within a minute the server stops, `join` returns the error, and the other worker
/// served until then.
#[test]
fn a_worker_that_keeps_dying_stops_the_server_with_an_error() {
    let server = Server::new(config(2)).with_fault(1, Fault::PanicAlways);
    let (handle, starts) = two_workers(server);
    let addr = handle.local_addr();
    assert!(matches!(fetch(addr, "/who"), Outcome::Answered(_)));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(handle.join()));
    // Back-offs of 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s, then the sixth death stops the server.
    let joined = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server did not stop");
    let err = joined.expect_err("join reports the failure");
    assert!(err.to_string().contains("giving up"), "{err}");
    assert_eq!(
        starts.load(Ordering::SeqCst),
        2 + 5,
        "five restarts, then none"
    );
    // Stopped: the address refuses connections.
    assert!(TcpStream::connect(addr).is_err());
}

/// `run_until_signal` returns the error too (so a `main` returning it exits non-zero for
/// systemd or Kubernetes), without any signal.
#[test]
fn run_until_signal_returns_the_error_of_a_panic_loop() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let server = Server::new(config(1)).with_fault(0, Fault::PanicAlways);
        let run =
            server.run_until_signal(service_fn(|_req: Request| async { Response::text("hi") }));
        tx.send(run)
    });
    let ran = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("run_until_signal did not return");
    assert!(ran.unwrap_err().to_string().contains("giving up"));
}

/// A panic inside a handler is answered with 500 and kills no worker: nothing restarts, every
/// later client is answered.
#[test]
fn a_handler_panic_is_contained_and_restarts_nothing() {
    let (handle, starts) = two_workers(Server::new(config(2)));
    let addr = handle.local_addr();
    for _ in 0..20 {
        match fetch(addr, "/panic") {
            Outcome::Answered(head) => assert!(head.contains("500"), "{head}"),
            other => panic!("a handler panic got {other:?}"),
        }
    }
    // Longer than the first restart back-off: a death would have restarted a worker by now.
    std::thread::sleep(Duration::from_millis(500));
    all_answered_by_both(addr);
    assert_eq!(starts.load(Ordering::SeqCst), 2, "no worker died");
    handle.shutdown();
}
