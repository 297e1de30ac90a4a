//! Static files for real assets and the static-file findings of a security review,
//! through real sockets: Range (RFC 9110 §14), Content-Length, precompressed siblings,
//! Cache-Control, directory index and bare prefix, SPA fallback, dotfiles, FIFOs, file times
//! outside HTTP-dates, Windows separators. (Files above the in-memory limit: `static_large.rs`;
//! memory under slow clients: `static_memory.rs`; symlinks: `static_symlinks.rs`; bare
//! prefixes of catch-alls: `static_prefix.rs`.)

mod common;
use common::{request, Resp, TestServer};
use peregrine::fs::{ServeDir, ServeFile};
use peregrine::middleware::Compression;
use peregrine::{get, App};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DIGITS: &str = "0123456789abcdefghijklmnopqrstuvwxyz"; // 36 bytes

fn big() -> Vec<u8> {
    (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect()
}

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("digits.txt"), DIGITS).unwrap();
    std::fs::write(p.join("empty.txt"), "").unwrap();
    std::fs::write(p.join("big.bin"), big()).unwrap();
    std::fs::write(p.join("index.html"), "<h1>home</h1>").unwrap();
    std::fs::create_dir(p.join("docs")).unwrap();
    std::fs::write(p.join("docs/index.html"), "<h1>docs</h1>").unwrap();
    std::fs::write(p.join("app.js"), "plain js").unwrap();
    std::fs::write(p.join("app.js.br"), "brotli bytes").unwrap();
    std::fs::write(p.join("app.js.gz"), "gzip bytes").unwrap();
    std::fs::write(p.join("only-gz.css"), "plain css").unwrap();
    std::fs::write(p.join("only-gz.css.gz"), "gzip css").unwrap();
    std::fs::write(p.join("app.3f2a9c1b.js"), "hashed").unwrap();
    std::fs::write(p.join(".env"), "SECRET=1").unwrap();
    std::fs::create_dir(p.join(".well-known")).unwrap();
    std::fs::write(p.join(".well-known/security.txt"), "Contact: x").unwrap();
    dir
}

fn assets(root: &Path) -> ServeDir {
    ServeDir::new(root)
}

fn serve(dir: ServeDir) -> TestServer {
    TestServer::start(App::new().merge(dir.router("/static")))
}

fn get_range(s: &TestServer, path: &str, range: &str, extra: &[&str]) -> Resp {
    let h = format!("Range: {range}");
    let mut headers = vec![h.as_str()];
    headers.extend_from_slice(extra);
    s.get(path, &headers)
}

// ---- Range (RFC 9110 §14) ----

