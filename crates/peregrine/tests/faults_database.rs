//! The scenarios app's database routes (examples/scenarios-db/db.rs) while a real PostgreSQL is
//! stopped and started again under load: requests fail fast with `503` + `Retry-After` while it
//! is down (none waits anywhere near the request timeout, none gets a `500`), and every worker's
//! pool serves again within seconds of the database's return.
//!
//! PostgreSQL is Debian's (`scripts/setup` installs it), a private cluster in a temporary
//! directory on a free loopback port, run as the `postgres` user when the test runs as root
//! (PostgreSQL refuses root), as the lab's `database.py` does.

#[allow(dead_code)]
#[path = "../examples/scenarios-db/db.rs"]
mod db;

mod common;

use common::TestServer;
use peregrine::App;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A private PostgreSQL cluster, stopped (immediately) when dropped.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

/// The newest `/usr/lib/postgresql/N/bin` (Debian's layout), else the folder of `postgres` on
/// `PATH`.
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return bin;
    }
    let out = Command::new("sh")
        .args(["-c", "command -v postgres"])
        .output()
        .unwrap();
    let path = String::from_utf8(out.stdout).unwrap();
    assert!(
        !path.trim().is_empty(),
        "PostgreSQL is not installed (scripts/setup installs it)"
    );
    Path::new(path.trim()).parent().unwrap().to_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl Postgres {
    fn new() -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            run(Command::new("chown").arg("postgres:postgres").arg(&data));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Postgres {
            bin: bin_dir(),
            data,
            port,
            _dir: dir,
        };
        let data = pg.data.to_str().unwrap().to_owned();
        run(&mut pg.tool(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        ));
        // Loopback TCP only, no commit waits: a throwaway cluster.
        let conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n\
             fsync = off\nsynchronous_commit = off\n"
        );
        let path = pg.data.join("postgresql.conf");
        let mut all = std::fs::read_to_string(&path).unwrap();
        all.push_str(&conf);
        std::fs::write(&path, all).unwrap();
        pg.start();
        pg
    }

    /// A PostgreSQL tool, run as `postgres` when we are root.
    fn tool(&self, name: &str, args: &[&str]) -> Command {
        let exe = self.bin.join(name);
        let mut c = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        c.args(args);
        c
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data.to_str().unwrap();
        let log = self.data.join("server.log");
        let mut all = vec!["-D", data, "-l", log.to_str().unwrap(), "-w"];
        all.extend_from_slice(args);
        run(&mut self.tool("pg_ctl", &all));
    }

    fn start(&self) {
        self.pg_ctl(&["start"]);
    }

    /// Stops it the way a restart does: clients are disconnected, transactions rolled back.
    fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap().to_owned();
        let _ = self
            .tool("pg_ctl", &["-D", &data, "-m", "immediate", "stop"])
            .output();
    }
}

fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// TechEmpower's two tables (the rows the routes read), through the driver the app uses.
fn load_schema(url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let conn = tokio::spawn(conn);
        client
            .batch_execute(
                "CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL);
                 INSERT INTO world SELECT x, x FROM generate_series(1, 10000) AS x;
                 CREATE TABLE fortune (id integer PRIMARY KEY, message varchar(2048) NOT NULL);
                 INSERT INTO fortune VALUES (1, 'fortune: No such file or directory');",
            )
            .await
            .unwrap();
        drop(client);
        let _ = conn.await;
    });
}

/// One answered request: when it started (since the test's start), its status, how long it
/// took, and its `Retry-After`.
#[derive(Debug, Clone)]
struct Sample {
    at: Duration,
    status: u16,
    took: Duration,
    retry_after: Option<String>,
}

#[test]
fn a_database_restart_gives_fast_503s_and_the_pools_recover() {
    // Two workers of two connections each: every pool must come back, not just one.
    restart_under_load(|url| db::routes_with(App::new(), url, 2));
}

