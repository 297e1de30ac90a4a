//! The transport seam through sockets: serving a Unix domain socket, serving listeners the
//! application bound itself, and a restart that hands the listening socket to a second process
//! without losing a connection attempt.

mod common;

use common::{config, get, service, Calls, Client, CLIENT_WAIT};
use peregrine_server::config::ListenAddr;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Listener, Request, Response, Server, ServerConfig};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh directory for this test's socket files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("peregrine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Sends `request` on a new Unix-socket connection and reads until the server closes it.
fn unix_exchange(path: &Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(path).expect("connect to the Unix socket");
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the answer");
    String::from_utf8(out).unwrap()
}

/// The body of a single response with Content-Length, checked to be a 200.
fn ok_body(answer: &str) -> &str {
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a complete head");
    body
}

#[test]
fn serves_a_unix_domain_socket() {
    let dir = temp_dir("unix");
    let path = dir.join("server.sock");
    let cfg = ServerConfigBuilder::from(config())
        .unix(Some(path.clone()))
        .workers(2)
        .build();
    let calls = Calls::default();
    let handle = Server::new(cfg).serve(service(calls.clone())).unwrap();
    assert_eq!(handle.listen_addr(), &ListenAddr::Unix(path.clone()));

    // Keep-alive and pipelining work as over TCP: two requests, two answers, in order.
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let second = out
        .find("HTTP/1.1 200 OK\r\n")
        .and_then(|i| out[i + 1..].find("HTTP/1.1 200 OK\r\n").map(|j| i + 1 + j));
    let second = second.expect("two responses");
    assert!(ok_body(&out[..second]).starts_with("Hello, World!"));
    assert_eq!(ok_body(&out[second..]), "hello");
    assert!(out[second..].contains("Connection: close\r\n"));

    // A request the codec refuses is answered with its status over a Unix socket too.
    let bad = unix_exchange(&path, b"GET / HTTP/1.1\r\nHost : a\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad:?}");
    assert_eq!(calls.get(), 2);

    handle.shutdown();
    // The server removes the socket file it created.
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serves_an_injected_tcp_listener() {
    // Bound by the application, not by the engine (no SO_REUSEPORT): every worker accepts from
    // a handle on the same socket.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Calls::default();
    let handle = Server::new(ServerConfigBuilder::from(config()).workers(2).build())
        .with_listener(Listener::from(listener))
        .serve(service(calls.clone()))
        .unwrap();
    assert_eq!(handle.local_addr(), addr);
    for _ in 0..8 {
        let mut c = Client::new(addr);
        c.send(&get("/plaintext"));
        assert_eq!(c.read_response().body_str(), "Hello, World!");
    }
    assert_eq!(calls.get(), 8);
    handle.shutdown();
}

#[test]
fn serves_an_injected_unix_listener() {
    let dir = temp_dir("unix-injected");
    let path = dir.join("app.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let handle = Server::new(config())
        .with_listener(Listener::from(listener))
        .serve(service(Calls::default()))
        .unwrap();
    let answer = unix_exchange(
        &path,
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(ok_body(&answer), "Hello, World!");
    handle.shutdown();
    // The application bound it, so the application's file stays.
    assert!(path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Set in the environment of the child processes of
/// [`restart_hands_the_listener_over_without_losing_a_connection`].
const CHILD_VAR: &str = "PEREGRINE_RESTART_CHILD";

/// Not a test of its own: the server process the restart test starts (twice) from this test
/// binary. It serves the listener it inherits as descriptor 3 (`LISTEN_FDS`), answers
/// `GET /pid` with its process id, and stops gracefully on SIGTERM.
#[test]
#[ignore = "run as a child process by restart_hands_the_listener_over_without_losing_a_connection"]
fn restart_child_server() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let listeners = Listener::from_systemd_env()
        .expect("read LISTEN_FDS")
        .expect("a listener from the parent");
    let pid = std::process::id().to_string();
    let cfg = ServerConfig::builder()
        .workers(2)
        .shutdown_timeout(Duration::from_secs(5))
        .build();
    let mut server = Server::new(cfg);
    for l in listeners {
        server = server.with_listener(l);
    }
    server
        .run_until_signal(service_fn(move |_req: Request| {
            let pid = pid.clone();
            async move { Response::text(pid) }
        }))
        .expect("serve");
}

/// A child server process, killed when the test ends however it ends (no server is left
/// running after a failed assertion).
struct ChildServer(Child);

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts [`restart_child_server`] with the listener at descriptor `fd` passed as descriptor
/// 3, the way systemd socket activation (or a restarting server) passes it.
fn spawn_child(fd: i32) -> ChildServer {
    let exe = std::env::current_exe().unwrap();
    // The shell puts the socket at descriptor 3 and exports its own pid, which `exec` keeps.
    // (bash: dash refuses descriptors above 9.)
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3<&{fd}; LISTEN_FDS=1 LISTEN_PID=$$ exec \"$0\" \"$@\""
        ))
        .arg(exe)
        .args([
            "--exact",
            "restart_child_server",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, "1")
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .map(ChildServer)
        .expect("spawn the child server")
}

/// One request on a new connection: the pid that answered, or `None` if the attempt failed in
/// any way (refused, reset, closed early, not a 200).
fn attempt(addr: std::net::SocketAddr) -> Option<u32> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(CLIENT_WAIT)).ok()?;
    s.write_all(b"GET /pid HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    if !out.starts_with("HTTP/1.1 200 OK\r\n") {
        return None;
    }
    out.split_once("\r\n\r\n")?.1.parse().ok()
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM");
}

/// Waits for `child` to exit (at most a generous guard, never a timing assertion).
fn wait_exit(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "child {} did not exit",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn restart_hands_the_listener_over_without_losing_a_connection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fd = {
        use std::os::fd::AsRawFd;
        socket2::SockRef::from(&listener)
            .set_cloexec(false)
            .unwrap();
        listener.as_raw_fd()
    };

    // The old server, and a client that keeps connecting throughout the restart.
    let mut old = spawn_child(fd);
    let old_pid = old.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while attempt(addr) != Some(old_pid) {
        assert!(old.0.try_wait().unwrap().is_none(), "the old server exited");
        assert!(Instant::now() < deadline, "the old server never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(Vec::<Option<u32>>::new()));
    let client = {
        let (stop, answers) = (stop.clone(), answers.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let a = attempt(addr);
                answers.lock().unwrap().push(a);
            }
        })
    };

    // The new server takes the same listening socket; once it answers, the old one stops.
    let mut new = spawn_child(fd);
    let new_pid = new.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !answers.lock().unwrap().contains(&Some(new_pid)) {
        assert!(new.0.try_wait().unwrap().is_none(), "the new server exited");
        assert!(Instant::now() < deadline, "the new server never answered");
        std::thread::sleep(Duration::from_millis(10));
    }
    sigterm(&old.0);
    wait_exit(&mut old.0);
    // Connections made after the old server left are the new one's.
    let after = answers.lock().unwrap().len();
    while answers.lock().unwrap().len() < after + 50 {
        assert!(new.0.try_wait().unwrap().is_none(), "the new server exited");
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    client.join().unwrap();
    sigterm(&new.0);
    wait_exit(&mut new.0);

    let answers = answers.lock().unwrap();
    let failed = answers.iter().filter(|a| a.is_none()).count();
    assert_eq!(failed, 0, "{failed} of {} attempts failed", answers.len());
    assert!(answers.contains(&Some(old_pid)));
    assert!(answers[after..].iter().all(|a| *a == Some(new_pid)));
    drop(listener);
}

/// A transport of the test's own around a TCP socket: it counts what it reads and writes, the
/// way a TLS transport would decrypt and encrypt around one.
struct Counting {
    inner: tokio::net::TcpStream,
    read: Arc<std::sync::atomic::AtomicUsize>,
}

impl peregrine_server::Transport for Counting {
    fn poll_read_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.inner.poll_read_ready(cx)
    }
    fn poll_write_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.inner.poll_write_ready(cx)
    }
    fn try_read_buf(&self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        let n = self.inner.try_read_buf(buf)?;
        self.read.fetch_add(n, Ordering::SeqCst);
        Ok(n)
    }
    fn try_write(&self, data: &[u8]) -> std::io::Result<usize> {
        self.inner.try_write(data)
    }
    fn clear_read_ready(&self) {}
    fn shutdown_write(&self) -> std::io::Result<()> {
        socket2::SockRef::from(&self.inner).shutdown(std::net::Shutdown::Write)
    }
}

