//! A `{*path}` catch-all also answers its bare prefix (`/static/` and `/static`), through the
//! same route and so with the same hooks and layers, like axum's `nest_service`. Before, a
//! `ServeDir` mounted with `.route("/static/{*path}", ..)` gave 404 for both, and a hooked
//! catch-all `/static/private/{*path}` left `/static/private/` to whatever other route matched
//! it (the public catch-all served the private index without the hook). Real sockets.

mod common;
use common::TestServer;
use peregrine::fs::ServeDir;
use peregrine::middleware::Hook;
use peregrine::{get, App, Request, Response, Router};

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
    std::fs::write(dir.path().join("index.html"), "<h1>home</h1>").unwrap();
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::write(dir.path().join("private/index.html"), "the secret index").unwrap();
    std::fs::write(dir.path().join("private/x.txt"), "the secret").unwrap();
    dir
}

/// `ServeDir` on a plain catch-all route: `/static/` is the index, `/static` redirects to it
/// (keeping the query).
#[test]
fn a_serve_dir_catch_all_answers_its_bare_prefix() {
    let dir = site();
    let s = TestServer::start(App::new().route("/static/{*path}", get(ServeDir::new(dir.path()))));
    let r = s.get("/static/", &[]);
    assert_eq!((r.status, r.text()), (200, "<h1>home</h1>"));
    let r = s.get("/static", &[]);
    assert_eq!((r.status, r.header("location")), (301, Some("/static/")));
    let r = s.get("/static?lang=en", &[]);
    assert_eq!(r.header("location"), Some("/static/?lang=en"));
    // On a route without the parameter, the root's index as before (no redirect).
    let s = TestServer::start(App::new().route("/home", get(ServeDir::new(dir.path()))));
    assert_eq!(s.get("/home", &[]).text(), "<h1>home</h1>");
}

/// The review's case: a public catch-all over the whole directory and a hooked catch-all over
/// its private part. The bare private directory, with or without its slash, goes to the hooked
/// route (it answered 200 with the secret index before).
#[test]
fn a_hooked_catch_all_covers_its_bare_directory() {
    let dir = site();
    let app = App::new()
        .route("/static/{*path}", get(ServeDir::new(dir.path())))
        .route(
            "/static/private/{*path}",
            get(ServeDir::new(dir.path().join("private"))).hook(RequireToken),
        );
    let s = TestServer::start(app);
    for path in [
        "/static/private/",
        "/static/private",
        "/static//private/",
        "/static/%70rivate/",
        "/static/private/x.txt",
    ] {
        let r = s.get(path, &[]);
        assert_eq!(
            r.status,
            401,
            "{path}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let r = s.get("/static/private/", &["Authorization: Bearer let-me-in"]);
    assert_eq!(r.text(), "the secret index");
    let r = s.get("/static/private", &["Authorization: Bearer let-me-in"]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/static/private/"))
    );
    assert_eq!(s.get("/static/", &[]).text(), "<h1>home</h1>");
}

/// Group layers and hooks on a `ServeDir::router` cover the bare prefix (one route now).
#[test]
fn a_hooked_serve_dir_router_covers_its_bare_prefix() {
    let dir = site();
    let app = App::new().merge(
        ServeDir::new(dir.path().join("private"))
            .router("/vault")
            .hook(RequireToken),
    );
    let s = TestServer::start(app);
    for path in ["/vault", "/vault/", "/vault/x.txt"] {
        assert_eq!(s.get(path, &[]).status, 401, "{path}");
    }
    let r = s.get("/vault/", &["Authorization: Bearer let-me-in"]);
    assert_eq!(r.text(), "the secret index");
}

/// Any catch-all handler sees its parameter empty for the bare prefix, and the route is the
/// catch-all's; a route registered for the bare path itself wins, and earlier parameters are
/// kept.
#[test]
fn bare_prefix_of_any_catch_all() {
    async fn rest(req: Request) -> Result<String, peregrine::Error> {
        Ok(format!(
            "{} rest={:?}",
            req.route().unwrap_or("-"),
            req.param_str("rest")?
        ))
    }
    async fn user_files(req: Request) -> Result<String, peregrine::Error> {
        Ok(format!(
            "user {} rest={:?}",
            req.param_str("id")?,
            req.param_str("rest")?
        ))
    }
    let app = App::new()
        .route("/files/{*rest}", get(rest))
        .route("/docs/{*rest}", get(rest))
        .route("/docs/", get(|_r: Request| async { "docs index" }))
        .nest(
            "/u",
            Router::new().route("/{id}/files/{*rest}", get(user_files)),
        );
    let s = TestServer::start(app);
    assert_eq!(s.get("/files", &[]).text(), "/files/{*rest} rest=\"\"");
    assert_eq!(s.get("/files/", &[]).text(), "/files/{*rest} rest=\"\"");
    assert_eq!(
        s.get("/files/a/b", &[]).text(),
        "/files/{*rest} rest=\"a/b\""
    );
    assert_eq!(s.get("/docs/", &[]).text(), "docs index");
    assert_eq!(s.get("/docs", &[]).text(), "/docs/{*rest} rest=\"\"");
    assert_eq!(s.get("/u/7/files", &[]).text(), "user 7 rest=\"\"");
    assert_eq!(s.get("/u/7/files/", &[]).text(), "user 7 rest=\"\"");
    assert_eq!(s.get("/u/7/files/a", &[]).text(), "user 7 rest=\"a\"");
    assert_eq!(s.get("/u/7", &[]).status, 404);
}
