//! Failures of the engine's own threads and of the process's resources, over real sockets:
//! a worker that dies outside a handler (injected with the hidden `fault-injection` API) never
//! leaves a socket that accepts nobody's connections; a worker that keeps dying stops the
//! server with an error; a handler's panic stays contained; running out of descriptors
//! (`EMFILE`) or the system out of open files (`ENFILE`) neither stops existing connections
//! nor spins the accept loop.
//!
//! Run with `cargo test -p peregrine-server --features fault-injection --test faults`.
#![cfg(feature = "fault-injection")]

mod common;
use peregrine_server::server::Fault;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig, ServerHandle};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
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
    ServerConfigBuilder::from(common::config())
        .workers(workers)
        .build()
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
    let before = storm(addr, 20);
    assert!(
        before.iter().all(|o| matches!(o, Outcome::Answered(_))),
        "{before:?}"
    );
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
    // Worker 0 answers meanwhile; a client that reached worker 1's socket just before it was
    // shut down is reset, none waits.
    let early: Vec<Outcome> = (0..10).map(|_| fetch(addr, "/who")).collect();
    assert!(!early.contains(&Outcome::TimedOut), "{early:?}");
    assert!(
        early.contains(&Outcome::Answered("peregrine-w0".into())),
        "{early:?}"
    );
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

/// Set in the environment of the child server process of [`emfile_storm_keeps_serving`].
const CHILD_VAR: &str = "PEREGRINE_EMFILE_CHILD";

/// The child process of [`emfile_storm_keeps_serving`] (ignored: runs only when that test
/// starts it, with `RLIMIT_NOFILE` lowered): one worker, warnings logged to stderr, the port
/// on stdout; serves until its stdin closes.
#[test]
#[ignore = "a child process of emfile_storm_keeps_serving"]
fn emfile_child_server() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let config = ServerConfigBuilder::from(common::config())
        .workers(1)
        .header_timeout(Duration::from_secs(60))
        .idle_timeout(Duration::from_secs(60))
        .build();
    let handle = Server::new(config)
        .serve(service_fn(|_req: Request| async { Response::text("ok") }))
        .unwrap();
    println!("PORT {}", handle.local_addr().port());
    std::io::stdout().flush().unwrap();
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    handle.shutdown();
}

/// One request on a kept-alive connection; the response's body (`Content-Length` framed).
fn keep_alive_get(s: &mut TcpStream) -> std::io::Result<String> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")?;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .split("content-length:")
        .nth(1)
        .and_then(|v| v.split("\r\n").next())
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no length in {head}")))?;
    let mut body = vec![0; len];
    s.read_exact(&mut body)?;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// CPU time (user + system) a process or thread has used, from its `stat` file in /proc