#[test]
fn single_ranges() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let r = get_range(&s, "/static/digits.txt", "bytes=0-9", &[]);
    assert_eq!((r.status, r.text()), (206, "0123456789"));
    assert_eq!(r.header("content-range"), Some("bytes 0-9/36"));
    assert_eq!(r.header("content-length"), Some("10"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    // Suffix range: the last 6 bytes.
    let r = get_range(&s, "/static/digits.txt", "bytes=-6", &[]);
    assert_eq!((r.status, r.text()), (206, "uvwxyz"));
    assert_eq!(r.header("content-range"), Some("bytes 30-35/36"));
    // A suffix longer than the file is the whole file.
    let r = get_range(&s, "/static/digits.txt", "bytes=-100", &[]);
    assert_eq!(
        (r.status, r.header("content-range")),
        (206, Some("bytes 0-35/36"))
    );
    // Open range.
    let r = get_range(&s, "/static/digits.txt", "bytes=30-", &[]);
    assert_eq!((r.status, r.text()), (206, "uvwxyz"));
    // Last position past the end is clamped.
    let r = get_range(&s, "/static/digits.txt", "bytes=34-1000", &[]);
    assert_eq!((r.status, r.text()), (206, "yz"));
    assert_eq!(r.header("content-range"), Some("bytes 34-35/36"));
    // One byte.
    let r = get_range(&s, "/static/digits.txt", "bytes=35-35", &[]);
    assert_eq!((r.status, r.text()), (206, "z"));
}

#[test]
fn unsatisfiable_ranges_are_416_with_the_length() {
    let dir = site();
    let s = serve(assets(dir.path()));
    for range in ["bytes=36-", "bytes=100-200", "bytes=-0", "bytes=50-60, 70-"] {
        let r = get_range(&s, "/static/digits.txt", range, &[]);
        r.assert_problem(416, "Range Not Satisfiable");
        assert_eq!(r.header("content-range"), Some("bytes */36"), "{range}");
    }
    let r = get_range(&s, "/static/empty.txt", "bytes=0-", &[]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */0"));
}

#[test]
fn invalid_or_foreign_ranges_are_ignored() {
    let dir = site();
    let s = serve(assets(dir.path()));
    for range in ["bytes=5-1", "items=0-1", "bytes=a-b", "bytes", "bytes=1"] {
        let r = get_range(&s, "/static/digits.txt", range, &[]);
        assert_eq!((r.status, r.text()), (200, DIGITS), "{range}");
        assert_eq!(r.header("content-range"), None);
    }
    // Too many ranges: the whole file.
    let many = format!("bytes={}", vec!["0-0"; 17].join(","));
    assert_eq!(get_range(&s, "/static/digits.txt", &many, &[]).status, 200);
    // Range is for GET only: HEAD gets the 200 headers.
    let r = s.send(&request(
        "HEAD",
        "/static/digits.txt",
        &["Range: bytes=0-1"],
        "",
    ));
    assert_eq!((r.status, r.header("content-length")), (200, Some("36")));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
}

#[test]
fn multiple_ranges_are_multipart_byteranges() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let r = get_range(&s, "/static/digits.txt", "bytes=0-1, 10-12, -2", &[]);
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap().to_owned();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("{ct}"));
    assert_eq!(r.header("content-range"), None);
    let body = r.text();
    assert_eq!(
        r.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    let parts: Vec<&str> = body.split(&format!("--{boundary}")).collect();
    // Preamble, three parts, and the closing `--\r\n`.
    assert_eq!(parts.len(), 5, "{body:?}");
    let expect = [("0-1/36", "01"), ("10-12/36", "abc"), ("34-35/36", "yz")];
    for (part, (range, data)) in parts[1..4].iter().zip(expect) {
        let (head, payload) = part.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains("Content-Type: text/plain; charset=utf-8"),
            "{head}"
        );
        assert!(
            head.contains(&format!("Content-Range: bytes {range}")),
            "{head}"
        );
        assert_eq!(payload.strip_suffix("\r\n"), Some(data));
    }
    assert_eq!(parts[4], "--\r\n");
    // Overlapping ranges are coalesced into one.
    let r = get_range(&s, "/static/digits.txt", "bytes=0-5, 3-9", &[]);
    assert_eq!((r.status, r.text()), (206, "0123456789"));
    assert_eq!(r.header("content-range"), Some("bytes 0-9/36"));
}

#[test]
fn if_range_with_etag_and_date() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let full = s.get("/static/digits.txt", &[]);
    let etag = full.header("etag").unwrap().to_owned();
    let lm = full.header("last-modified").unwrap().to_owned();
    // Matching validator: the range is honoured.
    let r = get_range(
        &s,
        "/static/digits.txt",
        "bytes=0-1",
        &[&format!("If-Range: {etag}")],
    );
    assert_eq!((r.status, r.text()), (206, "01"));
    let r = get_range(
        &s,
        "/static/digits.txt",
        "bytes=0-1",
        &[&format!("If-Range: {lm}")],
    );
    assert_eq!((r.status, r.text()), (206, "01"));
    // Changed (or weak) validator: the whole, current file.
    for ir in [
        "\"other\"".to_owned(),
        format!("W/{etag}"),
        "Sat, 01 Jan 2000 00:00:00 GMT".to_owned(),
        "garbage".to_owned(),
    ] {
        let r = get_range(
            &s,
            "/static/digits.txt",
            "bytes=0-1",
            &[&format!("If-Range: {ir}")],
        );
        assert_eq!((r.status, r.text()), (200, DIGITS), "{ir}");
    }
}

