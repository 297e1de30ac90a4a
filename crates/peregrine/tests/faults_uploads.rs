//! Uploads under faults, over real sockets: a disk that fills up during a multipart `save_in` /
//! `save_to` (a 64 KiB `tmpfs`), and clients that vanish at any byte of the body, with
//! `Content-Length` and chunked over HTTP/1.1 and with and without `content-length` over HTTP/2.
//! What must hold: a full disk is a `507` problem document, no partial file stays behind, the
//! server keeps serving; a handler sees the whole body or an error, never a short body as if
//! it were complete.

mod common;
mod faults_support;

use common::TestServer;
use faults_support::{files_in, SmallDisk};
use peregrine::{post, App, Error, MultipartLimits, Request, State};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// How long a test waits for the handler's outcome of a cut request.
const WAIT: Duration = Duration::from_secs(10);

/// What a handler saw of its body.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    /// The whole body (or the whole part, saved): its length.
    Whole(u64),
    /// An error with this status.
    Failed(u16),
    /// The handler was dropped before it finished (the request was abandoned).
    Dropped,
    /// The handler started (sent first, before one of the above).
    Started,
}

/// Where uploads go, and where handlers report what they saw.
struct Uploads {
    dir: PathBuf,
    seen: Mutex<mpsc::Sender<(u64, Seen)>>,
}

/// Sends `Dropped` for the request unless the handler reported before it was dropped.
struct Report<'a> {
    to: &'a Uploads,
    id: u64,
    sent: bool,
}

impl Report<'_> {
    fn send(&mut self, seen: Seen) {
        self.sent = true;
        let _ = self.to.seen.lock().unwrap().send((self.id, seen));
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.send(Seen::Dropped);
        }
    }
}

