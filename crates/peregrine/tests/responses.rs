//! Responses and errors through real sockets: text/bytes/JSON/HTML, status and headers,
//! redirects, streaming, problem documents, and panics answered with 500 while serving goes on.

mod common;
use common::{request, TestServer};
use peregrine::cookie::{SameSite, SetCookie};
use peregrine::middleware::{from_fn, Next};
use peregrine::{
    get, App, Error, Html, IntoResponse, Json, Redirect, Request, Response, StreamBody,
};
use std::time::Duration;

fn app() -> App {
    App::new()
        .route("/text", get(|_r: Request| async { "plain" }))
        .route(
            "/string",
            get(|_r: Request| async { String::from("owned") }),
        )
        .route("/bytes", get(|_r: Request| async { vec![0u8, 1, 2, 255] }))
        .route("/html", get(|_r: Request| async { Html("<p>hi</p>") }))
        .route(
            "/json",
            get(|_r: Request| async { Json(serde_json::json!({"a": [1, 2]})) }),
        )
        .route(
            "/created",
            get(|_r: Request| async { (201, [("location", "/things/1")], "made") }),
        )
        .route("/unit", get(|_r: Request| async {}))
        .route(
            "/teapot",
            get(|_r: Request| async { Response::new(418).with_header("x-kind", &b"tea"[..]) }),
        )
        .route(
            "/redirect",
            get(|_r: Request| async { Redirect::permanent("/new") }),
        )
        .route(
            "/see-other",
            get(|_r: Request| async { Redirect::see_other("/done") }),
        )
        .route(
            "/stream",
            get(|_r: Request| async {
                let (tx, body) = StreamBody::channel(2);
                tokio::spawn(async move {
                    for i in 0..5 {
                        tx.send(format!("part {i}\n")).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                });
                body.content_type("text/plain; charset=utf-8")
            }),
        )
        .route(
            "/error/internal",
            get(|_r: Request| async {
                let _n: u32 = "not a number".parse()?; // std error -> 500
                Ok::<_, Error>("unreachable")
            }),
        )
        .route(
            "/error/custom",
            get(|_r: Request| async {
                Err::<(), _>(
                    Error::new(409)
                        .with_title("Version Conflict")
                        .with_detail("etag mismatch"),
                )
            }),
        )
        .route(
            "/error/internal-detail",
            get(|_r: Request| async {
                Err::<(), _>(Error::internal().with_detail("password=hunter2 at db.internal:5432"))
            }),
        )
        .route(
            "/panic",
            get(|_r: Request| async {
                if true {
                    panic!("handler bug with secret /etc/shadow");
                }
                "never"
            }),
        )
        .route(
            "/panic-after-await",
            get(|_r: Request| async {
                tokio::task::yield_now().await;
                let v: Vec<u8> = Vec::new();
                #[allow(clippy::out_of_bounds_indexing)]
                let x = v[3];
                format!("{x}")
            }),
        )
        .route("/ok", get(|_r: Request| async { "still serving" }))
        .route(
            "/login",
            get(|req: Request| async move {
                let who = req.cookie("sid").unwrap_or("nobody").to_owned();
                let set = SetCookie::new("sid", "abc123")
                    .path("/")
                    .http_only(true)
                    .same_site(SameSite::Lax);
                Ok::<_, Error>(Response::text(who).with_header("set-cookie", set.to_header()?))
            }),
        )
        .route(
            "/bad-cookie",
            get(|_r: Request| async {
                let set = SetCookie::new("sid", "a;b");
                Ok::<_, Error>(Response::new(204).with_header("set-cookie", set.to_header()?))
            }),
        )
        .route(
            "/unserializable",
            get(|_r: Request| async {
                // JSON object keys must be strings: serialisation fails at run time.
                let mut m = std::collections::BTreeMap::new();
                m.insert(vec![1u8], 1);
                Json(m)
            }),
        )
}

#[test]
fn body_kinds_and_content_types() {
    let s = TestServer::start(app());
    let r = s.get("/text", &[]);
    assert_eq!(
        (r.status, r.header("content-type"), r.text()),
        (200, Some("text/plain; charset=utf-8"), "plain")
    );
    assert_eq!(s.get("/string", &[]).text(), "owned");
    let r = s.get("/bytes", &[]);
    assert_eq!(
        (r.header("content-type"), &r.body[..]),
        (Some("application/octet-stream"), &[0u8, 1, 2, 255][..])
    );
    assert_eq!(
        s.get("/html", &[]).header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let r = s.get("/json", &[]);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json(), serde_json::json!({"a": [1, 2]}));
    let r = s.get("/created", &[]);
    assert_eq!(
        (r.status, r.header("location"), r.text()),
        (201, Some("/things/1"), "made")
    );
    let r = s.get("/unit", &[]);
    assert_eq!((r.status, r.header("content-length")), (200, Some("0")));
    let r = s.get("/teapot", &[]);
    assert_eq!((r.status, r.header("x-kind")), (418, Some("tea")));
}

#[test]
fn redirects() {
    let s = TestServer::start(app());
    let r = s.get("/redirect", &[]);
    assert_eq!((r.status, r.header("location")), (308, Some("/new")));
    let r = s.get("/see-other", &[]);
    assert_eq!((r.status, r.header("location")), (303, Some("/done")));
}

#[test]
fn streaming_body_is_chunked() {
    let s = TestServer::start(app());
    let r = s.get("/stream", &[]);
    assert!(r.chunked, "headers: {:?}", r.headers);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.text(), "part 0\npart 1\npart 2\npart 3\npart 4\n");
}

