//! Static files through real sockets: content types, validators, conditional 304s,
//! traversal refused, index files, large files streamed.

mod common;
use common::{request, TestServer};
use peregrine::fs::{ServeDir, ServeFile};
use peregrine::{get, App};
use std::path::Path;

struct Site {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("hello.txt"), "hello file\n").unwrap();
    std::fs::write(p.join("app.js"), "console.log(1)").unwrap();
    std::fs::write(p.join("logo.png"), [0x89, b'P', b'N', b'G']).unwrap();
    std::fs::write(p.join("data.unknownext"), "?").unwrap();
    std::fs::create_dir(p.join("docs")).unwrap();
    std::fs::write(p.join("docs/index.html"), "<h1>docs</h1>").unwrap();
    std::fs::write(p.join("docs/a b.txt"), "spaced").unwrap();
    std::fs::create_dir(p.join("empty")).unwrap();
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(p.join("big.bin"), &big).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), p.join("escape.txt")).unwrap();
    Site { dir, outside }
}

fn app(root: &Path) -> App {
    App::new()
        .route("/static/{*path}", get(ServeDir::new(root)))
        .route("/hello", get(ServeFile::new(root.join("hello.txt"))))
}

#[test]
fn serves_files_with_content_types() {
    let site = site();
    let s = TestServer::start(app(site.dir.path()));
    let r = s.get("/static/hello.txt", &[]);
    assert_eq!((r.status, r.text()), (200, "hello file\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("content-length"), Some("11"));
    assert_eq!(
        s.get("/static/app.js", &[]).header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(
        s.get("/static/logo.png", &[]).header("content-type"),
        Some("image/png")
    );
    assert_eq!(
        s.get("/static/data.unknownext", &[]).header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(s.get("/static/docs/a%20b.txt", &[]).text(), "spaced");
    assert_eq!(s.get("/hello", &[]).text(), "hello file\n");
}

#[test]
fn directories_use_index_html() {
    let site = site();
    let s = TestServer::start(app(site.dir.path()));
    // A directory without its slash redirects, so relative links in its index resolve.
    let r = s.get("/static/docs", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/static/docs/"))
    );
    let r = s.get("/static/docs/", &[]);
    assert_eq!((r.status, r.text()), (200, "<h1>docs</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    s.get("/static/empty/", &[])
        .assert_problem(404, "Not Found");
    s.get("/static/nope.txt", &[])
        .assert_problem(404, "Not Found");
}

#[test]
fn validators_and_conditional_requests() {
    let site = site();
    let s = TestServer::start(app(site.dir.path()));
    let r = s.get("/static/hello.txt", &[]);
    let etag = r.header("etag").unwrap().to_owned();
    let last_modified = r.header("last-modified").unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert!(httpdate::parse_http_date(&last_modified).is_ok());

    let r = s.get("/static/hello.txt", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("content-length"), None);

    let r = s.get(
        "/static/hello.txt",
        &[&format!("If-None-Match: \"nope\", W/{etag}")],
    );
    assert_eq!(r.status, 304);
    let r = s.get("/static/hello.txt", &["If-None-Match: \"nope\""]);
    assert_eq!((r.status, r.text()), (200, "hello file\n"));

    let r = s.get(
        "/static/hello.txt",
        &[&format!("If-Modified-Since: {last_modified}")],
    );
    assert_eq!(r.status, 304);
    let r = s.get(
        "/static/hello.txt",
        &["If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT"],
    );
    assert_eq!(r.status, 200);
    // If-None-Match takes precedence over If-Modified-Since.
    let r = s.get(
        "/static/hello.txt",
        &[
            "If-None-Match: \"nope\"",
            &format!("If-Modified-Since: {last_modified}"),
        ],
    );
    assert_eq!(r.status, 200);
    // HEAD answers conditionally too.
    let r = s.send(&request(
        "HEAD",
        "/static/hello.txt",
        &[&format!("If-None-Match: {etag}")],
        "",
    ));
    assert_eq!(r.status, 304);
    let r = s.send(&request("HEAD", "/static/hello.txt", &[], ""));
    assert_eq!((r.status, r.header("content-length")), (200, Some("11")));
}

#[test]
fn traversal_is_refused() {
    let site = site();
    let s = TestServer::start(app(&site.dir.path().join("docs")));
    for path in [
        "/static/..%2fhello.txt",
        "/static/%2e%2e/hello.txt",
        "/static/%2E%2E%2Fhello.txt",
        "/static/a/..%2f..%2fhello.txt",
        "/static/..%5chello.txt",
        "/static/index.html%00.txt",
    ] {
        // Refused by the path normaliser before routing (dot segment or encoded separator).
        let r = s.get(path, &[]);
        assert_eq!(r.status, 400, "{path}");
        assert!(!r.text().contains("hello file"), "{path}");
    }
    assert_eq!(s.get("/static/index.html", &[]).text(), "<h1>docs</h1>");
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_root_are_refused() {
    let site = site();
    let s = TestServer::start(app(site.dir.path()));
    assert!(site.outside.path().join("secret.txt").exists());
    s.get("/static/escape.txt", &[])
        .assert_problem(404, "Not Found");
}

#[test]
fn large_files_stream_intact() {
    let site = site();
    // Past `max_in_memory` (default 64 KiB; 1 MiB here) a file is sent from the file
    // (sendfile), still with Content-Length.
    let s = TestServer::start(App::new().route(
        "/static/{*path}",
        get(ServeDir::new(site.dir.path()).max_in_memory(1024 * 1024)),
    ));
    let r = s.get("/static/big.bin", &[]);
    assert_eq!(r.status, 200);
    assert!(!r.chunked);
    assert_eq!(r.header("content-length"), Some("3145728"));
    let expected: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(r.body.len(), expected.len());
    assert!(r.body == expected);
    // HEAD: same headers, no body.
    let r = s.send(&request("HEAD", "/static/big.bin", &[], ""));
    assert_eq!(r.status, 200);
    assert!(r.header("etag").is_some());
    assert_eq!(r.header("content-length"), Some("3145728"));
    let mut c = s.connect();
    c.write(request("HEAD", "/static/big.bin", &[], "").as_bytes());
    let _ = c.read(true);
    // The connection is still in sync after a HEAD of a file body.
    c.write(request("GET", "/static/hello.txt", &[], "").as_bytes());
    assert_eq!(c.read(false).text(), "hello file\n");
}
