//! Middleware through real sockets: order, short-circuit, group scoping, and the shipped
//! layers (request id, CORS, timeout, compression).

mod common;
use common::{gunzip, request, TestServer};
use peregrine::middleware::{
    from_fn, Compression, Cors, Hook, Next, RequestId, RequestIdLayer, Timeout,
};
use peregrine::{get, App, Error, IntoResponse, Json, Request, Response, Router};
use std::io::Read;
use std::time::Duration;

/// Records its name on the way in (request extension) and on the way out (response header).
fn tracer(name: &'static str) -> impl peregrine::middleware::Middleware {
    from_fn(move |mut req: Request, next: Next| async move {
        let mut seen = req
            .extension::<Vec<&'static str>>()
            .cloned()
            .unwrap_or_default();
        seen.push(name);
        req.insert_extension(seen);
        let mut res = next.run(req).await;
        res.headers
            .push(("x-out".into(), name.as_bytes().to_vec().into()));
        res
    })
}

async fn show_trail(req: Request) -> String {
    req.extension::<Vec<&'static str>>()
        .map(|v| v.join(">"))
        .unwrap_or_default()
}

#[test]
fn onion_order_and_group_scoping() {
    let group = Router::new()
        .route("/inner", get(show_trail))
        .layer(tracer("group-a"))
        .layer(tracer("group-b"));
    let app = App::new()
        .route("/plain", get(show_trail))
        .route("/route", get(show_trail).layer(tracer("route")))
        .merge(group)
        .layer(tracer("app-1"))
        .layer(tracer("app-2"));
    let s = TestServer::start(app);

    // Last added = outermost: in app-2, app-1, group-b, group-a; out in reverse.
    let r = s.get("/inner", &[]);
    assert_eq!(r.text(), "app-2>app-1>group-b>group-a");
    assert_eq!(
        r.header_all("x-out"),
        ["group-a", "group-b", "app-1", "app-2"]
    );

    // Group layers do not touch other routes; app layers do.
    let r = s.get("/plain", &[]);
    assert_eq!(r.text(), "app-2>app-1");
    let r = s.get("/route", &[]);
    assert_eq!(r.text(), "app-2>app-1>route");

    // App-wide layers also see 404s and 405s (routing already happened).
    let r = s.get("/missing", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header_all("x-out"), ["app-1", "app-2"]);
}

#[test]
fn short_circuit_and_route_visible_to_layers() {
    let guard = from_fn(|req: Request, next: Next| async move {
        if req.header("authorization") != Some("Bearer ok") {
            return Error::unauthorized()
                .with_header("www-authenticate", &b"Bearer"[..])
                .into_response();
        }
        next.run(req).await
    });
    let route_tag = from_fn(|req: Request, next: Next| async move {
        let route = req.route().unwrap_or("none").to_owned();
        let mut res: Response = next.run(req).await;
        res.headers
            .push(("x-route".into(), route.into_bytes().into()));
        res
    });
    let app = App::new()
        .route("/secret/{id}", get(|_r: Request| async { "treasure" }))
        .layer(guard)
        .layer(route_tag);
    let s = TestServer::start(app);
    let r = s.get("/secret/1", &[]);
    r.assert_problem(401, "Unauthorized");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(r.header("x-route"), Some("/secret/{id}"));
    let r = s.get("/secret/1", &["Authorization: Bearer ok"]);
    assert_eq!((r.status, r.text()), (200, "treasure"));
}

#[test]
fn request_id_generated_propagated_and_visible() {
    let app = App::new()
        .route(
            "/id",
            get(|req: Request| async move {
                req.extension::<RequestId>()
                    .map(|i| i.as_str().to_owned())
                    .unwrap_or_default()
            }),
        )
        .layer(RequestIdLayer::new());
    let s = TestServer::start(app);
    let a = s.get("/id", &[]);
    let b = s.get("/id", &[]);
    let ida = a.header("x-request-id").unwrap();
    assert_eq!(ida.len(), 24);
    assert_eq!(a.text(), ida, "handler sees the same id");
    assert_ne!(ida, b.header("x-request-id").unwrap());
    let r = s.get("/id", &["X-Request-Id: trace-123"]);
    assert_eq!(
        (r.text(), r.header("x-request-id")),
        ("trace-123", Some("trace-123"))
    );
    // An unusable incoming id is replaced.
    let r = s.get("/id", &[&format!("X-Request-Id: {}", "x".repeat(200))]);
    assert_eq!(r.header("x-request-id").unwrap().len(), 24);
}

