//! The engine memoizes whole response heads for responses whose fields are all `'static`
//! (see `HeadMemo` in the worker). These tests vary everything the memo key does not contain,
//! and everything it does, on one connection and one worker, and check every head is still
//! exactly right: a stale `Content-Length`, `Connection` line, status or field would show here.

mod common;
use common::*;
use peregrine_server::{service_fn, Request, Response, Server};
use std::borrow::Cow;

const JSON: &[u8] = b"application/json";

fn start_memo_server() -> peregrine_server::ServerHandle {
    let svc = service_fn(|req: Request| async move {
        let n: usize = req.query().and_then(|q| q.parse().ok()).unwrap_or(0);
        match req.path() {
            // Same 'static fields, body length from the query.
            "/len" => Response::text("x".repeat(n)),
            // Same 'static fields as /len, another status.
            "/created" => Response::text("x".repeat(n)).with_status(201),
            // Other 'static fields.
            "/json" => Response::new(200)
                .with_header("Content-Type", JSON)
                .with_body(peregrine_server::ResponseBody::Full("{}".into())),
            // 'static fields that ask to close.
            "/close" => Response::text("bye").with_header("Connection", b"close".as_slice()),
            // The same name and value as /json, but owned: never memoized, same bytes.
            "/owned" => Response::new(200)
                .with_header(
                    Cow::Owned("Content-Type".to_string()),
                    Cow::Owned(JSON.to_vec()),
                )
                .with_body(peregrine_server::ResponseBody::Full("{}".into())),
            // Two 'static bodies of the same length under the same 'static fields: the memo
            // keeps the first with its head, and must send the other one's own bytes.
            "/static-a" => Response::text("aaaa"),
            "/static-b" => Response::text("bbbb"),
            // A 'static body and a 204, which must carry no body even where the memo keeps one.
            "/static-204" => Response::text("cccc").with_status(204),
            // A 'static value that must be refused every time, memo or not.
            "/bad" => Response::text("no").with_header("X-Bad", b"a\r\nInjected: 1".as_slice()),
            _ => Response::new(404),
        }
    });
    Server::new(config()).serve(svc).expect("serve")
}

#[test]
fn memoized_heads_follow_body_length_status_and_fields() {
    let h = start_memo_server();
    let mut c = Client::new(h.local_addr());
    // Pipelined and one by one, lengths alternating so every other head differs only in
    // Content-Length from the memoized one.
    let lengths = [0usize, 5, 5, 12, 0, 123, 5, 1000, 5];
    let mut batch = Vec::new();
    for n in lengths {
        batch.extend(get(&format!("/len?{n}")));
    }
    c.send(&batch);
    for n in lengths {
        let r = c.read_response();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(n.to_string().as_str()));
        assert_eq!(r.body.len(), n);
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert!(!r.closes());
    }
    for _ in 0..3 {
        for (path, status, ct, body) in [
            ("/created?2", 201, "text/plain; charset=utf-8", "xx"),
            ("/len?2", 200, "text/plain; charset=utf-8", "xx"),
            ("/json", 200, "application/json", "{}"),
            ("/owned", 200, "application/json", "{}"),
        ] {
            c.send(&get(path));
            let r = c.read_response();
            assert_eq!(r.status, status, "{path}");
            assert_eq!(r.header("content-type"), Some(ct), "{path}");
            assert_eq!(r.body_str(), body, "{path}");
            // Exactly one of each engine-owned field, whatever the memo did.
            for name in ["content-type", "content-length", "date", "server"] {
                let count = r
                    .headers
                    .iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                    .count();
                assert_eq!(count, 1, "{path}: {name} in {:?}", r.headers);
            }
        }
    }
    h.shutdown();
}

#[test]
fn memoized_heads_follow_the_connection_line() {
    let h = start_memo_server();
    let addr = h.local_addr();
    let mut c = Client::new(addr);
    // HTTP/1.1 keep-alive (no Connection line), HTTP/1.0 keep-alive (`keep-alive`), then
    // HTTP/1.1 again: same status, fields and length each time.
    c.send(&get("/len?3"));
    assert_eq!(c.read_response().header("connection"), None);
    c.send(b"GET /len?3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().header("connection"), Some("keep-alive"));
    c.send(&get("/len?3"));
    assert_eq!(c.read_response().header("connection"), None);
    // The client asks to close: the memoized head must not be reused as is.
    c.send(b"GET /len?3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let r = c.read_response();
    assert!(r.closes());
    assert!(c.at_eof());
    // Fields asking to close close the connection on a memo miss and on a hit alike.
    for _ in 0..3 {
        let mut c = Client::new(addr);
        c.send(&get("/close"));
        let r = c.read_response();
        assert_eq!(r.body_str(), "bye");
        assert!(r.closes());
        assert!(c.at_eof());
    }
    h.shutdown();
}

#[test]
fn invalid_static_fields_are_refused_every_time() {
    let h = start_memo_server();
    for _ in 0..3 {
        let mut c = Client::new(h.local_addr());
        c.send(&get("/bad"));
        let r = c.read_response();
        assert_eq!(r.status, 500);
        assert!(r.header("x-bad").is_none() && r.header("injected").is_none());
        assert!(r.closes());
    }
    h.shutdown();
}

#[test]
fn static_bodies_kept_with_memoized_heads_stay_exact() {
    let h = start_memo_server();
    let mut c = Client::new(h.local_addr());
    let head = |path: &str| format!("HEAD {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes();
    // Pipelined, then one by one: the two bodies alternate, HEAD requests (head only, same
    // Content-Length) and a 204 in between, and a body of another length under the same fields.
    let order: [(&str, &str); 9] = [
        ("GET", "/static-a"),
        ("GET", "/static-b"),
        ("HEAD", "/static-a"),
        ("GET", "/static-a"),
        ("GET", "/static-204"),
        ("HEAD", "/static-b"),
        ("GET", "/len?4"),
        ("GET", "/static-b"),
        ("GET", "/static-a"),
    ];
    for pipelined in [true, false] {
        let mut batch = Vec::new();
        for (method, path) in order {
            let req = if method == "HEAD" {
                head(path)
            } else {
                get(path)
            };
            if pipelined {
                batch.extend(req);
            } else {
                c.send(&req);
                check_static(&mut c, method, path);
            }
        }
        if pipelined {
            c.send(&batch);
            for (method, path) in order {
                check_static(&mut c, method, path);
            }
        }
    }
    // The connection is still in step: nothing extra was sent.
    c.send(&get("/static-a"));
    assert_eq!(c.read_response().body_str(), "aaaa");
    h.shutdown();
}

fn check_static(c: &mut Client, method: &str, path: &str) {
    let r = c.read_response_for(method).expect("a response");
    let (status, body) = match path {
        "/static-a" => (200, "aaaa"),
        "/static-b" => (200, "bbbb"),
        "/static-204" => (204, ""),
        _ => (200, "xxxx"),
    };
    assert_eq!(r.status, status, "{method} {path}");
    if status == 204 {
        assert_eq!(r.header("content-length"), None, "{method} {path}");
    } else {
        assert_eq!(r.header("content-length"), Some("4"), "{method} {path}");
    }
    let expected = if method == "HEAD" { "" } else { body };
    assert_eq!(r.body_str(), expected, "{method} {path}");
}
