//! Static files cannot be used to exhaust memory: clients that send a GET for a large file
//! (or several large ranges of it) and then stop reading make the server hold at most a
//! bounded piece each, not the file. Real sockets; the server runs in this process, so its
//! memory is this process's `VmRSS`.
#![cfg(target_os = "linux")]

mod common;
use common::TestServer;
use peregrine::fs::ServeDir;
use peregrine::App;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Duration;

/// Slow clients per test.
const CLIENTS: usize = 100;
/// Requests each slow client sends at once.
const PIPELINED: usize = 4;
/// Most the server's resident memory may grow while they hold their answers.
const BUDGET: u64 = 32 * 1024 * 1024;

/// RSS is process-wide: the tests of this file run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn site(len: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), data).unwrap();
    dir
}

/// Sends `request`, reads up to the end of the response head (a few hundred bytes), and
/// returns the connection unread from there: the server has answered and holds the rest.
/// The client's receive buffer is small (set before connecting, so the window it advertises
/// is small too), as an attacker's would be: the kernel then takes little of the answer off
/// the server's hands.
fn slow_client(s: &TestServer, request: &str) -> (TcpStream, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let c = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(s.addr).await.unwrap()
    });
    let mut c = c.into_std().unwrap();
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The same GET four times, pipelined: the kernel's send buffer (up to `tcp_wmem`'s 4 MiB
    // on Linux) takes a whole 2 MiB answer off the server's hands, so a client that wants the
    // server to hold a copy asks for more than fits there.
    c.write_all(request.repeat(PIPELINED).as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 256];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "closed before the head");
        head.extend_from_slice(&b[..n]);
    }
    (c, String::from_utf8_lossy(&head).into_owned())
}

/// Growth of this process's RSS while `CLIENTS` connections hold answers to `request` (sent
/// `PIPELINED` times) that they do not read.
fn growth_with_slow_clients(s: &TestServer, request: &str, expect_status: &str) -> u64 {
    // Warm up: one full answer, so buffers and the blocking pool exist before the baseline.
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(request.replace("keep-alive", "close").as_bytes())
        .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    assert!(all.starts_with(expect_status.as_bytes()));
    std::thread::sleep(Duration::from_millis(200));
    let before = rss();
    let held: Vec<_> = (0..CLIENTS).map(|_| slow_client(s, request)).collect();
    for (_, head) in &held {
        assert!(head.starts_with(expect_status), "{head}");
    }
    // Let the server fill the socket buffers and settle.
    std::thread::sleep(Duration::from_millis(500));
    let grown = rss().saturating_sub(before);
    drop(held);
    grown
}

fn check(file_len: usize, request: &str, expect_status: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = site(file_len);
    let s = TestServer::start(App::new().merge(ServeDir::new(dir.path()).router("/static")));
    let grown = growth_with_slow_clients(&s, request, expect_status);
    eprintln!(
        "{CLIENTS} slow clients, {} KiB file: RSS +{} KiB",
        file_len / 1024,
        grown / 1024
    );
    assert!(
        grown <= BUDGET,
        "RSS grew by {} MiB with {CLIENTS} slow clients of a {} MiB file",
        grown / (1024 * 1024),
        file_len / (1024 * 1024)
    );
}

const GET: &str = "GET /static/big.bin HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n";

/// 100 slow readers of an 8 MiB file: the old code read the file whole for each (about 800 MiB
/// held); now it is sent from the file and the server holds no copy.
#[test]
fn slow_readers_of_an_8_mib_file_do_not_grow_memory() {
    check(8 * 1024 * 1024, GET, "HTTP/1.1 200");
}

/// The same with a 2 MiB file, which the old code also read whole: with four pipelined
/// requests, at least one answer per client waits in memory (about 200 MiB).
#[test]
fn slow_readers_of_a_2_mib_file_do_not_grow_memory() {
    check(2 * 1024 * 1024, GET, "HTTP/1.1 200");
}

/// Two ranges covering an 8 MiB file (a `multipart/byteranges` answer): the old code built the
/// whole multipart body in memory; now the parts stream in 64 KiB pieces.
#[test]
fn slow_readers_of_a_large_multi_range_do_not_grow_memory() {
    let req = "GET /static/big.bin HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\
               Range: bytes=0-4194303, 4194305-\r\n\r\n";
    check(8 * 1024 * 1024, req, "HTTP/1.1 206");
}