fn id_of(req: &Request) -> u64 {
    req.query_string()
        .and_then(|q| q.strip_prefix("id="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

const LIMITS: MultipartLimits = MultipartLimits {
    total: 1 << 20,
    per_part: 1 << 20,
};

/// `POST /save_in?id=N`: the first part saved under its own name in the upload directory;
/// `POST /save_to?id=N`: saved as `to-N.bin`; `POST /raw?id=N`: the whole body read.
async fn upload(mut req: Request, State(up): State<Uploads>) -> Result<String, Error> {
    let _ = up.seen.lock().unwrap().send((id_of(&req), Seen::Started));
    let mut report = Report {
        to: &up,
        id: id_of(&req),
        sent: false,
    };
    let path = req.path().to_owned();
    let result = match path.as_str() {
        "/raw" => req.bytes().await.map(|b| b.len() as u64),
        path => {
            async {
                let mut form = req.multipart_with(LIMITS)?;
                let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
                if path == "/save_in" {
                    field.save_in(&up.dir).await
                } else {
                    field
                        .save_to(up.dir.join(format!("to-{}.bin", report.id)))
                        .await
                }
            }
            .await
        }
    };
    report.send(match &result {
        Ok(n) => Seen::Whole(*n),
        Err(e) => Seen::Failed(e.status()),
    });
    result.map(|n| n.to_string())
}

fn server(dir: &Path) -> (TestServer, mpsc::Receiver<(u64, Seen)>) {
    let (tx, rx) = mpsc::channel();
    let app = App::new()
        .with_state(Uploads {
            dir: dir.to_owned(),
            seen: Mutex::new(tx),
        })
        .route("/save_in", post(upload))
        .route("/save_to", post(upload))
        .route("/raw", post(upload));
    (TestServer::start(app), rx)
}

/// A multipart body of one file part (`data`, named `name`).
fn form(name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = format!(
        "--XX\r\ncontent-disposition: form-data; name=\"f\"; filename=\"{name}\"\r\n\
         content-type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    b.extend_from_slice(data);
    b.extend_from_slice(b"\r\n--XX--\r\n");
    b
}

/// The request head for `path` with `body` (`Content-Length` or chunked), the body as sent,
/// and where in that wire the first `n` body bytes end, for every `n` (`ends[n]`).
fn http1(path: &str, body: &[u8], chunked: bool) -> (Vec<u8>, Vec<u8>, Vec<usize>) {
    let framing = if chunked {
        "transfer-encoding: chunked".to_owned()
    } else {
        format!("content-length: {}", body.len())
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: multipart/form-data; boundary=XX\r\n\
         {framing}\r\n\r\n"
    );
    if !chunked {
        return (head.into_bytes(), body.to_vec(), (0..=body.len()).collect());
    }
    let (mut wire, mut ends) = (Vec::new(), vec![0]);
    for c in body.chunks(1000) {
        wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        for &b in c {
            wire.push(b);
            ends.push(wire.len());
        }
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    (head.into_bytes(), wire, ends)
}

/// Where the part of [`form`] ends in its body: after the data and the delimiter that
/// follows it (`\r\n--XX`); a parser may hand over the whole part from there on.
fn part_end(body: &[u8]) -> usize {
    body.len() - b"--\r\n".len()
}

/// A request body as sent: `cut` of its `len` bytes; `complete` if its end arrived too (the
/// last byte of a `Content-Length` body, the last chunk, `END_STREAM`).
struct Sent<'a> {
    route: &'a str,
    cut: usize,
    len: usize,
    complete: bool,
}

/// Checks what a handler saw of a body sent as `sent` (the part ends at `end`) and what it
/// left in `dir`.
fn verdict(sent: &Sent<'_>, end: usize, seen: Seen, dir: &Path, data: &[u8]) -> Result<(), String> {
    let Sent {
        route,
        cut,
        len,
        complete,
    } = *sent;
    let whole = if route == "/raw" { len } else { data.len() } as u64;
    let ok = match seen {
        _ if complete => seen == Seen::Whole(whole),
        Seen::Failed(_) | Seen::Dropped => true,
        // The part's own end arrived: it is whole even if the rest of the body is not.
        Seen::Whole(n) => route != "/raw" && cut >= end && n == whole,
        Seen::Started => false,
    };
    let mut wrong = Vec::new();
    if !ok {
        wrong.push(format!("the handler saw {seen:?}"));
    }
    for f in files_in(dir) {
        let saved = std::fs::read(dir.join(&f)).unwrap();
        if saved != data || !matches!(seen, Seen::Whole(_)) {
            wrong.push(format!("{f} left behind ({} bytes)", saved.len()));
        }
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(format!("{route} cut at {cut}/{len}: {}", wrong.join(", "))),
    }
}

/// Waits for the handler's report on request `id`.
fn seen(rx: &mpsc::Receiver<(u64, Seen)>, id: u64) -> Seen {
    loop {
        let (got, seen) = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("request {id}: the handler never reported"));
        if got == id && seen != Seen::Started {
            return seen;
        }
    }
}

#[test]
fn a_full_disk_is_507_without_a_partial_file_and_the_server_keeps_serving() {
    let Some(disk) = SmallDisk::mount(
        "a_full_disk_is_507_without_a_partial_file_and_the_server_keeps_serving",
        64 * 1024,
    ) else {
        return;
    };
    let (s, rx) = server(disk.path());
    let big = vec![b'x'; 256 * 1024];
    for (id, path) in [(1u64, "/save_in"), (2, "/save_to")] {
        let (head, body, _) = http1(&format!("{path}?id={id}"), &form("big.bin", &big), false);
        let res = s.send_bytes(&[head, body].concat(), false);
        let problem = res.assert_problem(507, "Insufficient Storage");
        assert_eq!(problem["status"], 507);
        assert_eq!(seen(&rx, id), Seen::Failed(507), "{path}");
        assert_eq!(
            disk.files(),
            Vec::<String>::new(),
            "{path}: the partial file is removed"
        );
    }
    // The space came back with the partial files: the next upload is served whole.
    let (head, body, _) = http1("/save_in?id=3", &form("small.bin", b"hello"), false);
    let res = s.send_bytes(&[head, body].concat(), false);
    assert_eq!((res.status, res.text()), (200, "5"));
    assert_eq!(std::fs::read(disk.join("small.bin")).unwrap(), b"hello");
}

/// One HTTP/1.1 request whose body stops after `cut` of its bytes (all of the wire when `cut`
/// is past the body's length), then the client goes away. Returns what the handler saw and
/// whether the body was complete.
fn cut_http1(
    s: &TestServer,
    rx: &mpsc::Receiver<(u64, Seen)>,
    id: u64,
    (route, chunked): (&str, bool),
    cut: usize,
    body: &[u8],
) -> (Seen, bool) {
    let (head, wire, ends) = http1(&format!("{route}?id={id}"), body, chunked);
    let end = ends.get(cut).copied().unwrap_or(wire.len());
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(&head).unwrap();
    c.write_all(&wire[..end]).unwrap();
    let complete = end == wire.len();
    if !complete {
        let _ = c.shutdown(Shutdown::Both);
        drop(c);
    }
    (seen(rx, id), complete)
}

#[test]
fn a_client_that_vanishes_at_any_byte_leaves_no_file_and_no_short_body() {
    let dir = tempfile::tempdir().unwrap();
    let (s, rx) = server(dir.path());
    let data: Vec<u8> = (0..4000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let id = std::cell::Cell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let len = form("f00.bin", &data).len();
    let check = |route: &str, chunked: bool, cut: usize| {
        id.set(id.get() + 1);
        let body = form(&format!("f{:02}.bin", id.get() % 100), &data);
        let (seen, complete) = cut_http1(&s, &rx, id.get(), (route, chunked), cut, &body);
        let sent = Sent {
            route,
            cut,
            len,
            complete,
        };
        verdict(&sent, part_end(&body), seen, dir.path(), &data).map_err(TestCaseError::fail)
    };
    // The edges first: nothing, just before and at the part's end, the last byte, all of it.
    let end = part_end(&form("f00.bin", &data));
    for route in ["/save_in", "/save_to", "/raw"] {
        for chunked in [false, true] {
            for cut in [0, end - 1, end, len - 1, len, len + 1] {
                check(route, chunked, cut).unwrap();
            }
        }
    }
    let routes = prop_oneof![Just("/save_in"), Just("/save_to"), Just("/raw")];
    let strategy = (routes, any::<bool>(), 0..=len + 1);
    runner
        .run(&strategy, |(route, chunked, cut)| {
            check(route, chunked, cut)
        })
        .unwrap();
}

/// The same over HTTP/2 (h2c with prior knowledge): the stream ends by a reset or by the
/// connection going away after `cut` bytes of DATA, with and without `content-length`.
#[cfg(feature = "http2")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_cut_at_any_byte_leaves_no_file_and_no_short_body() {
    use bytes::Bytes;
    let dir = tempfile::tempdir().unwrap();
    let (s, rx) = server(dir.path());
    let data: Vec<u8> = (0..4000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut id = 0u64;
    let mut wrong = Vec::new();
    for route in ["/save_in", "/save_to", "/raw"] {
        for sized in [true, false] {
            for reset in [true, false] {
                let len = form("h000.bin", &data).len();
                let end = part_end(&form("h000.bin", &data));
                for cut in [0, 1, 150, 2000, end - 1, end, len - 1, len] {
                    id += 1;
                    let body = form(&format!("h{id:03}.bin"), &data);
                    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
                    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
                    let conn = tokio::spawn(conn);
                    let mut send = send.ready().await.unwrap();
                    let mut req = http::Request::post(format!("http://t{route}?id={id}"))
                        .header("content-type", "multipart/form-data; boundary=XX");
                    if sized {
                        req = req.header("content-length", body.len());
                    }
                    let (_resp, mut stream) =
                        send.send_request(req.body(()).unwrap(), false).unwrap();
                    // The handler runs before the cut: a cut before the request arrived tests
                    // nothing.
                    let started = tokio::task::block_in_place(|| rx.recv_timeout(WAIT));
                    assert_eq!(started, Ok((id, Seen::Started)));
                    stream
                        .send_data(Bytes::copy_from_slice(&body[..cut]), false)
                        .unwrap();
                    // Let the DATA go out before the stream or the connection ends.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if reset {
                        stream.send_reset(h2::Reason::CANCEL);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    conn.abort();
                    drop((send, stream));
                    let got = tokio::task::block_in_place(|| seen(&rx, id));
                    let sent = Sent {
                        route,
                        cut,
                        len,
                        complete: false,
                    };
                    if let Err(e) = verdict(&sent, end, got, dir.path(), &data) {
                        wrong.push(format!("sized {sized} reset {reset}: {e}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