/// (`/proc/PID/stat`, `/proc/self/task/TID/stat`).
fn cpu_time(stat_file: &str) -> Duration {
    let stat = std::fs::read_to_string(stat_file).unwrap();
    // Fields after the command name (which may hold spaces, hence the last ')').
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let (utime, stime): (u64, u64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis((utime + stime) * 1000 / ticks)
}

/// The CPU time `stat_file`'s process or thread uses over the next two seconds, and fails when
/// it reaches 200 ms: an accept loop that spins on an error instead of backing off. `what`
/// names the error in the printed figure.
fn assert_no_spin(stat_file: &str, what: &str) {
    let before = cpu_time(stat_file);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_time(stat_file) - before;
    eprintln!("CPU over 2 s {what}: {used:?}");
    assert!(
        used < Duration::from_millis(200),
        "the accept loop spins: {used:?} of CPU in 2 s"
    );
}

/// More connections than the server has descriptors (`RLIMIT_NOFILE` 64, set by `prlimit` on
/// a child server process): accept fails with `EMFILE`; an existing connection keeps being
/// served; the accept loop backs off instead of spinning (the child uses under 10% of a CPU
/// over 2 s of exhaustion, a correctness bound, not a measurement); when the clients
/// close, the connection that waited in the backlog is served and new ones are too.
#[test]
fn emfile_storm_keeps_serving() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let log = std::env::temp_dir().join(format!("peregrine-emfile-{}.log", std::process::id()));
    let mut child = Command::new("prlimit")
        .args(["--nofile=64:64", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["emfile_child_server", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_VAR, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("prlimit (util-linux) runs the child");
    let pid = child.id();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("PORT ").map(|p| p.trim().parse().unwrap()))
        .expect("the child prints its port");
    // The rest of its output is read, so that its test harness can write its verdict.
    std::thread::spawn(move || lines.for_each(drop));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();

    let mut existing = TcpStream::connect(addr).unwrap();
    existing.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    assert_eq!(keep_alive_get(&mut existing).unwrap(), "ok");

    // The storm: 150 idle connections (the kernel completes them all into the backlog).
    let held: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let mut waiting = TcpStream::connect(addr).unwrap();
    waiting
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut first = [0u8; 1];
    let early = waiting.read(&mut first);
    assert!(
        matches!(&early, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "out of descriptors, the last client waits in the backlog: {early:?}"
    );
    assert_eq!(
        keep_alive_get(&mut existing).unwrap(),
        "ok",
        "existing connections are served"
    );

    // Measured: 40 ms with the 10 ms back-off; 550 ms when the loop only yields (on a busy
    // 2-core machine, so a spin shows as its share of a CPU, not a whole one).
    assert_no_spin(
        &format!("/proc/{pid}/stat"),
        "of the child out of descriptors",
    );
    assert_eq!(keep_alive_get(&mut existing).unwrap(), "ok");

    // Recovery: the storm leaves, descriptors free up, the waiting client is served.
    drop(held);
    waiting
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = Vec::new();
    waiting.read_to_end(&mut rest).unwrap();
    assert!(
        rest.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(fetch(addr, "/"), Outcome::Answered("ok".into()));

    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let logged = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(logged.contains("accept failed"), "EMFILE was hit: {logged}");
    assert!(logged.contains("Too many open files"), "{logged}");
}

/// The system-wide table of open files full (`ENFILE`) during a connection storm. Filling the
/// real table would starve every process on the machine (and root is exempt from its limit),
/// so the error is injected at the worker's accept call (`Fault::AcceptFails`): the worker
/// lives on and keeps serving its existing connection; its accept loop backs off (its thread
/// uses under 10% of a CPU over 2 s of failures: a correctness bound, not a measurement); the
/// storm's connections wait in the backlog unanswered, and every one is served once the
/// table has room again.
#[test]
fn enfile_storm_keeps_serving() {
    let (starts, tid) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicI32::new(0)));
    let (counter, worker_tid) = (starts.clone(), tid.clone());
    let config = ServerConfigBuilder::from(common::config())
        .workers(1)
        .header_timeout(Duration::from_secs(60))
        .idle_timeout(Duration::from_secs(60))
        .build();
    let handle = Server::new(config)
        .on_worker_start(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            // SAFETY: gettid has no preconditions; the hook runs on the worker's thread.
            worker_tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            async { Ok(()) }
        })
        .serve(service_fn(|_req: Request| async { Response::text("ok") }))
        .unwrap();
    let addr = handle.local_addr();
    let mut existing = TcpStream::connect(addr).unwrap();
    existing.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    assert_eq!(keep_alive_get(&mut existing).unwrap(), "ok");

    handle.inject_fault(0, Fault::AcceptFails(libc::ENFILE));
    // The storm: 100 clients, each with its request sent (the kernel completes them all into
    // the backlog).
    let mut storm: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    let stat_file = format!("/proc/self/task/{}/stat", tid.load(Ordering::SeqCst));
    assert_no_spin(&stat_file, "of the worker thread under ENFILE");
    assert_eq!(
        keep_alive_get(&mut existing).unwrap(),
        "ok",
        "existing connections are served while accept fails"
    );
    for s in &mut storm {
        s.set_nonblocking(true).unwrap();
        let early = s.read(&mut [0u8; 1]);
        assert!(
            matches!(&early, Err(e) if e.kind() == ErrorKind::WouldBlock),
            "no descriptor, no accept: the storm waits in the backlog: {early:?}"
        );
    }

    // Recovery: every client of the storm is served, then new ones too, by the same worker.
    handle.inject_fault(0, Fault::AcceptRecovers);
    for s in &mut storm {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap();
        assert!(
            answer.starts_with(b"HTTP/1.1 200") && answer.ends_with(b"ok"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    assert_eq!(fetch(addr, "/"), Outcome::Answered("ok".into()));
    assert_eq!(starts.load(Ordering::SeqCst), 1, "the worker never died");
    handle.shutdown();
}
