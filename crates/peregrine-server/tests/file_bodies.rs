//! Bodies of known length that are not in memory: `ResponseBody::File`
//! (`sendfile(2)` on plain TCP, read and written over a Unix socket) and
//! `ResponseBody::SizedStream`, through real sockets: `Content-Length` for GET and HEAD, a range
//! of a large file, a pipelined request after a file body, a source shorter or longer than
//! announced closing the connection, and a slow reader of a file body being cut.

mod common;
use bytes::Bytes;
use common::*;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Server, ServerConfig};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const MIB: usize = 1024 * 1024;

/// Byte `i` of the test file: not periodic in any power of two, so an offset slip shows.
fn byte_at(i: usize) -> u8 {
    (i % 251) as u8
}

/// A temporary file of `len` bytes (`byte_at`), removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, len: usize) -> Self {
        let path = std::env::temp_dir().join(format!(
            "peregrine-file-bodies-{name}-{}",
            std::process::id()
        ));
        let data: Vec<u8> = (0..len).map(byte_at).collect();
        std::fs::write(&path, data).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sized(len: u64, pieces: &[&'static [u8]]) -> Response {
    let pieces: Vec<Result<Bytes, std::io::Error>> =
        pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
    Response::new(200).with_body(ResponseBody::SizedStream {
        len,
        stream: Box::pin(Iter(pieces.into_iter())),
    })
}

/// `/file` (whole), `/range` (5 MiB from offset 1000), `/past-end` (announces more than the
/// file holds), `/sized`, `/sized-short`, `/sized-long`, `/plaintext`.
fn file_service(path: Arc<PathBuf>) -> impl peregrine_server::Service {
    service_fn(move |req: Request| {
        let path = path.clone();
        async move {
            let file = std::fs::File::open(&*path).unwrap();
            let size = file.metadata().unwrap().len();
            match req.path() {
                "/file" => Response::new(200).with_body(ResponseBody::File {
                    file,
                    offset: 0,
                    len: size,
                }),
                "/range" => Response::new(206).with_body(ResponseBody::File {
                    file,
                    offset: 1000,
                    len: 5 * MIB as u64,
                }),
                "/past-end" => Response::new(200).with_body(ResponseBody::File {
                    file,
                    offset: size - 100,
                    len: 200,
                }),
                "/sized" => sized(11, &[b"hello", b" ", b"world"]),
                "/sized-short" => sized(100, &[b"only", b" fifty"]),
                "/sized-long" => sized(10, &[b"0123456789", b"overflow"]),
                _ => Response::text("Hello, World!"),
            }
        }
    })
}

/// The test config with time for a debug-built client to check megabytes between reads.
fn patient() -> ServerConfig {
    ServerConfigBuilder::from(config())
        .write_timeout(Duration::from_secs(10))
        .idle_timeout(Duration::from_secs(10))
        .build()
}

fn start_files(cfg: ServerConfig, file: &TempFile) -> peregrine_server::ServerHandle {
    Server::new(cfg)
        .serve(file_service(Arc::new(file.0.clone())))
        .expect("serve")
}

fn assert_file_bytes(body: &[u8], offset: usize, len: usize) {
    assert_eq!(body.len(), len);
    if let Some(i) = (0..len).find(|&i| body[i] != byte_at(offset + i)) {
        panic!(
            "byte {i} of the body differs from the file at {}",
            offset + i
        );
    }
}

/// Reads until the server closes; the head (as text) and the bytes after it.
fn read_until_close(s: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("the server closes the connection (no keep-alive after a broken body)");
    let at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8(out[..at + 2].to_vec()).unwrap();
    (head, out[at + 4..].to_vec())
}

#[test]
fn a_20_mib_file_gets_content_length_for_get_and_head() {
    let f = TempFile::new("get-head", 20 * MIB);
    let h = start_files(patient(), &f);
    let mut c = Client::new(h.local_addr());
    c.send(&get("/file"));
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert!(!r.chunked);
    assert_eq!(r.header("content-length"), Some("20971520"));
    assert_file_bytes(&r.body, 0, 20 * MIB);
    // HEAD: the length, no body; the connection stays usable.
    c.send(b"HEAD /file HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_response_for("HEAD").unwrap();
    assert_eq!(r.header("content-length"), Some("20971520"));
    assert!(!r.closes());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn a_range_of_a_large_file_and_pipelined_requests_around_it_stay_in_order() {
    let f = TempFile::new("pipelined", 12 * MIB);
    let h = start_files(patient(), &f);
    let mut c = Client::new(h.local_addr());
    // One write: a small response before the file body, one after, another file body, and a
    // last small one; each must come whole and in order.
    let mut batch = get("/plaintext");
    batch.extend(get("/range"));
    batch.extend(get("/plaintext"));
    batch.extend(get("/file"));
    batch.extend(get("/sized"));
    c.send(&batch);
    let rs: Vec<_> = (0..5).map(|_| c.read_response()).collect();
    assert_eq!(rs[0].body_str(), "Hello, World!");
    let r = &rs[1];
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-length"), Some("5242880"));
    assert_file_bytes(&r.body, 1000, 5 * MIB);
    assert_eq!(rs[2].body_str(), "Hello, World!");
    assert_file_bytes(&rs[3].body, 0, 12 * MIB);
    let r = &rs[4];
    assert_eq!(r.header("content-length"), Some("11"));
    assert_eq!(r.body_str(), "hello world");
    assert!(!r.chunked);
    h.shutdown();
}

#[test]
fn a_sized_stream_is_framed_by_length_for_http10_and_head() {
    let f = TempFile::new("sized", 1000);
    let h = start_files(config(), &f);
    let mut c = Client::new(h.local_addr());
    c.send(b"HEAD /sized HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_response_for("HEAD").unwrap();
    assert_eq!(r.header("content-length"), Some("11"));
    assert!(r.header("transfer-encoding").is_none());
    // HTTP/1.0 with keep-alive: not close-delimited, the connection is kept.
    let mut s = connect(h.local_addr());
    s.write_all(
        b"GET /sized HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /plaintext HTTP/1.0\r\n\r\n",
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Content-Length: 11\r\n"), "{text:?}");
    assert!(
        text.contains("\r\n\r\nhello worldHTTP/1.1 200 OK\r\n"),
        "{text:?}"
    );
    assert!(text.ends_with("Hello, World!"), "{text:?}");
    h.shutdown();
}

#[test]
fn a_body_shorter_or_longer_than_announced_closes_the_connection() {
    let f = TempFile::new("broken", 1000);
    let h = start_files(config(), &f);
    // Fewer or more bytes than announced (or a file shorter than its region): what was sent
    // stays within the announced length, then EOF, never a next response on that connection.
    let file_tail: Vec<u8> = (900..1000).map(byte_at).collect();
    for (path, announced, sent) in [
        ("/sized-short", 100, b"only fifty".to_vec()),
        ("/sized-long", 10, b"0123456789".to_vec()),
        ("/past-end", 200, file_tail),
    ] {
        let mut s = connect(h.local_addr());
        let mut batch = get(path);
        batch.extend(get("/plaintext"));
        s.write_all(&batch).unwrap();
        let (head, body) = read_until_close(&mut s);
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{path}: {head:?}");
        assert!(
            head.contains(&format!("Content-Length: {announced}\r\n")),
            "{path}: {head:?}"
        );
        assert!(!head.contains("Transfer-Encoding"), "{path}: {head:?}");
        assert_eq!(body, sent, "{path}");
    }
    // The worker still serves others.
    let mut c = Client::new(h.local_addr());
    c.send(&get("/plaintext"));
    assert_eq!(c.read_response().body_str(), "Hello, World!");
    h.shutdown();
}

#[test]
fn a_slow_reader_of_a_file_body_is_cut_by_the_write_min_rate() {
    // As `slow_clients::response_read_slowly_under_the_write_timeout_is_cut_by_min_rate`, for
    // the sendfile path: 32 KiB every 50 ms against an 8 MB/s minimum.
    let f = TempFile::new("slow", 64 * MIB);
    let cfg = ServerConfigBuilder::from(config())
        .write_timeout(Duration::from_secs(5))
        .write_min_rate(8_000_000)
        .write_rate_grace(Duration::from_millis(200))
        .build();
    let h = start_files(cfg, &f);
    let mut s = connect(h.local_addr());
    s.write_all(&get("/file")).unwrap();
    let (ended, total) = read_slowly(&mut s, Duration::from_secs(20));
    assert!(ended, "still sending to a slow reader after {total} bytes");
    assert!(total < 64 * MIB, "the whole file was sent");
    h.shutdown();
}

#[test]
fn a_file_body_over_a_unix_socket_is_read_and_written() {
    let f = TempFile::new("unix", 3 * MIB);
    let sock =
        std::env::temp_dir().join(format!("peregrine-file-bodies-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let cfg = ServerConfigBuilder::from(config())
        .unix(Some(sock.clone()))
        .build();
    let h = start_files(cfg, &f);
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    s.write_all(b"GET /range HTTP/1.1\r\nHost: a\r\n\r\nGET /file HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let first_head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&out[..first_head_end]);
    assert!(head.contains("Content-Length: 5242880\r\n"), "{head:?}");
    // The 3 MiB file holds less than the 5 MiB range asked: the body is cut, the connection
    // closed, the second request never answered.
    let body = &out[first_head_end..];
    assert!(body.len() < 5 * MIB);
    assert_file_bytes(body, 1000, body.len());
    h.shutdown();
    drop(f);
    let f = TempFile::new("unix2", 7 * MIB);
    let h = start_files(
        ServerConfigBuilder::from(config())
            .unix(Some(sock.clone()))
            .build(),
        &f,
    );
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    s.write_all(b"GET /range HTTP/1.1\r\nHost: a\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let first_head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_file_bytes(
        &out[first_head_end..first_head_end + 5 * MIB],
        1000,
        5 * MIB,
    );
    assert!(out[first_head_end + 5 * MIB..].starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(out.ends_with(b"Hello, World!"));
    h.shutdown();
    let _ = std::fs::remove_file(&sock);
}
