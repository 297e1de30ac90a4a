//! Routing through real sockets: static and parameter routes, catch-all, groups, methods,
//! 404/405/HEAD/OPTIONS.

mod common;
use common::{request, TestServer};
use peregrine::{any, delete, get, on, put, App, Error, Request, Router};

async fn echo_route(req: Request) -> String {
    let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "{} {} [{}]",
        req.method(),
        req.route().unwrap_or("-"),
        params.join(",")
    )
}

fn app() -> App {
    let api = Router::new()
        .route("/", get(|_r: Request| async { "api root" }))
        .route("/orgs/{org}/teams/{team}", get(echo_route))
        .nest(
            "/admin",
            Router::new().route("/stats", get(|_r: Request| async { "stats" })),
        );
    App::new()
        .route("/", get(|_r: Request| async { "root" }))
        .route("/users", get(echo_route).post(echo_route))
        .route("/users/me", get(|_r: Request| async { "static wins" }))
        .route(
            "/users/{id}",
            get(echo_route).put(echo_route).delete(echo_route),
        )
        .route("/files/{*path}", get(echo_route))
        .route(
            "/decode/{name}",
            get(|req: Request| async move { req.param_str("name").map(|s| s.into_owned()) }),
        )
        .route(
            "/num/{n}",
            get(|req: Request| async move {
                let n: i64 = req.param("n")?;
                Ok::<_, Error>(format!("{}", n * 2))
            }),
        )
        .route(
            "/dav",
            on("PROPFIND", |_r: Request| async { (207, "multi") }),
        )
        .route("/anything", any(echo_route))
        .route(
            "/explicit-options",
            get(echo_route).options(|_r: Request| async { (200, "mine") }),
        )
        .route(
            "/explicit-head",
            get(|_r: Request| async { "from get" })
                .head(|_r: Request| async { (200, [("x-head", "1")], "") }),
        )
        .nest("/api/v1", api)
}

#[test]
fn static_param_and_priority() {
    let s = TestServer::start(app());
    assert_eq!(s.get("/", &[]).text(), "root");
    assert_eq!(s.get("/users", &[]).text(), "GET /users []");
    assert_eq!(s.get("/users/me", &[]).text(), "static wins");
    assert_eq!(s.get("/users/42", &[]).text(), "GET /users/{id} [id=42]");
    assert_eq!(
        s.get("/users/42/", &[]).status,
        404,
        "trailing slash is another path"
    );
    assert_eq!(s.get("/users/42/x", &[]).status, 404);
}

#[test]
fn catch_all_takes_the_rest() {
    let s = TestServer::start(app());
    assert_eq!(
        s.get("/files/a/b/c.txt", &[]).text(),
        "GET /files/{*path} [path=a/b/c.txt]"
    );
    assert_eq!(s.get("/files/x", &[]).text(), "GET /files/{*path} [path=x]");
    // The bare prefix reaches the catch-all too, with the parameter empty.
    assert_eq!(s.get("/files/", &[]).text(), "GET /files/{*path} [path=]");
    assert_eq!(s.get("/files", &[]).text(), "GET /files/{*path} [path=]");
}

#[test]
fn parameters_are_percent_decoded_and_typed() {
    let s = TestServer::start(app());
    assert_eq!(s.get("/decode/hello%20world", &[]).text(), "hello world");
    assert_eq!(s.get("/decode/caf%C3%A9", &[]).text(), "café");
    // '+' is only a space in query strings, not in paths.
    assert_eq!(s.get("/decode/a+b", &[]).text(), "a+b");
    // An encoded slash is refused unless the app opts in (see `encoded_slashes_opt_in`).
    s.get("/decode/a%2Fb", &[])
        .assert_problem(400, "Bad Request");
    let r = s.get("/decode/%FF", &[]);
    let j = r.assert_problem(400, "Bad Request");
    assert_eq!(j["detail"], "path parameter `name` is not valid UTF-8");

    assert_eq!(s.get("/num/21", &[]).text(), "42");
    assert_eq!(s.get("/num/-4", &[]).text(), "-8");
    let j = s.get("/num/abc", &[]).assert_problem(400, "Bad Request");
    assert_eq!(
        j["detail"],
        "path parameter `n`: invalid digit found in string"
    );
}

