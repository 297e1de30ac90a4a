//! Request extraction through real sockets: query, headers, cookies, peer, state, and bodies
//! as bytes/text/JSON/form with their 400/413/415 answers.

mod common;
use common::{request, TestServer};
use peregrine::{get, post, App, Error, Json, Request};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Serialize, Deserialize)]
struct Search {
    q: String,
    limit: u32,
    #[serde(default)]
    tags: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct NewUser {
    name: String,
    age: u8,
}

struct Counter(AtomicU64);
struct Greeting(&'static str);

/// Streaming read: chunk sizes as they come, never the whole body in memory; `?` turns the
/// limit into the 413 problem document.
async fn stream_upload(mut req: Request) -> Result<String, Error> {
    let (mut total, mut pieces) = (0usize, 0usize);
    while let Some(chunk) = req.body_mut().chunk().await? {
        total += chunk.len();
        pieces += 1;
    }
    Ok(format!("{total} {pieces}"))
}

fn app() -> App {
    App::new()
        .with_state(Counter(AtomicU64::new(0)))
        .with_state(Greeting("hi"))
        .body_limit(64)
        .route(
            "/search",
            get(|req: Request| async move { Ok::<_, Error>(Json(req.query::<Search>()?)) }),
        )
        .route(
            "/header",
            get(|req: Request| async move {
                format!(
                    "{}|{}",
                    req.header("x-thing").unwrap_or("-"),
                    req.header("X-THING").unwrap_or("-")
                )
            }),
        )
        .route(
            "/cookie",
            get(|req: Request| async move {
                format!(
                    "{}|{}",
                    req.cookie("sid").unwrap_or("-"),
                    req.cookie("theme").unwrap_or("-")
                )
            }),
        )
        .route(
            "/peer",
            get(|req: Request| async move { req.peer_addr().ip().to_string() }),
        )
        .route(
            "/state",
            get(|req: Request| async move {
                let n = req.state::<Counter>()?.0.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Error>(format!("{} {n}", req.state::<Greeting>()?.0))
            }),
        )
        .route(
            "/missing-state",
            get(|req: Request| async move { req.state::<String>().cloned() }),
        )
        .route(
            "/bytes",
            post(|mut req: Request| async move {
                req.bytes().await.map(|b| format!("{} bytes", b.len()))
            }),
        )
        .route(
            "/small",
            post(|mut req: Request| async move {
                req.bytes_limited(4)
                    .await
                    .map(|b| format!("{} bytes", b.len()))
            }),
        )
        .route(
            "/text",
            post(|mut req: Request| async move { req.text().await }),
        )
        .route(
            "/json",
            post(|mut req: Request| async move {
                let u: NewUser = req.json().await?;
                Ok::<_, Error>((201, Json(u)))
            }),
        )
        // Streaming reads: held to the app's limit (64), or to the route's own.
        .route("/upload", post(stream_upload))
        .route("/upload/big", post(stream_upload).body_limit(300_000))
        .route("/upload/any", post(stream_upload).no_body_limit())
        .route("/upload/small", post(stream_upload).body_limit(4))
        .route(
            "/bytes/big",
            post(|mut req: Request| async move {
                Ok::<_, Error>(format!("{} bytes", req.bytes().await?.len()))
            })
            .body_limit(1000),
        )
        .route(
            "/form",
            post(|mut req: Request| async move {
                let u: NewUser = req.form().await?;
                Ok::<_, Error>(format!("{} is {}", u.name, u.age))
            }),
        )
}

#[test]
fn typed_query() {
    let s = TestServer::start(app());
    let r = s.get("/search?q=peregrine%20falcon&limit=10", &[]);
    assert_eq!(
        r.json(),
        serde_json::json!({"q": "peregrine falcon", "limit": 10, "tags": null})
    );
    let r = s.get("/search?limit=3&q=a+b&tags=x%2Cy", &[]);
    assert_eq!(
        r.json(),
        serde_json::json!({"q": "a b", "limit": 3, "tags": "x,y"})
    );

    let j = s
        .get("/search?q=x&limit=ten", &[])
        .assert_problem(400, "Bad Request");
    assert_eq!(
        j["detail"],
        "invalid query string: invalid digit found in string"
    );
    let j = s
        .get("/search?limit=1", &[])
        .assert_problem(400, "Bad Request");
    assert_eq!(j["detail"], "invalid query string: missing field `q`");
    let j = s.get("/search", &[]).assert_problem(400, "Bad Request");
    assert_eq!(j["detail"], "invalid query string: missing field `q`");
}

#[test]
fn headers_cookies_peer() {
    let s = TestServer::start(app());
    assert_eq!(s.get("/header", &["X-Thing: abc"]).text(), "abc|abc");
    assert_eq!(s.get("/header", &[]).text(), "-|-");
    assert_eq!(
        s.get("/cookie", &["Cookie: theme=dark; sid=\"s3cr3t\""])
            .text(),
        "s3cr3t|dark"
    );
    assert_eq!(s.get("/cookie", &["Cookie: other=1"]).text(), "-|-");
    assert_eq!(s.get("/peer", &[]).text(), "127.0.0.1");
}

#[test]
fn state_is_shared_between_requests_and_typed() {
    let s = TestServer::start(app());
    assert_eq!(s.get("/state", &[]).text(), "hi 0");
    assert_eq!(s.get("/state", &[]).text(), "hi 1");
    // An unregistered type is a server bug: 500, and the type name does not leak.
    let j = s
        .get("/missing-state", &[])
        .assert_problem(500, "Internal Server Error");
    assert_eq!(j.as_object().unwrap().len(), 3, "{j}");
}

#[test]
fn bytes_and_limits() {
    let s = TestServer::start(app());
    assert_eq!(
        s.send(&request("POST", "/bytes", &[], "hello")).text(),
        "5 bytes"
    );
    assert_eq!(
        s.send(&request("POST", "/bytes", &[], "")).text(),
        "0 bytes"
    );
    // App body limit is 64.
    let r = s.send(&request("POST", "/bytes", &[], &"x".repeat(65)));
    let j = r.assert_problem(413, "Content Too Large");
    assert_eq!(j["detail"], "request body exceeds the size limit");
    // Per-call limit.
    assert_eq!(
        s.send(&request("POST", "/small", &[], "abcd")).text(),
        "4 bytes"
    );
    s.send(&request("POST", "/small", &[], "abcde"))
        .assert_problem(413, "Content Too Large");
    // Chunked body over the limit.
    let chunked = "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
    s.send(chunked).assert_problem(413, "Content Too Large");
    let chunked = "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n";
    assert_eq!(s.send(chunked).text(), "3 bytes");
}

#[test]
fn the_app_body_limit_is_the_one_limit_when_set() {
    // One limit: App::body_limit (64 here) wins over the engine's max_body_size,
    // which the framework lifts; past it the framework answers with problem+json.
    let s = TestServer::start_with(app(), |c| c.server.limits.max_body_size = 10);
    let r = s.send(&request("POST", "/bytes", &[], &"x".repeat(11)));
    assert_eq!(r.text(), "11 bytes");
    let r = s.send(&request("POST", "/bytes", &[], &"x".repeat(65)));
    r.assert_problem(413, "Content Too Large");
}

#[test]
fn text_must_be_utf8() {
    let s = TestServer::start(app());
    assert_eq!(
        s.send(&request("POST", "/text", &[], "héllo")).text(),
        "héllo"
    );
    let mut raw = b"POST /text HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n".to_vec();
    raw.extend_from_slice(&[0xff, 0xfe]);
    let j = s.send_bytes(&raw, false).assert_problem(400, "Bad Request");
    assert_eq!(j["detail"], "request body is not valid UTF-8");
}

#[test]
fn json_bodies() {
    let s = TestServer::start(app());
    let ct = ["Content-Type: application/json"];
    let r = s.send(&request("POST", "/json", &ct, r#"{"name":"Ada","age":36}"#));
    assert_eq!(r.status, 201);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json(), serde_json::json!({"name": "Ada", "age": 36}));
    // Parameters and +json types are fine.
    let r = s.send(&request(
        "POST",
        "/json",
        &["Content-Type: application/vnd.api+json; charset=utf-8"],
        r#"{"name":"B","age":1}"#,
    ));
    assert_eq!(r.status, 201);

    let j = s
        .send(&request(
            "POST",
            "/json",
            &["Content-Type: text/plain"],
            "{}",
        ))
        .assert_problem(415, "Unsupported Media Type");
    assert_eq!(j["detail"], "expected content type application/json");
    s.send(&request("POST", "/json", &[], "{}"))
        .assert_problem(415, "Unsupported Media Type");

    let j = s
        .send(&request("POST", "/json", &ct, r#"{"name":"Ada","#))
        .assert_problem(400, "Bad Request");
    assert!(
        j["detail"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON body: EOF while parsing"),
        "{j}"
    );
    let j = s
        .send(&request(
            "POST",
            "/json",
            &ct,
            r#"{"name":"Ada","age":300}"#,
        ))
        .assert_problem(400, "Bad Request");
    assert!(
        j["detail"]
            .as_str()
            .unwrap()
            .contains("invalid value: integer `300`"),
        "{j}"
    );
    let j = s
        .send(&request("POST", "/json", &ct, r#"{"name":"Ada"}"#))
        .assert_problem(400, "Bad Request");
    assert!(
        j["detail"]
            .as_str()
            .unwrap()
            .contains("missing field `age`"),
        "{j}"
    );
    let big = format!(r#"{{"name":"{}","age":1}}"#, "x".repeat(100));
    s.send(&request("POST", "/json", &ct, &big))
        .assert_problem(413, "Content Too Large");
}

#[test]
fn form_bodies() {
    let s = TestServer::start(app());
    let ct = ["Content-Type: application/x-www-form-urlencoded"];
    let r = s.send(&request(
        "POST",
        "/form",
        &ct,
        "name=Ada+L%C3%B6velace&age=36",
    ));
    assert_eq!(r.text(), "Ada Lövelace is 36");
    s.send(&request(
        "POST",
        "/form",
        &["Content-Type: application/json"],
        "name=a&age=1",
    ))
    .assert_problem(415, "Unsupported Media Type");
    let j = s
        .send(&request("POST", "/form", &ct, "name=Ada&age=old"))
        .assert_problem(400, "Bad Request");
    assert!(
        j["detail"]
            .as_str()
            .unwrap()
            .starts_with("invalid form body"),
        "{j}"
    );
}

#[test]
fn streaming_upload_reads_every_byte_up_to_the_limit() {
    let s = TestServer::start(app());
    // Split "total pieces": how the bytes were cut into pieces depends on the network.
    let read = |r: common::Resp| -> (usize, usize) {
        let (a, b) = r.text().split_once(' ').unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    // Under the app's limit (64): every byte.
    let (total, pieces) = read(s.send(&request("POST", "/upload", &[], &"y".repeat(64))));
    assert_eq!(total, 64);
    assert!(pieces >= 1);
    let chunked = "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    assert_eq!(read(s.send(chunked)).0, 11);
    assert_eq!(read(s.send(&request("POST", "/upload", &[], ""))), (0, 0));
    // A route with its own larger limit, and one without a limit, read far past the app's.
    let body = "y".repeat(200_000);
    assert_eq!(
        read(s.send(&request("POST", "/upload/big", &[], &body))).0,
        200_000
    );
    assert_eq!(
        read(s.send(&request("POST", "/upload/any", &[], &body))).0,
        200_000
    );
    // bytes() on a route with its own limit: that limit, not the app's.
    let r = s.send(&request("POST", "/bytes/big", &[], &"x".repeat(1000)));
    assert_eq!(r.text(), "1000 bytes");
    s.send(&request("POST", "/bytes/big", &[], &"x".repeat(1001)))
        .assert_problem(413, "Content Too Large");
}

#[test]
fn streaming_upload_stops_at_the_limit_with_a_problem_413() {
    let s = TestServer::start(app());
    // A declared length past the limit: refused before a byte is read.
    let j = s
        .send(&request("POST", "/upload", &[], &"y".repeat(65)))
        .assert_problem(413, "Content Too Large");
    assert_eq!(j["detail"], "request body exceeds the size limit");
    s.send(&request("POST", "/upload/big", &[], &"y".repeat(300_001)))
        .assert_problem(413, "Content Too Large");
    // A route may also lower it.
    s.send(&request("POST", "/upload/small", &[], "12345"))
        .assert_problem(413, "Content Too Large");
    assert_eq!(
        s.send(&request("POST", "/upload/small", &[], "1234"))
            .text(),
        "4 1"
    );
    // Chunked, no length: the piece that crosses the limit fails the stream.
    let mut chunked =
        String::from("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for _ in 0..5 {
        chunked.push_str("14\r\n"); // 20 bytes each, 100 in all
        chunked.push_str(&"z".repeat(20));
        chunked.push_str("\r\n");
    }
    chunked.push_str("0\r\n\r\n");
    s.send(&chunked).assert_problem(413, "Content Too Large");
}

#[tokio::test]
async fn the_raw_stream_limit_holds_in_the_test_client_too() {
    let c = app().test();
    let r = c.post("/upload").body("y".repeat(65)).send().await;
    assert_eq!(r.status(), 413);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let r = c.post("/upload/big").body("y".repeat(65)).send().await;
    assert_eq!(r.text(), "65 1");
}
