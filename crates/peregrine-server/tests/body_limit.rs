//! A body's own size limit (`Body::set_limit`), set by the service before reading: it replaces
//! `max_body_size` for that body both ways (raised and lowered), for a declared length, a
//! chunked body and its chunk extensions over HTTP/1.1, and for HTTP/2 DATA.

mod common;
#[cfg(feature = "http2")]
mod h2_support;

use common::*;
use peregrine_server::{service_fn, Request, Response, Server, ServerHandle, Service};

/// `x-limit: N` sets the body's limit to N; `/bytes` reads the body whole, `/chunks` piece by
/// piece; both answer the byte count, or the read's error status.
fn limited() -> impl Service {
    service_fn(|mut req: Request| async move {
        let limit = req
            .header("x-limit")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse().ok());
        if let Some(limit) = limit {
            req.body_mut().set_limit(limit);
        }
        let read = match req.path() {
            "/bytes" => req.body_mut().to_bytes(usize::MAX).await.map(|b| b.len()),
            // The first piece streamed, then the rest whole.
            "/mixed" => match req.body_mut().chunk().await {
                Ok(first) => {
                    let first = first.map_or(0, |b| b.len());
                    let rest = req.body_mut().to_bytes(usize::MAX).await;
                    rest.map(|b| first + b.len())
                }
                Err(e) => Err(e),
            },
            _ => {
                let mut n = 0;
                loop {
                    match req.body_mut().chunk().await {
                        Ok(Some(piece)) => n += piece.len(),
                        Ok(None) => break Ok(n),
                        Err(e) => break Err(e),
                    }
                }
            }
        };
        match read {
            Ok(n) => Response::text(n.to_string()),
            Err(e) => Response::text(e.to_string()).with_status(e.status()),
        }
    })
}

/// The limited service under `config()` (`max_body_size` 64 KiB).
fn server() -> ServerHandle {
    Server::new(config()).serve(limited()).expect("serve")
}

fn with_length(path: &str, limit: Option<u64>, len: usize) -> Vec<u8> {
    let limit = limit.map_or(String::new(), |l| format!("x-limit: {l}\r\n"));
    let mut req =
        format!("POST {path} HTTP/1.1\r\nHost: a\r\n{limit}Content-Length: {len}\r\n\r\n")
            .into_bytes();
    req.resize(req.len() + len, b'x');
    req
}

/// A chunked request of `chunks` chunks of 10 bytes, each size line with an `ext_len`-byte
/// extension (0: none).
fn chunked(path: &str, limit: Option<u64>, chunks: usize, ext_len: usize) -> Vec<u8> {
    let limit = limit.map_or(String::new(), |l| format!("x-limit: {l}\r\n"));
    let ext = if ext_len == 0 {
        String::new()
    } else {
        format!(";e={}", "x".repeat(ext_len - 3))
    };
    let mut req =
        format!("POST {path} HTTP/1.1\r\nHost: a\r\n{limit}Transfer-Encoding: chunked\r\n\r\n")
            .into_bytes();
    for _ in 0..chunks {
        req.extend_from_slice(format!("a{ext}\r\n0123456789\r\n").as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req
}

/// Sends `raw` on a new connection: status, body, and whether the server closes.
fn exchange(h: &ServerHandle, raw: &[u8]) -> (u16, String, bool) {
    let mut c = Client::new(h.local_addr());
    c.send(raw);
    let r = c.read_response();
    (r.status, r.body_str().to_string(), r.closes())
}

#[test]
fn a_raised_limit_takes_a_declared_length_over_max_body_size() {
    let h = server();
    for path in ["/bytes", "/chunks"] {
        let ok = exchange(&h, &with_length(path, Some(100_000), 100_000));
        assert_eq!((ok.0, ok.1.as_str()), (200, "100000"), "{path}");
        let over = exchange(&h, &with_length(path, Some(100_000), 100_001));
        assert_eq!((over.0, over.2), (413, true), "{path}");
        // Without the raise, `max_body_size` holds.
        let default = exchange(&h, &with_length(path, None, 100_000));
        assert_eq!(default.0, 413, "{path}");
    }
    h.shutdown();
}

#[test]
fn a_lowered_limit_holds_at_the_limit_and_refuses_past_it() {
    let h = server();
    for path in ["/bytes", "/chunks"] {
        let at = exchange(&h, &with_length(path, Some(10), 10));
        assert_eq!((at.0, at.1.as_str()), (200, "10"), "{path}");
        let over = exchange(&h, &with_length(path, Some(10), 11));
        assert_eq!((over.0, over.2), (413, true), "{path}");
        let at = exchange(&h, &chunked(path, Some(30), 3, 0));
        assert_eq!((at.0, at.1.as_str()), (200, "30"), "{path}");
        let over = exchange(&h, &chunked(path, Some(29), 3, 0));
        assert_eq!((over.0, over.2), (413, true), "{path}");
        let raised = exchange(&h, &chunked(path, Some(1 << 20), 7000, 0));
        assert_eq!((raised.0, raised.1.as_str()), (200, "70000"), "{path}");
    }
    h.shutdown();
}

#[test]
fn what_was_streamed_counts_once_when_the_rest_is_read_whole() {
    let h = server();
    // Up to `max_body_size` (64 KiB) in all: the declared length is checked against what is
    // left, not counted twice.
    for len in [60_000, 65_536] {
        let raw = with_length("/mixed", None, len);
        let mut c = Client::new(h.local_addr());
        // The head and part of the body first, so the first read takes only that part.
        let split = raw.len() - len + 1000;
        c.send(&raw[..split]);
        std::thread::sleep(std::time::Duration::from_millis(100));
        c.send(&raw[split..]);
        let r = c.read_response();
        assert_eq!((r.status, r.body_str()), (200, &*len.to_string()));
    }
    h.shutdown();
}

#[test]
fn chunk_extensions_count_against_the_bodys_own_limit() {
    let h = server();
    // 50 data bytes and 1,500 extension bytes: within 64 KiB, over a limit of 1,000.
    let ok = exchange(&h, &chunked("/chunks", None, 5, 300));
    assert_eq!((ok.0, ok.1.as_str()), (200, "50"));
    let cut = exchange(&h, &chunked("/chunks", Some(1000), 5, 300));
    assert_eq!((cut.0, cut.2), (413, true));
    h.shutdown();
}

#[cfg(feature = "http2")]
#[tokio::test]
async fn http2_data_is_held_to_the_bodys_own_limit() {
    use bytes::Bytes;
    use h2_support::{client, fetch, start};
    use peregrine_server::h2::Http2Config;
    let srv = start(limited(), config(), Http2Config::default());
    let mut c = client(srv.addr).await;
    let post = |limit: u64, declared: Option<usize>| {
        let req = http::Request::post("http://localhost/chunks").header("x-limit", limit);
        let req = match declared {
            Some(n) => req.header("content-length", n),
            None => req,
        };
        req.body(()).unwrap()
    };
    for declared in [true, false] {
        let body = |n: usize| Some(Bytes::from(vec![b'x'; n]));
        let len = |n: usize| declared.then_some(n);
        let (status, _, text) = fetch(&mut c, post(100_000, len(100_000)), body(100_000))
            .await
            .unwrap();
        assert_eq!((status.as_u16(), &text[..]), (200, &b"100000"[..]));
        let (status, _, _) = fetch(&mut c, post(10, len(10)), body(10)).await.unwrap();
        assert_eq!(status, 200);
        let (status, _, _) = fetch(&mut c, post(10, len(11)), body(11)).await.unwrap();
        assert_eq!(status, 413, "declared: {declared}");
    }
    srv.shutdown().await;
}