#[test]
fn preconditions_412_and_304() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let etag = s
        .get("/static/digits.txt", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    let r = s.get("/static/digits.txt", &["If-Match: \"nope\""]);
    r.assert_problem(412, "Precondition Failed");
    assert_eq!(
        s.get("/static/digits.txt", &[&format!("If-Match: {etag}")])
            .status,
        200
    );
    let r = s.get(
        "/static/digits.txt",
        &["If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT"],
    );
    assert_eq!(r.status, 412);
    // If-None-Match beats Range.
    let r = get_range(
        &s,
        "/static/digits.txt",
        "bytes=0-1",
        &[&format!("If-None-Match: {etag}")],
    );
    assert_eq!(r.status, 304);
}

#[test]
fn ranges_of_a_large_file() {
    let dir = site();
    let data = big();
    let s = serve(assets(dir.path()).max_in_memory(1024 * 1024));
    // A small range of a large file: read alone, with Content-Length.
    let r = get_range(&s, "/static/big.bin", "bytes=1000000-1000099", &[]);
    assert_eq!(r.status, 206);
    assert!(!r.chunked);
    assert!(r.body == data[1_000_000..1_000_100]);
    // A range larger than max_in_memory is sent from the file (sendfile), with Content-Length.
    let r = get_range(&s, "/static/big.bin", "bytes=100-", &[]);
    assert_eq!(r.status, 206);
    assert!(!r.chunked);
    assert_eq!(r.header("content-length"), Some("3145628"));
    assert_eq!(r.header("content-range"), Some("bytes 100-3145727/3145728"));
    assert!(r.body == data[100..]);
    let r = get_range(&s, "/static/big.bin", "bytes=-1500000", &[]);
    assert!(r.body == data[data.len() - 1_500_000..]);
}

// ---- Content-Length ----

#[test]
fn content_length_for_large_files_and_head() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let r = s.get("/static/big.bin", &[]);
    assert_eq!(r.status, 200);
    assert!(!r.chunked, "a 3 MiB file is sent with Content-Length");
    assert_eq!(r.header("content-length"), Some("3145728"));
    assert!(r.body == big());
    let r = s.send(&request("HEAD", "/static/big.bin", &[], ""));
    assert_eq!(r.header("content-length"), Some("3145728"));
    assert!(r.body.is_empty());
}

#[test]
fn a_20_mib_file_goes_out_with_content_length_and_keeps_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..20 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("video.mp4"), &data).unwrap();
    let s = serve(assets(dir.path()));
    let mut c = s.connect();
    // GET, HEAD, a range past max_in_memory and a small request, pipelined in one write.
    let mut batch = request("GET", "/static/video.mp4", &[], "");
    batch += &request("HEAD", "/static/video.mp4", &[], "");
    batch += &request("GET", "/static/video.mp4", &["Range: bytes=1000-"], "");
    batch += &request("GET", "/static/video.mp4", &["Range: bytes=-10"], "");
    c.write(batch.as_bytes());
    let r = c.read(false);
    assert_eq!(r.status, 200);
    assert!(!r.chunked);
    assert_eq!(r.header("content-length"), Some("20971520"));
    assert_eq!(r.header("content-type"), Some("video/mp4"));
    assert!(r.body == data, "the body is the file");
    let r = c.read(true);
    assert_eq!(r.header("content-length"), Some("20971520"));
    assert!(r.body.is_empty());
    let r = c.read(false);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-length"), Some("20970520"));
    assert_eq!(
        r.header("content-range"),
        Some("bytes 1000-20971519/20971520")
    );
    assert!(r.body == data[1000..]);
    let r = c.read(false);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, &data[data.len() - 10..])
    );
}