#[test]
fn encoded_slashes_opt_in() {
    let s = TestServer::start(app().encoded_slashes(peregrine::path::EncodedSlashes::Keep));
    // The encoded slash stays inside one segment, and the handler decodes it.
    assert_eq!(s.get("/decode/a%2Fb", &[]).text(), "a/b");
    assert_eq!(s.get("/decode/a%2fb", &[]).text(), "a/b");
    assert_eq!(
        s.get("/files/a%2fb/c", &[]).text(),
        "GET /files/{*path} [path=a%2Fb/c]"
    );
    s.get("/decode/a%00b", &[])
        .assert_problem(400, "Bad Request");
}

#[test]
fn paths_are_normalised_before_routing() {
    let s = TestServer::start(app());
    // Unreserved escapes decoded, empty segments merged: the same route as the plain spelling.
    assert_eq!(s.get("/%75sers/%37", &[]).text(), "GET /users/{id} [id=7]");
    assert_eq!(s.get("//users//7", &[]).text(), "GET /users/{id} [id=7]");
    assert_eq!(s.get("/users/m%65", &[]).text(), "static wins");
    // Other escapes stay encoded (hex upper-cased) for the handler to decode once.
    assert_eq!(
        s.get("/files/a%2cb/%c3%a9", &[]).text(),
        "GET /files/{*path} [path=a%2Cb/%C3%A9]"
    );
    assert_eq!(s.get("/decode/caf%c3%a9", &[]).text(), "café");
    // Dot segments are refused, not resolved.
    for p in ["/users/./7", "/users/../users/7", "/users/%2e%2E", "/./"] {
        let j = s.get(p, &[]).assert_problem(400, "Bad Request");
        assert!(j["detail"].as_str().unwrap().contains("'.'"), "{p}");
    }
    // `OPTIONS *` is not a path and passes untouched.
    let r = s.send(&request("OPTIONS", "*", &[], ""));
    assert_eq!(r.status, 204);
}

#[test]
fn exact_static_paths_route_as_the_matcher_does() {
    // Routes without parameters are looked up by exact path before normalising; a pattern
    // that is not canonical as written is left to the matcher, which sees only the
    // normalised path, so its own spelling never reaches it.
    let s = TestServer::start(
        App::new()
            .route("/a//b", get(|_r: Request| async { "doubled" }))
            .route("/%70lain", get(|_r: Request| async { "encoded" }))
            .route("/plain", get(|_r: Request| async { "plain" }))
            .route("/{name}", get(echo_route)),
    );
    assert_eq!(s.get("/plain", &[]).text(), "plain");
    assert_eq!(s.get("/%70lain", &[]).text(), "plain");
    assert_eq!(s.get("/plai", &[]).text(), "GET /{name} [name=plai]");
    assert_eq!(s.get("/a//b", &[]).status, 404);
    assert_eq!(s.get("/a/b", &[]).status, 404);
}

#[test]
fn nested_groups() {
    let s = TestServer::start(app());
    assert_eq!(s.get("/api/v1", &[]).text(), "api root");
    assert_eq!(
        s.get("/api/v1/orgs/7/teams/3", &[]).text(),
        "GET /api/v1/orgs/{org}/teams/{team} [org=7,team=3]"
    );
    assert_eq!(s.get("/api/v1/admin/stats", &[]).text(), "stats");
    assert_eq!(s.get("/api/v2/admin/stats", &[]).status, 404);
}

#[test]
fn per_method_handlers_and_405() {
    let s = TestServer::start(app());
    let r = s.send(&request("POST", "/users", &[], "x"));
    assert_eq!(r.text(), "POST /users []");
    assert_eq!(
        s.send(&request("PUT", "/users/1", &[], "")).text(),
        "PUT /users/{id} [id=1]"
    );
    assert_eq!(
        s.send(&request("DELETE", "/users/1", &[], "")).text(),
        "DELETE /users/{id} [id=1]"
    );

    let r = s.send(&request("PATCH", "/users/1", &[], ""));
    r.assert_problem(405, "Method Not Allowed");
    assert_eq!(r.header("allow"), Some("GET, HEAD, PUT, DELETE, OPTIONS"));
    let r = s.send(&request("POST", "/", &[], ""));
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
}

