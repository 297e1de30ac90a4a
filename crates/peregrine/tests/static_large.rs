//! Files above the in-memory limit (64 KiB by default) are sent from the open file, and
//! everything `ServeDir` does for small files still holds for them, byte for byte and header
//! for header: `Range` (single, several as a streamed `multipart/byteranges`, 416, `If-Range`),
//! HEAD, precompressed siblings, validators and conditional requests. Real sockets.

mod common;
use common::{request, Resp, TestServer};
use peregrine::fs::{ServeDir, ServeFile};
use peregrine::{get, App};
use std::path::Path;

/// 300 KiB: above the in-memory limit.
const LEN: usize = 300 * 1024;

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.bin"), data(LEN, 0)).unwrap();
    std::fs::write(dir.path().join("app.js"), data(LEN, 1)).unwrap();
    std::fs::write(dir.path().join("app.js.gz"), data(200 * 1024, 2)).unwrap();
    std::fs::write(dir.path().join("app.js.br"), data(150 * 1024, 3)).unwrap();
    dir
}

fn serve(root: &Path) -> TestServer {
    TestServer::start(
        App::new().merge(
            ServeDir::new(root)
                .precompressed_br()
                .precompressed_gzip()
                .router("/static"),
        ),
    )
}

/// The parts of a `multipart/byteranges` answer: `(Content-Range, payload)`, checking the
/// framing, each part's type, and that `Content-Length` is the body's length.
fn parts(r: &Resp, ctype: &str) -> Vec<(String, Vec<u8>)> {
    assert_eq!(r.status, 206);
    assert!(!r.chunked);
    assert_eq!(r.header("content-range"), None);
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    let boundary = r
        .header("content-type")
        .and_then(|c| c.strip_prefix("multipart/byteranges; boundary="))
        .unwrap()
        .to_owned();
    let delim = format!("\r\n--{boundary}");
    let mut rest = &r.body[..];
    let mut out = Vec::new();
    loop {
        assert!(rest.starts_with(delim.as_bytes()));
        rest = &rest[delim.len()..];
        if rest == b"--\r\n" {
            return out;
        }
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = std::str::from_utf8(&rest[..end]).unwrap();
        assert!(head.contains(&format!("Content-Type: {ctype}")), "{head}");
        let range = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Range: bytes "))
            .unwrap()
            .to_owned();
        let (a, b) = range.split_once('/').unwrap().0.split_once('-').unwrap();
        let n = b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1;
        rest = &rest[end + 4..];
        out.push((range, rest[..n].to_vec()));
        rest = &rest[n..];
    }
}

#[test]
fn whole_file_and_head() {
    let dir = site();
    let s = serve(dir.path());
    let full = data(LEN, 0);
    let r = s.get("/static/big.bin", &[]);
    assert_eq!(r.status, 200);
    assert!(!r.chunked);
    assert_eq!(r.header("content-length"), Some("307200"));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert!(r.header("etag").is_some() && r.header("last-modified").is_some());
    assert!(r.body == full);
    // HEAD: the same headers, no body, and the connection stays in sync.
    let mut c = s.connect();
    c.write(request("HEAD", "/static/big.bin", &[], "").as_bytes());
    c.write(request("GET", "/static/big.bin", &["Range: bytes=-3"], "").as_bytes());
    let h = c.read(true);
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    for name in [
        "content-length",
        "content-type",
        "etag",
        "last-modified",
        "accept-ranges",
    ] {
        assert_eq!(h.header(name), r.header(name), "{name}");
    }
    let tail = c.read(false);
    assert_eq!((tail.status, &tail.body[..]), (206, &full[LEN - 3..]));
}

#[test]
fn single_ranges_and_416() {
    let dir = site();
    let s = serve(dir.path());
    let full = data(LEN, 0);
    for (range, a, b) in [
        ("bytes=0-99", 0, 99),
        ("bytes=1000-200000", 1000, 200_000),
        ("bytes=100-", 100, LEN - 1),
        ("bytes=-70000", LEN - 70_000, LEN - 1),
    ] {
        let r = s.get("/static/big.bin", &[&format!("Range: {range}")]);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{LEN}").as_str())
        );
        assert_eq!(
            r.header("content-length"),
            Some((b - a + 1).to_string().as_str())
        );
        assert!(r.body == full[a..=b], "{range}");
    }
    let r = s.get("/static/big.bin", &["Range: bytes=400000-"]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */307200"));
}

