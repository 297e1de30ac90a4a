//! Compression of large bodies is capped and leaves the worker thread.

mod common;
use common::{gunzip_text, TestServer};
use peregrine::middleware::Compression;
use peregrine::{get, App, Request};

fn text(n: usize) -> String {
    "peregrine compresses text; ".repeat(n / 27 + 1)[..n].to_owned()
}

fn app(c: Compression) -> App {
    App::new()
        .route("/small", get(|_r: Request| async { text(10 * 1024) }))
        .route("/large", get(|_r: Request| async { text(1024 * 1024) }))
        .route("/huge", get(|_r: Request| async { text(6 * 1024 * 1024) }))
        .layer(c)
}

#[test]
fn bodies_past_the_inline_limit_are_compressed_off_the_worker() {
    let s = TestServer::start(app(Compression::new().inline_limit(16 * 1024)));
    let r = s.get("/small", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip_text(&r.body), text(10 * 1024));
    // 1 MiB: over the inline limit, compressed on the blocking pool, same result.
    let r = s.get("/large", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip_text(&r.body), text(1024 * 1024));
    let r = s.get("/large", &["Accept-Encoding: br"]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    let mut out = Vec::new();
    brotli::BrotliDecompress(&mut &r.body[..], &mut out).unwrap();
    assert!(out == text(1024 * 1024).as_bytes());
}

#[test]
fn bodies_past_max_size_are_sent_as_they_are() {
    let s = TestServer::start(app(Compression::new()));
    // Default max_size is 4 MiB.
    let r = s.get("/huge", &["Accept-Encoding: gzip, br"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body.len(), 6 * 1024 * 1024);
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    let s = TestServer::start(app(Compression::new().max_size(512 * 1024)));
    let r = s.get("/large", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), None);
}