#[test]
fn cors_preflight_and_simple_requests() {
    let cors = Cors::new()
        .allow_origin("https://app.example")
        .allow_methods(["GET", "POST"])
        .allow_credentials(true)
        .expose_headers(["x-total"])
        .max_age(600);
    let app = App::new()
        .route("/data", get(|_r: Request| async { "d" }))
        .layer(cors);
    let s = TestServer::start(app);

    let r = s.send(&request(
        "OPTIONS",
        "/data",
        &[
            "Origin: https://app.example",
            "Access-Control-Request-Method: POST",
            "Access-Control-Request-Headers: content-type, x-custom",
        ],
        "",
    ));
    assert_eq!(r.status, 204);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST"));
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("content-type, x-custom")
    );
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    assert_eq!(r.header("access-control-max-age"), Some("600"));

    let r = s.get("/data", &["Origin: https://app.example"]);
    assert_eq!(r.text(), "d");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(r.header("access-control-expose-headers"), Some("x-total"));
    assert!(r.header_all("vary").contains(&"Origin"));

    // Another origin: no CORS grant; its preflight reaches the app (automatic OPTIONS).
    let r = s.get("/data", &["Origin: https://evil.example"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    let r = s.send(&request(
        "OPTIONS",
        "/data",
        &[
            "Origin: https://evil.example",
            "Access-Control-Request-Method: POST",
        ],
        "",
    ));
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));

    // Without Origin, nothing CORS is added.
    let r = s.get("/data", &[]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn cors_wildcard() {
    let app = App::new()
        .route("/x", get(|_r: Request| async { "x" }))
        .layer(Cors::new());
    let s = TestServer::start(app);
    let r = s.get("/x", &["Origin: https://anyone.example"]);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
}

#[test]
fn timeout_answers_503_and_fast_requests_pass() {
    let app = App::new()
        .route(
            "/slow",
            get(|_r: Request| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "too late"
            }),
        )
        .route("/fast", get(|_r: Request| async { "quick" }))
        .layer(Timeout::new(Duration::from_millis(100)));
    let s = TestServer::start(app);
    let j = s
        .get("/slow", &[])
        .assert_problem(503, "Service Unavailable");
    assert!(
        j.get("detail").is_none(),
        "5xx answers carry no detail: {j}"
    );
    assert_eq!(s.get("/fast", &[]).text(), "quick");

    let app = App::new().route(
        "/slow",
        get(|_r: Request| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "too late"
        })
        .layer(Timeout::new(Duration::from_millis(50)).with_status(504)),
    );
    let s = TestServer::start(app);
    s.get("/slow", &[]).assert_problem(504, "Gateway Timeout");
}

fn big_text() -> String {
    "The peregrine falcon is the fastest member of the animal kingdom. ".repeat(40)
}

fn compression_app() -> App {
    App::new()
        .route("/big", get(|_r: Request| async { big_text() }))
        .route("/small", get(|_r: Request| async { "tiny" }))
        .route(
            "/json",
            get(|_r: Request| async {
                Json(serde_json::json!({ "items": vec!["alpha-beta-gamma"; 200] }))
            }),
        )
        .route(
            "/png",
            get(|_r: Request| async { (200, [("content-type", "image/png")], vec![7u8; 5000]) }),
        )
        .route(
            "/no-transform",
            get(|_r: Request| async { (200, [("cache-control", "no-transform")], big_text()) }),
        )
        .route(
            "/etag",
            get(|_r: Request| async { (200, [("etag", "\"v1\"")], big_text()) }),
        )
        .layer(Compression::new())
}

