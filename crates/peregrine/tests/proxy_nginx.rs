//! Behind a real nginx configured the usual way (`X-Forwarded-For $proxy_add_x_forwarded_for`,
//! `X-Real-IP $remote_addr`, `X-Forwarded-Proto $scheme`, a client's `Forwarded` passed through
//! untouched): the headers a client writes itself do not change who the application thinks
//! the client is, nor the scheme, nor let it past a per-client rate limit.
//!
//! nginx is a child process of the test, with its configuration, pid and logs in a temporary
//! directory. It connects to the application from 127.0.0.2 (`proxy_bind`), the only trusted
//! proxy, so the real client (127.0.0.1) and the proxy have different addresses. Not skipped
//! when nginx is missing: `scripts/setup` installs it, and the test says so.

mod common;
use common::TestServer;
use peregrine::middleware::RateLimit;
use peregrine::proxy::{client_info, ForwardedHeader, ProtoHeader, Scheme, TrustedProxies};
use peregrine::{get, App, Request};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The address nginx connects to the application from; the only one the application trusts.
const PROXY_SOURCE: &str = "127.0.0.2";

/// A running nginx, killed (and its directory removed) on drop.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx on a free 127.0.0.1 port, proxying everything to `upstream`. The port is
    /// found by binding and releasing it, so another test running beside this one can take it
    /// first (its server, its nginx); then nginx fails to bind and exits, and something else
    /// answers on the port: tried again on a new port until the port's listening socket is
    /// nginx's own.
    fn start(upstream: SocketAddr) -> Nginx {
        for _ in 0..5 {
            if let Some(nginx) = Nginx::try_start(upstream) {
                return nginx;
            }
        }
        panic!("nginx did not get a port of its own in 5 tries");
    }

    /// One try of [`Nginx::start`]: `None` when the port turned out to be another's.
    fn try_start(upstream: SocketAddr) -> Option<Nginx> {
        let bin = nginx_binary();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        // A free port: bound, read, released for nginx (retried below if another took it).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = format!(
            "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_bind {PROXY_SOURCE};
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}
}}
"
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(&bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut nginx = Nginx { child, addr, dir };
        nginx.wait_listening().then_some(nginx)
    }

    /// Waits until the port listens; true when the listening socket is this nginx's, false
    /// when nginx exited (it could not bind) or another process listens there.
    fn wait_listening(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if TcpStream::connect(self.addr).is_ok() {
                return owns_listener(self.child.id(), self.addr.port());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(self.dir.path().join("error.log"));
        panic!("nginx did not listen on {} within 10 s: {log:?}", self.addr);
    }
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port` (`/proc/net/tcp`'s
/// listening entry, state 0A, whose inode is one of the process's descriptors).
fn owns_listener(pid: u32, port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let inode = table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A")).then(|| f[9].to_owned())
    });
    let Some(inode) = inode else {
        return false;
    };
    let target = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.to_string_lossy() == target))
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx from PATH or Debian's /usr/sbin; missing is a failure with the fix, never a skip.
fn nginx_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nginx"))
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| {
        panic!("nginx not found (PATH, /usr/sbin): this test needs a real nginx; run scripts/setup (Debian package nginx-light)")
    })
}

/// The trust matching the nginx configuration above, reading the address from `ip`.
fn trust(ip: ForwardedHeader) -> TrustedProxies {
    TrustedProxies::new([PROXY_SOURCE])
        .unwrap()
        .client_ip_from(ip)
        .proto_from(ProtoHeader::XForwardedProto)
}

/// Answers `client scheme peer`.
fn whoami(req: Request) -> std::future::Ready<String> {
    let info = client_info(&req);
    let scheme = match info.scheme {
        Some(Scheme::Https) => "https",
        Some(Scheme::Http) => "http",
        None => "-",
    };
    std::future::ready(format!(
        "{} {scheme} {}",
        req.client_addr(),
        req.peer_addr().ip()
    ))
}

/// Spoofing attempts a client can make on its own.
const SPOOFS: [&[&str]; 5] = [
    &["Forwarded: for=6.6.6.6"],
    &[
        "Forwarded: for=6.6.6.6;proto=https",
        "X-Forwarded-Proto: https",
    ],
    &["X-Forwarded-For: 6.6.6.6"],
    &["X-Real-IP: 6.6.6.6", "X-Forwarded-For: 6.6.6.6, 127.0.0.2"],
    &["X-Forwarded-Proto: https"],
];

#[test]
fn spoofed_forwarding_headers_through_nginx_do_not_change_the_client() {
    for header in [ForwardedHeader::XForwardedFor, ForwardedHeader::XRealIp] {
        let app = App::new().route("/", get(whoami)).with_state(trust(header));
        let server = TestServer::start(app);
        let nginx = Nginx::start(server.addr);
        let client = TestServer::attach(nginx.addr);
        // The proxy connects from its own address; the real client is 127.0.0.1, over http.
        let r = client.get("/", &[]);
        assert_eq!(r.status, 200, "{header:?}: {}", r.text());
        assert_eq!(r.text(), "127.0.0.1 http 127.0.0.2", "{header:?}");
        for spoof in SPOOFS {
            let r = client.get("/", spoof);
            assert_eq!(r.text(), "127.0.0.1 http 127.0.0.2", "{header:?} {spoof:?}");
        }
    }
}

#[test]
fn a_rate_limit_keyed_on_the_client_is_not_bypassed_through_nginx() {
    let app = App::new()
        .route("/", get(whoami))
        .hook(RateLimit::every(Duration::from_secs(60)).burst(5))
        .with_state(trust(ForwardedHeader::XForwardedFor));
    let server = TestServer::start(app);
    let nginx = Nginx::start(server.addr);
    let client = TestServer::attach(nginx.addr);
    let mut passed = 0;
    for i in 0..30 {
        // A new invented address on every request, in each header a client can write.
        let fake = format!("6.6.{}.{}", i / 256, i % 256);
        let forwarded = format!("Forwarded: for={fake}");
        let xff = format!("X-Forwarded-For: {fake}");
        let real_ip = format!("X-Real-IP: {fake}");
        let r = client.get("/", &[&forwarded, &xff, &real_ip]);
        match r.status {
            200 => passed += 1,
            429 => {}
            other => panic!("unexpected {other}: {}", r.text()),
        }
    }
    assert_eq!(passed, 5, "the burst, then 429 for the same client");
}
