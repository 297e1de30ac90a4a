//! The automatic `OPTIONS` and 405 answers of a path go through the layers and hooks of the
//! group that owns it, over a real socket: a group's CORS (tower-http's `CorsLayer` or the
//! framework's `Cors`) answers the browser's preflight, a group's auth hook guards the method
//! list, and `App::method_not_allowed` gives the 405 the application's own format.

mod common;

use common::{request, TestServer};
use http::HeaderValue;
use peregrine::middleware::{Cors, Hook};
use peregrine::tower::TowerLayer;
use peregrine::{get, post, App, Error, IntoResponse, Json, Request, Response, Router};
use tower_http::cors::CorsLayer;

/// Refuses requests without `Authorization: Bearer secret`.
struct BearerAuth;

impl Hook for BearerAuth {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        match req.header("authorization") {
            Some("Bearer secret") => Ok(()),
            _ => Err(Error::unauthorized().into_response()),
        }
    }
}

fn app() -> App {
    let tower_cors = Router::new()
        .route(
            "/items",
            get(|_r: Request| async { "[]" }).post(|_r: Request| async { "made" }),
        )
        .layer(TowerLayer::new(
            CorsLayer::new()
                .allow_origin(HeaderValue::from_static("https://app.example"))
                .allow_methods([http::Method::GET, http::Method::POST])
                .allow_headers([http::header::CONTENT_TYPE]),
        ));
    let own_cors = Router::new()
        .route("/feed", get(|_r: Request| async { "[]" }))
        .layer(Cors::new().allow_origin("https://app.example"));
    let admin = Router::new()
        .route("/users", get(|_r: Request| async { "alice" }))
        .hook(BearerAuth);
    App::new()
        .nest("/tower", tower_cors)
        .nest("/own", own_cors)
        .nest("/admin", admin)
        .route("/public", post(|_r: Request| async { "ok" }))
}

const PREFLIGHT: &[&str] = &[
    "Origin: https://app.example",
    "Access-Control-Request-Method: POST",
    "Access-Control-Request-Headers: content-type",
];

#[test]
fn a_group_tower_cors_layer_answers_the_preflight() {
    let server = TestServer::start(app());
    // Before: 204 with `Allow` and no `Access-Control-Allow-*` (the layer never ran).
    let res = server.send(&request("OPTIONS", "/tower/items", PREFLIGHT, ""));
    assert_eq!(res.status, 200, "tower-http answers preflights 200");
    assert_eq!(
        res.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(res.header("access-control-allow-methods"), Some("GET,POST"));
    assert_eq!(
        res.header("access-control-allow-headers"),
        Some("content-type")
    );
    // The route itself still gets the layer.
    let res = server.get("/tower/items", &["Origin: https://app.example"]);
    assert_eq!(res.text(), "[]");
    assert_eq!(
        res.header("access-control-allow-origin"),
        Some("https://app.example")
    );
}

#[test]
fn a_group_cors_middleware_answers_the_preflight() {
    let server = TestServer::start(app());
    let res = server.send(&request("OPTIONS", "/own/feed", PREFLIGHT, ""));
    assert_eq!(res.status, 204);
    assert_eq!(
        res.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(res.header("access-control-allow-methods").is_some());
    // A plain OPTIONS (no preflight) is still the automatic answer, through the layer.
    let res = server.send(&request("OPTIONS", "/own/feed", &[], ""));
    assert_eq!(res.status, 204);
    assert_eq!(res.header("allow"), Some("GET, HEAD, OPTIONS"));
}

#[test]
fn a_group_auth_hook_guards_the_automatic_answers() {
    let server = TestServer::start(app());
    // Before: 204 with the method list, and 405 with it, to anyone.
    let res = server.send(&request("OPTIONS", "/admin/users", &[], ""));
    assert_eq!(res.status, 401);
    assert_eq!(res.header("allow"), None);
    let res = server.send(&request("DELETE", "/admin/users", &[], ""));
    assert_eq!(res.status, 401);
    assert_eq!(res.header("allow"), None);
    // With the token, the automatic answers as before.
    let auth = ["Authorization: Bearer secret"];
    let res = server.send(&request("OPTIONS", "/admin/users", &auth, ""));
    assert_eq!(res.status, 204);
    assert_eq!(res.header("allow"), Some("GET, HEAD, OPTIONS"));
    let res = server.send(&request("DELETE", "/admin/users", &auth, ""));
    assert_eq!(res.status, 405);
    assert_eq!(res.header("allow"), Some("GET, HEAD, OPTIONS"));
    // A path outside the group is not guarded.
    let res = server.send(&request("OPTIONS", "/public", &[], ""));
    assert_eq!(res.status, 204);
    assert_eq!(res.header("allow"), Some("POST, OPTIONS"));
}

#[test]
fn method_not_allowed_takes_the_application_format() {
    let app = app().method_not_allowed(|req: Request| async move {
        (
            405,
            Json(serde_json::json!({ "code": "method_not_allowed", "method": req.method() })),
        )
    });
    let server = TestServer::start(app);
    let res = server.send(&request("PUT", "/public", &[], ""));
    assert_eq!(res.status, 405);
    assert_eq!(res.header("allow"), Some("POST, OPTIONS"));
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(
        res.json(),
        serde_json::json!({ "code": "method_not_allowed", "method": "PUT" })
    );
    // Inside a guarded group the hook still runs first.
    let res = server.send(&request("PUT", "/admin/users", &[], ""));
    assert_eq!(res.status, 401);
    // OPTIONS stays the automatic 204; an unknown path stays a 404.
    assert_eq!(
        server.send(&request("OPTIONS", "/public", &[], "")).status,
        204
    );
    assert_eq!(server.get("/nowhere", &[]).status, 404);
}

#[test]
fn groups_sharing_a_path_guard_it_with_the_layered_one() {
    // `/docs` is read by anyone and deleted by admins: its method list names DELETE, so the
    // automatic answers take the guarded group's hook (the first group with layers).
    let public = Router::new().route("/docs", get(|_r: Request| async { "read me" }));
    let admin = Router::new()
        .route(
            "/docs",
            peregrine::delete(|_r: Request| async { "deleted" }),
        )
        .hook(BearerAuth);
    let server = TestServer::start(App::new().merge(public).merge(admin));
    assert_eq!(server.get("/docs", &[]).text(), "read me");
    let res = server.send(&request("OPTIONS", "/docs", &[], ""));
    assert_eq!(res.status, 401);
    let auth = ["Authorization: Bearer secret"];
    let res = server.send(&request("OPTIONS", "/docs", &auth, ""));
    assert_eq!(res.status, 204);
    assert_eq!(res.header("allow"), Some("GET, HEAD, DELETE, OPTIONS"));
}

#[test]
fn a_route_layer_wraps_its_automatic_answers() {
    let app = App::new().route(
        "/report",
        get(|_r: Request| async { "numbers" })
            .layer(Cors::new().allow_origin("https://app.example")),
    );
    let server = TestServer::start(app);
    let res = server.send(&request("OPTIONS", "/report", PREFLIGHT, ""));
    assert_eq!(res.status, 204);
    assert_eq!(
        res.header("access-control-allow-origin"),
        Some("https://app.example")
    );
}
