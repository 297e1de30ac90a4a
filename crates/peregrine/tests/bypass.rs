//! A route protected by an auth hook must not be reachable by spelling its
//! path differently. `/static/{*path}` serves a directory; `/static/private/{*path}` is the
//! same directory behind a hook that answers 401 without a token.

mod common;
use common::{request, TestServer};
use peregrine::fs::ServeDir;
use peregrine::middleware::Hook;
use peregrine::{get, App, Request, Response};

struct RequireToken;

impl Hook for RequireToken {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        if req.header("authorization") == Some("Bearer let-me-in") {
            Ok(())
        } else {
            Err(Response::new(401))
        }
    }
}

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::write(dir.path().join("private/x.txt"), "the secret").unwrap();
    std::fs::write(dir.path().join("public.txt"), "public").unwrap();
    dir
}

fn app(root: &std::path::Path) -> App {
    App::new()
        .route("/static/{*path}", get(ServeDir::new(root)))
        .route(
            "/static/private/{*path}",
            get(ServeDir::new(root.join("private"))).hook(RequireToken),
        )
}

/// The four spellings from the issue, and more of the same kind: none may reach the file
/// without the token.
const BYPASSES: &[&str] = &[
    "/static/%70rivate/x.txt",
    "/static//private/x.txt",
    "/static/./private/x.txt",
    "/static/private%2fx.txt",
    "/static/private%2Fx.txt",
    "/static/%2e/private/x.txt",
    "/static/%2E%2E/static/private/x.txt",
    "/static/a/../private/x.txt",
    "/static/private/./x.txt",
    "/static/private//x.txt",
    "//static/private/x.txt",
    "/static/p%72%69vate/x.txt",
    "/static/private%5cx.txt",
    "/static/private/%2e/x.txt",
    "/%73tatic/private/x.txt",
];

#[test]
fn protected_route_is_protected() {
    let dir = site();
    let s = TestServer::start(app(dir.path()));
    assert_eq!(s.get("/static/private/x.txt", &[]).status, 401);
    let r = s.get(
        "/static/private/x.txt",
        &["Authorization: Bearer let-me-in"],
    );
    assert_eq!((r.status, r.text()), (200, "the secret"));
    assert_eq!(s.get("/static/public.txt", &[]).text(), "public");
}

/// Starts the site and asks for `path` without a token: it must not leak the private file.
fn assert_refused_or_protected(path: &str) {
    let dir = site();
    let s = TestServer::start(app(dir.path()));
    assert_not_leaked(&s, path);
}

/// `path` without a token is refused (400, 404) or protected (401), never the private file.
fn assert_not_leaked(s: &TestServer, path: &str) {
    let r = s.get(path, &[]);
    assert!(
        !String::from_utf8_lossy(&r.body).contains("the secret"),
        "{path} leaked the private file ({})",
        r.status
    );
    assert!(
        matches!(r.status, 400 | 401 | 404),
        "{path}: status {}",
        r.status
    );
}

#[test]
fn bypass_by_encoded_unreserved_character() {
    assert_refused_or_protected("/static/%70rivate/x.txt");
}

#[test]
fn bypass_by_double_slash() {
    assert_refused_or_protected("/static//private/x.txt");
}

#[test]
fn bypass_by_dot_segment() {
    assert_refused_or_protected("/static/./private/x.txt");
}

#[test]
fn bypass_by_encoded_slash() {
    assert_refused_or_protected("/static/private%2fx.txt");
}

#[test]
fn every_other_spelling_is_refused_or_protected() {
    let dir = site();
    let s = TestServer::start(app(dir.path()));
    for path in BYPASSES {
        assert_not_leaked(&s, path);
    }
}

#[test]
fn the_four_spellings_from_the_issue_get_the_documented_answers() {
    let dir = site();
    let s = TestServer::start(app(dir.path()));
    // Encoded unreserved characters are decoded before routing: the hook sees the request.
    assert_eq!(s.get("/static/%70rivate/x.txt", &[]).status, 401);
    let ok = s.get(
        "/static/%70rivate/x.txt",
        &["Authorization: Bearer let-me-in"],
    );
    assert_eq!((ok.status, ok.text()), (200, "the secret"));
    // Empty segments are merged (nginx `merge_slashes`): routed as /static/private/x.txt.
    assert_eq!(s.get("/static//private/x.txt", &[]).status, 401);
    // Dot segments are refused: a browser or curl resolves them before sending.
    s.get("/static/./private/x.txt", &[])
        .assert_problem(400, "Bad Request");
    // An encoded separator inside a segment is refused.
    s.get("/static/private%2fx.txt", &[])
        .assert_problem(400, "Bad Request");
}

#[test]
fn head_requests_take_the_same_route() {
    let dir = site();
    let s = TestServer::start(app(dir.path()));
    for path in ["/static/%70rivate/x.txt", "/static//private/x.txt"] {
        let r = s.send(&request("HEAD", path, &[], ""));
        assert_eq!(r.status, 401, "{path}");
    }
}

#[test]
fn kept_encoded_slashes_still_cannot_reach_the_file() {
    use peregrine::path::EncodedSlashes;
    let dir = site();
    let s = TestServer::start(app(dir.path()).encoded_slashes(EncodedSlashes::Keep));
    // Routed to /static/{*path} with the one segment `private%2Fx.txt`: ServeDir refuses a
    // segment that decodes to more than one name.
    for path in [
        "/static/private%2fx.txt",
        "/static/private%2Fx.txt",
        "/static/private%5cx.txt",
    ] {
        let r = s.get(path, &[]);
        assert_eq!(r.status, 404, "{path}");
        assert!(!String::from_utf8_lossy(&r.body).contains("the secret"));
    }
    assert_eq!(s.get("/static/%70rivate/x.txt", &[]).status, 401);
}

/// The catch-all `/static/private/{*path}` also answers `/static/private/` itself, so that path
/// does not fall to `/static/{*path}` (which would serve `private/index.html` unprotected).
/// Protecting the directory with `ServeDir::router` and a hook on the whole group covers the
/// bare prefix too (the recipe in docs/security.md).
#[test]
fn protect_a_directory_with_its_router() {
    let dir = site();
    std::fs::write(dir.path().join("private/index.html"), "the secret index").unwrap();
    let s = TestServer::start(app(dir.path()));
    // The old pitfall: the bare directory path escaped a hook on the catch-all alone.
    assert_eq!(s.get("/static/private/", &[]).status, 401);
    drop(s);

    let safe_app = App::new()
        .merge(ServeDir::new(dir.path()).router("/static"))
        .merge(
            ServeDir::new(dir.path().join("private"))
                .router("/static/private")
                .hook(RequireToken),
        );
    let s = TestServer::start(safe_app);
    for path in [
        "/static/private",
        "/static/private/",
        "/static//private/",
        "/static/%70rivate/",
        "/static/private/x.txt",
        "/static/private/index.html",
    ] {
        assert_eq!(s.get(path, &[]).status, 401, "{path}");
    }
    let r = s.get("/static/private/", &["Authorization: Bearer let-me-in"]);
    assert_eq!(r.text(), "the secret index");
    assert_eq!(s.get("/static/public.txt", &[]).text(), "public");
}