// ---- precompressed siblings, Cache-Control ----

#[test]
fn precompressed_siblings_follow_accept_encoding() {
    let dir = site();
    let s = serve(assets(dir.path()).precompressed_br().precompressed_gzip());
    let r = s.get("/static/app.js", &["Accept-Encoding: gzip, br"]);
    assert_eq!((r.status, r.text()), (200, "brotli bytes"));
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    let br_etag = r.header("etag").unwrap().to_owned();
    let r = s.get("/static/app.js", &["Accept-Encoding: gzip"]);
    assert_eq!(
        (r.text(), r.header("content-encoding")),
        ("gzip bytes", Some("gzip"))
    );
    assert_ne!(r.header("etag"), Some(br_etag.as_str()));
    let r = s.get("/static/app.js", &["Accept-Encoding: br;q=0, gzip;q=0"]);
    assert_eq!((r.text(), r.header("content-encoding")), ("plain js", None));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    let r = s.get("/static/app.js", &[]);
    assert_eq!(r.text(), "plain js");
    // Brotli preferred but absent: the gzip sibling.
    let r = s.get("/static/only-gz.css", &["Accept-Encoding: br, gzip"]);
    assert_eq!(
        (r.text(), r.header("content-encoding")),
        ("gzip css", Some("gzip"))
    );
    // The compressed variant revalidates against its own ETag.
    let r = s.get(
        "/static/app.js",
        &["Accept-Encoding: br", &format!("If-None-Match: {br_etag}")],
    );
    assert_eq!((r.status, r.header("vary")), (304, Some("Accept-Encoding")));
    // Not enabled: never served.
    let s = serve(assets(dir.path()));
    let r = s.get("/static/app.js", &["Accept-Encoding: br"]);
    assert_eq!((r.text(), r.header("vary")), ("plain js", None));
}

#[test]
fn compression_layer_leaves_precompressed_and_partial_answers_alone() {
    let dir = site();
    let text = "compress me ".repeat(500);
    std::fs::write(dir.path().join("long.txt"), &text).unwrap();
    let app = App::new()
        .merge(assets(dir.path()).precompressed_br().router("/static"))
        .layer(Compression::new());
    let s = TestServer::start(app);
    let r = s.get("/static/app.js", &["Accept-Encoding: br"]);
    assert_eq!(r.text(), "brotli bytes");
    let r = get_range(
        &s,
        "/static/long.txt",
        "bytes=0-4",
        &["Accept-Encoding: gzip"],
    );
    assert_eq!(
        (r.status, r.text(), r.header("content-encoding")),
        (206, "compr", None)
    );
}

#[test]
fn cache_control_and_immutable_hashed_names() {
    let dir = site();
    let s = serve(
        assets(dir.path())
            .cache_control("public, max-age=60")
            .immutable_hashed(true),
    );
    let r = s.get("/static/digits.txt", &[]);
    assert_eq!(r.header("cache-control"), Some("public, max-age=60"));
    let r = s.get("/static/app.3f2a9c1b.js", &[]);
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    let etag = r.header("etag").unwrap().to_owned();
    let r = s.get(
        "/static/app.3f2a9c1b.js",
        &[&format!("If-None-Match: {etag}")],
    );
    assert_eq!(
        (r.status, r.header("cache-control")),
        (304, Some("public, max-age=31536000, immutable"))
    );
    let s = TestServer::start(App::new().route(
        "/f",
        get(ServeFile::new(dir.path().join("digits.txt")).cache_control("no-store")),
    ));
    assert_eq!(s.get("/f", &[]).header("cache-control"), Some("no-store"));
}

// ---- directories, SPA ----