#[test]
fn unknown_path_is_404_problem() {
    let s = TestServer::start(app());
    let r = s.get("/nowhere", &[]);
    let j = r.assert_problem(404, "Not Found");
    assert_eq!(j.as_object().unwrap().len(), 3, "no detail leaks: {j}");
    // Also for methods no route has.
    assert_eq!(
        s.send(&request("PROPFIND", "/nowhere", &[], "")).status,
        404
    );
}

#[test]
fn extension_methods_and_any() {
    let s = TestServer::start(app());
    let r = s.send(&request("PROPFIND", "/dav", &[], ""));
    assert_eq!((r.status, r.text()), (207, "multi"));
    let r = s.send(&request("GET", "/dav", &[], ""));
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("OPTIONS, PROPFIND"));
    assert_eq!(
        s.send(&request("PATCH", "/anything", &[], "")).text(),
        "PATCH /anything []"
    );
    assert_eq!(
        s.send(&request("BREW", "/anything", &[], "")).text(),
        "BREW /anything []"
    );
}

#[test]
fn head_is_answered_from_get_without_body() {
    let s = TestServer::start(app());
    let get = s.get("/num/21", &[]);
    let head = s.send(&request("HEAD", "/num/21", &[], ""));
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), get.header("content-length"));
    assert_eq!(head.header("content-type"), get.header("content-type"));
    // An explicit HEAD handler wins.
    let r = s.send(&request("HEAD", "/explicit-head", &[], ""));
    assert_eq!(r.header("x-head"), Some("1"));
}

#[test]
fn automatic_and_explicit_options() {
    let s = TestServer::start(app());
    let r = s.send(&request("OPTIONS", "/users/9", &[], ""));
    assert_eq!(r.status, 204);
    assert_eq!(r.header("allow"), Some("GET, HEAD, PUT, DELETE, OPTIONS"));
    assert!(r.body.is_empty());
    let r = s.send(&request("OPTIONS", "/explicit-options", &[], ""));
    assert_eq!((r.status, r.text()), (200, "mine"));
    // OPTIONS on an unknown path is still a 404.
    assert_eq!(s.send(&request("OPTIONS", "/nowhere", &[], "")).status, 404);
}

#[test]
fn server_wide_options_asterisk() {
    let s = TestServer::start(app());
    let r = s.send("OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_eq!(r.status, 204);
    let allow = r.header("allow").unwrap();
    for m in ["GET", "POST", "PUT", "DELETE", "OPTIONS", "PROPFIND"] {
        assert!(allow.contains(m), "{allow}");
    }
}

#[test]
fn fallback_replaces_404() {
    let app = App::new()
        .route("/a", get(|_r: Request| async { "a" }))
        .fallback(|req: Request| async move { (404, format!("no page at {}", req.path())) });
    let s = TestServer::start(app);
    let r = s.get("/b/c", &[]);
    assert_eq!((r.status, r.text()), (404, "no page at /b/c"));
}

#[test]
fn conflicting_routes_are_reported_at_build() {
    let err = App::new()
        .route("/u/{id}", get(echo_route))
        .route("/u/{name}", put(echo_route))
        .try_into_service()
        .err()
        .expect("conflict detected");
    assert!(err.contains("/u/{name}"), "{err}");
    // Same path twice merges methods rather than conflicting.
    assert!(App::new()
        .route("/u", get(echo_route))
        .route("/u", delete(echo_route))
        .try_into_service()
        .is_ok());
}

#[test]
fn many_requests_on_one_keep_alive_connection() {
    let s = TestServer::start(app());
    let mut c = s.connect();
    for i in 0..50 {
        c.write(request("GET", &format!("/users/{i}"), &[], "").as_bytes());
        let r = c.read(false);
        assert_eq!(r.text(), format!("GET /users/{{id}} [id={i}]"));
    }
    // Pipelined: several requests in one write, answers in order.
    let batch: String = (0..5)
        .map(|i| request("GET", &format!("/num/{i}"), &[], ""))
        .collect();
    c.write(batch.as_bytes());
    for i in 0..5 {
        assert_eq!(c.read(false).text(), (i * 2).to_string());
    }
}