/// Several ranges adding up to more than the in-memory limit: a `multipart/byteranges` body
/// streamed part by part, with the exact bytes and an exact `Content-Length`.
#[test]
fn multi_range_above_the_limit_streams_the_parts() {
    let dir = site();
    let s = serve(dir.path());
    let full = data(LEN, 0);
    let r = s.get(
        "/static/big.bin",
        &["Range: bytes=0-99999, 150000-160000, -100000"],
    );
    let got = parts(&r, "application/octet-stream");
    let want = [(0, 99_999), (150_000, 160_000), (LEN - 100_000, LEN - 1)];
    assert_eq!(got.len(), want.len());
    for ((range, payload), (a, b)) in got.iter().zip(want) {
        assert_eq!(range, &format!("{a}-{b}/{LEN}"));
        assert!(payload[..] == full[a..=b], "{range}");
    }
}

/// Ranges adding up to more than 8 MiB (the old in-memory limit) of a 10 MiB file: the old code
/// gave up on them and sent the whole file with 200; now they are a streamed 206.
#[test]
fn multi_range_of_a_10_mib_file() {
    let dir = tempfile::tempdir().unwrap();
    let len = 10 * 1024 * 1024;
    let full = data(len, 7);
    std::fs::write(dir.path().join("video.mp4"), &full).unwrap();
    let s = serve(dir.path());
    let r = s.get("/static/video.mp4", &["Range: bytes=0-4999999, 5000001-"]);
    let got = parts(&r, "video/mp4");
    assert_eq!(got.len(), 2);
    assert!(got[0].1[..] == full[..5_000_000]);
    assert_eq!(got[1].0, format!("5000001-{}/{len}", len - 1));
    assert!(got[1].1[..] == full[5_000_001..]);
}

#[test]
fn precompressed_siblings_above_the_limit() {
    let dir = site();
    let s = serve(dir.path());
    let plain = s.get("/static/app.js", &[]);
    let r = s.get("/static/app.js", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(r.header("content-length"), Some("204800"));
    assert!(r.body == data(200 * 1024, 2));
    let gz_etag = r.header("etag").unwrap();
    assert!(gz_etag.ends_with("-gz\""), "{gz_etag}");
    assert_ne!(Some(gz_etag), plain.header("etag"));
    let r = s.get("/static/app.js", &["Accept-Encoding: br, gzip"]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert!(r.body == data(150 * 1024, 3));
    // A range of the sibling: its own bytes.
    let r = s.get(
        "/static/app.js",
        &["Accept-Encoding: br", "Range: bytes=70000-139999"],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 70000-139999/153600"));
    assert!(r.body[..] == data(150 * 1024, 3)[70_000..140_000]);
    assert!(plain.body == data(LEN, 1));
}

#[test]
fn conditional_requests_above_the_limit() {
    let dir = site();
    let s = serve(dir.path());
    let full = s.get("/static/big.bin", &[]);
    let etag = full.header("etag").unwrap().to_owned();
    let lm = full.header("last-modified").unwrap().to_owned();
    let r = s.get("/static/big.bin", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert!(r.body.is_empty());
    let r = s.get("/static/big.bin", &[&format!("If-Modified-Since: {lm}")]);
    assert_eq!(r.status, 304);
    let r = s.get("/static/big.bin", &["If-Match: \"other\""]);
    assert_eq!(r.status, 412);
    let r = s.get(
        "/static/big.bin",
        &["If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT"],
    );
    assert_eq!(r.status, 412);
    // If-Range: honoured with the current ETag, the whole file with another.
    let r = s.get(
        "/static/big.bin",
        &["Range: bytes=100000-199999", &format!("If-Range: {etag}")],
    );
    assert_eq!(r.status, 206);
    assert!(r.body == full.body[100_000..200_000]);
    let r = s.get(
        "/static/big.bin",
        &["Range: bytes=100000-199999", "If-Range: \"stale\""],
    );
    assert_eq!(r.status, 200);
    assert!(r.body == full.body);
}

/// `ServeFile` shares the response building: a large file from the file, ranges included.
#[test]
fn serve_file_above_the_limit() {
    let dir = site();
    let s = TestServer::start(
        App::new().route("/video", get(ServeFile::new(dir.path().join("big.bin")))),
    );
    let full = data(LEN, 0);
    let r = s.get("/video", &[]);
    assert_eq!(r.header("content-length"), Some("307200"));
    assert!(r.body == full);
    let r = s.get("/video", &["Range: bytes=0-9, 200000-299999"]);
    let got = parts(&r, "application/octet-stream");
    assert!(got[0].1[..] == full[..10] && got[1].1[..] == full[200_000..300_000]);
}