/// An acceptor that wraps every TCP connection in [`Counting`], after an asynchronous
/// "handshake" (a yield), as a TLS acceptor would.
#[derive(Clone)]
struct CountingAcceptor {
    read: Arc<std::sync::atomic::AtomicUsize>,
}

impl peregrine_server::Acceptor for CountingAcceptor {
    fn accept(&self, conn: peregrine_server::Accepted) -> peregrine_server::Accept {
        let read = self.read.clone();
        peregrine_server::Accept::Handshake(Box::pin(async move {
            tokio::task::yield_now().await;
            match conn.stream {
                peregrine_server::Stream::Tcp(inner) => {
                    Ok(peregrine_server::Stream::Other(Box::new(Counting {
                        inner,
                        read,
                    })))
                }
                _ => Err(std::io::Error::other("not TCP")),
            }
        }))
    }
}

#[test]
fn an_acceptor_serves_its_own_transport() {
    let read = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let calls = Calls::default();
    let handle = Server::new(config())
        .with_acceptor(CountingAcceptor { read: read.clone() })
        .serve(service(calls.clone()))
        .unwrap();
    let addr = handle.local_addr();
    let mut c = Client::new(addr);
    let request = get("/plaintext");
    c.send(&request);
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().body_str(), "abc");
    handle.shutdown();
    assert_eq!(calls.get(), 2);
    // Every byte the client sent went through the transport.
    let sent =
        request.len() + b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc".len();
    assert_eq!(read.load(Ordering::SeqCst), sent);
}