#[test]
fn directory_index_and_bare_prefix() {
    let dir = site();
    let s = serve(assets(dir.path()));
    let r = s.get("/static/", &[]);
    assert_eq!((r.status, r.text()), (200, "<h1>home</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let r = s.get("/static", &[]);
    assert_eq!((r.status, r.header("location")), (301, Some("/static/")));
    let r = s.get("/static?x=1", &[]);
    assert_eq!(r.header("location"), Some("/static/?x=1"));
    let r = s.get("/static/docs", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/static/docs/"))
    );
    assert_eq!(s.get("/static/docs/", &[]).text(), "<h1>docs</h1>");
    // Normalised before routing: `//` is merged.
    assert_eq!(s.get("/static//docs//", &[]).text(), "<h1>docs</h1>");
    let s = serve(assets(dir.path()).index(None));
    s.get("/static/", &[]).assert_problem(404, "Not Found");
}

#[test]
fn spa_fallback_for_navigations_only() {
    let dir = site();
    let s = serve(assets(dir.path()).spa_fallback("index.html"));
    let nav = "Accept: text/html,application/xhtml+xml,*/*;q=0.8";
    let r = s.get("/static/users/42/settings", &[nav]);
    assert_eq!((r.status, r.text()), (200, "<h1>home</h1>"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    // A missing asset fetched by a script or an image is still 404.
    s.get("/static/missing.js", &["Accept: */*"])
        .assert_problem(404, "Not Found");
    // Refused paths stay refused.
    assert_eq!(s.get("/static/.env", &[nav]).status, 404);
    assert_eq!(s.get("/static/../x", &[nav]).status, 400);
    // Existing files are themselves.
    assert_eq!(s.get("/static/digits.txt", &[nav]).text(), DIGITS);
}

// ---- static-file findings of a security review ----

#[test]
fn dotfiles_are_opt_in() {
    let dir = site();
    let s = serve(assets(dir.path()));
    s.get("/static/.env", &[]).assert_problem(404, "Not Found");
    s.get("/static/%2eenv", &[])
        .assert_problem(404, "Not Found");
    s.get("/static/.well-known/security.txt", &[])
        .assert_problem(404, "Not Found");
    let s = serve(assets(dir.path()).hidden(true));
    assert_eq!(
        s.get("/static/.well-known/security.txt", &[]).text(),
        "Contact: x"
    );
    assert_eq!(s.get("/static/.env", &[]).text(), "SECRET=1");
}

#[test]
fn file_times_outside_http_dates_do_not_fail() {
    let dir = site();
    let old = dir.path().join("old.txt");
    let future = dir.path().join("future.txt");
    std::fs::write(&old, "old").unwrap();
    std::fs::write(&future, "future").unwrap();
    let set = |p: &Path, t: SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    set(&old, UNIX_EPOCH - Duration::from_secs(86_400 * 365));
    // Year 10000: past what an HTTP-date can express.
    set(
        &future,
        UNIX_EPOCH + Duration::from_secs(253_402_300_800 + 86_400),
    );
    let s = serve(assets(dir.path()));
    // Before: `httpdate` panicked formatting Last-Modified, a 500 on every request.
    for (path, body, since_2000) in [
        ("/static/old.txt", "old", 304),
        ("/static/future.txt", "future", 200),
    ] {
        let r = s.get(path, &[]);
        assert_eq!((r.status, r.text()), (200, body), "{path}");
        // Some file systems cannot store year 10000 (ext4 stops in 2446): expect what was
        // stored. The unit tests in fs/conditional.rs cover years past 9999 directly.
        let stored = std::fs::metadata(dir.path().join(&path[8..]))
            .unwrap()
            .modified()
            .unwrap();
        let expressible = stored
            .duration_since(UNIX_EPOCH)
            .is_ok_and(|d| d.as_secs() <= 253_402_300_799);
        assert_eq!(r.header("last-modified").is_some(), expressible, "{path}");
        let etag = r.header("etag").unwrap().to_owned();
        let r = s.get(path, &["If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT"]);
        assert_eq!(r.status, since_2000, "{path}");
        let r = s.get(path, &[&format!("If-None-Match: {etag}")]);
        assert_eq!(r.status, 304, "{path}");
    }
}

#[cfg(unix)]
#[test]
fn fifos_are_not_opened_for_reading() {
    let dir = site();
    let fifo = dir.path().join("pipe.txt");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(ok.success());
    let s = serve(assets(dir.path()));
    // Before: `open` blocked a thread of the blocking pool until a writer came (never).
    let r = s.get("/static/pipe.txt", &[]);
    r.assert_problem(404, "Not Found");
    let r = TestServer::start(App::new().route("/p", get(ServeFile::new(&fifo))));
    r.get("/p", &[]).assert_problem(404, "Not Found");
    // Character devices are not files either.
    let s = TestServer::start(App::new().route("/z", get(ServeFile::new("/dev/zero"))));
    s.get("/z", &[]).assert_problem(404, "Not Found");
}

/// A symlink in the root flipped between a file inside and a secret outside while requests
/// run, with links allowed inside the root (`Symlinks::WithinRoot`; the default follows none):
/// the answer is always the inside file or 404, never the secret (the check is made on the
/// opened file, not on the path before opening). Bounded: 400 requests.
#[cfg(unix)]
#[test]
fn symlink_swaps_never_leak_files_outside_the_root() {
    let dir = site();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::fs::write(dir.path().join("inside.txt"), "inside").unwrap();
    let link = dir.path().join("flip.txt");
    std::os::unix::fs::symlink(dir.path().join("inside.txt"), &link).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, link) = (stop.clone(), link.clone());
        let (inside, secret) = (
            dir.path().join("inside.txt"),
            outside.path().join("secret.txt"),
        );
        std::thread::spawn(move || {
            let tmp = link.with_extension("tmp");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if n.is_multiple_of(2) {
                    &secret
                } else {
                    &inside
                };
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(target, &tmp).unwrap();
                std::fs::rename(&tmp, &link).unwrap();
                n += 1;
            }
        })
    };
    let s = serve(assets(dir.path()).symlinks(peregrine::fs::Symlinks::WithinRoot));
    let mut seen_inside = 0;
    for _ in 0..400 {
        let r = s.get("/static/flip.txt", &[]);
        assert!(
            !String::from_utf8_lossy(&r.body).contains("secret"),
            "leaked"
        );
        match r.status {
            200 => {
                assert_eq!(r.text(), "inside");
                seen_inside += 1;
            }
            404 => {}
            other => panic!("status {other}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    // Not asserted: how often each side won (timing); only that nothing leaked.
    let _ = seen_inside;
}

#[test]
fn windows_separators_are_refused() {
    let dir = site();
    std::fs::write(dir.path().join("docs").join("x.txt"), "x").unwrap();
    let s = serve(assets(dir.path()));
    // Encoded backslash: refused before routing.
    for path in [
        "/static/docs%5cx.txt",
        "/static/docs%5Cx.txt",
        "/static/..%5cdigits.txt",
    ] {
        s.get(path, &[]).assert_problem(400, "Bad Request");
    }
    // A raw backslash is not a request-target character: the engine refuses the request.
    let r = s.send("GET /static/docs\\x.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 400);
    // Kept encoded by choice: ServeDir still refuses a name containing `\`.
    let s = TestServer::start(
        App::new()
            .encoded_slashes(peregrine::path::EncodedSlashes::Keep)
            .merge(assets(dir.path()).router("/static")),
    );
    s.get("/static/docs%5cx.txt", &[])
        .assert_problem(404, "Not Found");
    assert_eq!(s.get("/static/docs/x.txt", &[]).text(), "x");
}

#[test]
fn nul_and_traversal_still_refused() {
    let dir = site();
    let s = serve(assets(dir.path()));
    for path in [
        "/static/digits.txt%00",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/docs/../../x",
        "/static/..%2f..%2fetc%2fpasswd",
    ] {
        assert_eq!(s.get(path, &[]).status, 400, "{path}");
    }
}