#[test]
fn errors_are_problem_documents_without_internals() {
    let s = TestServer::start(app());
    let r = s.get("/error/internal", &[]);
    let j = r.assert_problem(500, "Internal Server Error");
    assert_eq!(
        j,
        serde_json::json!({"type": "about:blank", "title": "Internal Server Error", "status": 500})
    );

    let j = s
        .get("/error/custom", &[])
        .assert_problem(409, "Version Conflict");
    assert_eq!(j["detail"], "etag mismatch");

    let r = s.get("/error/internal-detail", &[]);
    r.assert_problem(500, "Internal Server Error");
    assert!(!r.text().contains("hunter2"));
}

#[test]
fn panics_become_500_and_the_worker_keeps_serving() {
    let s = TestServer::start(app());
    for path in ["/panic", "/panic-after-await"] {
        let r = s.get(path, &[]);
        let j = r.assert_problem(500, "Internal Server Error");
        assert_eq!(j.as_object().unwrap().len(), 3);
        assert!(!r.text().contains("shadow"));
        // The single worker is alive.
        assert_eq!(s.get("/ok", &[]).text(), "still serving");
    }
    // And on the same keep-alive connection, the next request is served too.
    let mut c = s.connect();
    c.write(request("GET", "/panic", &[], "").as_bytes());
    assert_eq!(c.read(false).status, 500);
    c.write(request("GET", "/ok", &[], "").as_bytes());
    assert_eq!(c.read(false).text(), "still serving");
}

#[test]
fn panic_in_middleware_is_caught_too() {
    let boom = from_fn(|req: Request, next: Next| async move {
        if req.path() == "/ok" && req.header("x-boom").is_some() {
            panic!("middleware bug");
        }
        next.run(req).await.into_response()
    });
    let s = TestServer::start(app().layer(boom));
    s.get("/ok", &["X-Boom: 1"])
        .assert_problem(500, "Internal Server Error");
    assert_eq!(s.get("/ok", &[]).text(), "still serving");
}

#[test]
fn json_serialisation_failure_is_a_500_problem() {
    let s = TestServer::start(app());
    let j = s
        .get("/unserializable", &[])
        .assert_problem(500, "Internal Server Error");
    assert_eq!(j.as_object().unwrap().len(), 3);
}

#[test]
fn cookies_round_trip_and_invalid_ones_are_refused() {
    let s = TestServer::start(app());
    let r = s.get("/login", &[]);
    assert_eq!(r.text(), "nobody");
    let set = r.header("set-cookie").unwrap();
    assert_eq!(set, "sid=abc123; Path=/; HttpOnly; SameSite=Lax");
    let r = s.get("/login", &["Cookie: sid=abc123"]);
    assert_eq!(r.text(), "abc123");
    let r = s.get("/bad-cookie", &[]);
    r.assert_problem(500, "Internal Server Error");
    assert_eq!(r.header("set-cookie"), None);
}