fn unbrotli(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(b, 4096)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn compression_negotiation() {
    let s = TestServer::start(compression_app());
    let text = big_text().into_bytes();

    let r = s.get("/big", &["Accept-Encoding: gzip, deflate, br"]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert!(r.body.len() < text.len() / 4);
    assert_eq!(unbrotli(&r.body), text);
    assert_eq!(
        r.header("content-length").unwrap(),
        r.body.len().to_string()
    );

    let r = s.get("/big", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&r.body), text);

    let r = s.get("/big", &["Accept-Encoding: br;q=0.2, gzip;q=0.9"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let r = s.get("/big", &["Accept-Encoding: br;q=0, gzip;q=0"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, text);
    let r = s.get("/big", &["Accept-Encoding: identity"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(
        r.header("vary"),
        Some("Accept-Encoding"),
        "identity answer still varies"
    );

    // No Accept-Encoding: identity.
    let r = s.get("/big", &[]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, text);
}

#[test]
fn compression_skips_small_incompressible_and_no_transform() {
    let s = TestServer::start(compression_app());
    let ae = ["Accept-Encoding: gzip, br"];
    let r = s.get("/small", &ae);
    assert_eq!((r.header("content-encoding"), r.text()), (None, "tiny"));
    let r = s.get("/png", &ae);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("vary"), None);
    assert_eq!(r.body.len(), 5000);
    let r = s.get("/no-transform", &ae);
    assert_eq!(r.header("content-encoding"), None);
    let r = s.get("/json", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let v: serde_json::Value = serde_json::from_slice(&gunzip(&r.body)).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 200);
    // A strong ETag becomes weak on the compressed variant, stays strong on identity.
    assert_eq!(s.get("/etag", &ae).header("etag"), Some("W/\"v1\""));
    assert_eq!(s.get("/etag", &[]).header("etag"), Some("\"v1\""));
}

/// A hook that records like `tracer`, and answers 403 in `before` when asked to.
struct HookTracer {
    name: &'static str,
    refuse: bool,
}

impl Hook for HookTracer {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        let mut seen = req
            .extension::<Vec<&'static str>>()
            .cloned()
            .unwrap_or_default();
        seen.push(self.name);
        req.insert_extension(seen);
        if self.refuse && req.header("x-refuse") == Some(self.name) {
            return Err(Error::forbidden().into_response());
        }
        Ok(())
    }
    fn after(&self, res: &mut Response) {
        res.headers
            .push(("x-out".into(), self.name.as_bytes().to_vec().into()));
    }
}

fn hook(name: &'static str) -> HookTracer {
    HookTracer { name, refuse: true }
}

#[test]
fn hooks_and_async_layers_nest_in_declaration_order() {
    let group = Router::new()
        .route("/g", get(show_trail).hook(hook("route-h")))
        .hook(hook("group-h1"))
        .layer(tracer("group-a"))
        .hook(hook("group-h2"));
    let app = App::new()
        .route("/plain", get(show_trail))
        .merge(group)
        .hook(hook("app-h1"))
        .hook(hook("app-h2"))
        .layer(tracer("app-a"));
    let s = TestServer::start(app);

    let r = s.get("/g", &[]);
    assert_eq!(
        r.text(),
        "app-a>app-h2>app-h1>group-h2>group-a>group-h1>route-h"
    );
    assert_eq!(
        r.header_all("x-out"),
        ["route-h", "group-h1", "group-a", "group-h2", "app-h1", "app-h2", "app-a"]
    );
    assert_eq!(s.get("/plain", &[]).text(), "app-a>app-h2>app-h1");
    // App-wide hooks see 404s.
    let r = s.get("/nope", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header_all("x-out"), ["app-h1", "app-h2", "app-a"]);
}

#[test]
fn hook_short_circuit_skips_inner_layers_only() {
    let app = App::new()
        .route(
            "/x",
            get(|_r: Request| async { "handler ran" }).hook(hook("inner")),
        )
        .hook(hook("mid"))
        .hook(hook("outer"));
    let s = TestServer::start(app);
    // "mid" refuses: "inner" and the handler do not run; "mid" itself and "outer" see the
    // answer on the way out only if they are outside the one that answered.
    let r = s.get("/x", &["X-Refuse: mid"]);
    r.assert_problem(403, "Forbidden");
    assert_eq!(r.header_all("x-out"), ["outer"]);
    let r = s.get("/x", &["X-Refuse: inner"]);
    r.assert_problem(403, "Forbidden");
    assert_eq!(r.header_all("x-out"), ["mid", "outer"]);
    let r = s.get("/x", &[]);
    assert_eq!(r.text(), "handler ran");
    assert_eq!(r.header_all("x-out"), ["inner", "mid", "outer"]);
}