/// The same with one pool of four connections shared by both workers (`DB_POOL_SHARED=1`).
#[test]
fn a_shared_pool_gives_fast_503s_and_recovers() {
    restart_under_load(|url| db::routes_shared(App::new(), url, 2, 2));
}

/// Stops and restarts PostgreSQL under four clients of the app `routes` builds on its URL.
fn restart_under_load(routes: impl FnOnce(String) -> App) {
    let pg = Postgres::new();
    load_schema(&pg.url());
    let app = routes(pg.url());
    let server = TestServer::start_with(app, |c| c.server.workers = 2);
    let addr = server.addr;

    let t0 = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let (samples, stop) = (samples.clone(), stop.clone());
            std::thread::spawn(move || {
                let s = TestServer::attach(addr);
                let paths = ["/db", "/queries?q=5", "/fortunes", "/updates?q=2"];
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let start = Instant::now();
                    let res = s.get(paths[n % paths.len()], &[]);
                    samples.lock().unwrap().push(Sample {
                        at: start - t0,
                        status: res.status,
                        took: start.elapsed(),
                        retry_after: res.header("retry-after").map(str::to_owned),
                    });
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(300));
    let down_at = t0.elapsed();
    pg.stop();
    let stopped_at = t0.elapsed();
    std::thread::sleep(Duration::from_millis(1500));
    let restart_at = t0.elapsed();
    pg.start();
    let up_at = t0.elapsed();
    // Serve on until every request has been answered 200 for half a second (or 10 s pass).
    let deadline = Instant::now() + Duration::from_secs(10);
    let recovered = loop {
        std::thread::sleep(Duration::from_millis(100));
        let all = samples.lock().unwrap().clone();
        let last_bad = all.iter().filter(|s| s.status != 200).map(|s| s.at).max();
        let good_since = last_bad.unwrap_or(Duration::ZERO).max(up_at);
        if t0.elapsed() > good_since + Duration::from_millis(500) {
            break Some(good_since - up_at);
        }
        if Instant::now() > deadline {
            break None;
        }
    };
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let all = samples.lock().unwrap().clone();

    // Requests in flight across a stop or a start may get either answer.
    let before: Vec<_> = all.iter().filter(|s| s.at + s.took < down_at).collect();
    assert!(
        !before.is_empty() && before.iter().all(|s| s.status == 200),
        "served before the stop: {before:?}"
    );
    let others: Vec<_> = all
        .iter()
        .filter(|s| !matches!(s.status, 200 | 503))
        .collect();
    assert!(others.is_empty(), "only 200 or 503, never: {others:?}");
    let down: Vec<_> = all
        .iter()
        .filter(|s| s.at > stopped_at && s.at + s.took < restart_at)
        .collect();
    let refused = down.iter().filter(|s| s.status == 503).count();
    assert!(
        refused > 0 && down.iter().all(|s| s.status == 503),
        "every request while the database is down is a 503 ({refused} of {})",
        down.len()
    );
    assert!(
        all.iter()
            .filter(|s| s.status == 503)
            .all(|s| s.retry_after.as_deref() == Some("1")),
        "every 503 says when to retry"
    );
    let slowest = down.iter().map(|s| s.took).max().unwrap();
    assert!(
        slowest < Duration::from_secs(1),
        "while down, requests fail fast: the slowest took {slowest:?}"
    );
    let recovery = recovered.unwrap_or_else(|| {
        let after: Vec<_> = all.iter().filter(|s| s.at > up_at).collect();
        panic!(
            "the pools never recovered: {:?}",
            &after[after.len().saturating_sub(8)..]
        )
    });
    assert!(
        recovery < Duration::from_secs(3),
        "recovered {recovery:?} after the database was back"
    );
    eprintln!(
        "database restart: {} requests, {refused} 503s while down ({} ms), slowest while down \
         {} ms, recovered {} ms after the database was back",
        all.len(),
        (restart_at - stopped_at).as_millis(),
        slowest.as_millis(),
        recovery.as_millis()
    );
}
