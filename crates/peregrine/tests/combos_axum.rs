//! What an axum user reaches for, over a real socket: an extractor rejecting with the API's own
//! error type, `insert_header` (replace) beside `with_header` (append) with owned values, a
//! bare `u16` as an answer, the test client's `StatusCode`.

mod common;

use common::TestServer;
use peregrine::middleware::Hook;
use peregrine::{get, App, IntoResponse, Json, Request, Response, State, StatusCode, TryExtract};

/// The API's error body.
struct ApiError {
    status: u16,
    code: &'static str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(serde_json::json!({ "code": self.code }))).into_response()
    }
}

/// The caller's token, from `Authorization: Bearer ...`.
struct Bearer(String);

impl TryExtract for Bearer {
    type Rejection = ApiError;
    fn try_extract(req: &Request) -> Result<Self, ApiError> {
        let missing = ApiError {
            status: 401,
            code: "token_missing",
        };
        let value = req.header("authorization").ok_or(missing)?;
        match value.strip_prefix("Bearer ") {
            Some(t) if !t.is_empty() => Ok(Bearer(t.to_owned())),
            _ => Err(ApiError {
                status: 400,
                code: "token_malformed",
            }),
        }
    }
}

struct Greeting(&'static str);

/// Every answer is private, whatever the handler said.
struct Private;

impl Hook for Private {
    fn after(&self, res: &mut Response) {
        res.insert_header("cache-control", "private, no-store");
    }
}

fn app() -> App {
    App::new()
        .with_state(Greeting("hello"))
        // A custom extractor next to a built-in one (`State`, which rejects with `Error`).
        .route(
            "/me",
            get(
                |_r: Request, Bearer(token): Bearer, State(g): State<Greeting>| async move {
                    format!("{} {token}", g.0)
                },
            ),
        )
        .route(
            "/headers",
            get(|_r: Request| async {
                let id = 42;
                Response::text("ok")
                    .with_header("x-request-id", format!("req-{id}"))
                    .with_header("vary", "origin")
                    .with_header("vary", String::from("accept-encoding"))
                    .with_header("cache-control", "max-age=600")
            }),
        )
        .route("/nothing", get(|_r: Request| async { 204u16 }))
        .route("/gone", get(|_r: Request| async { 410u16 }))
        .hook(Private)
}

#[test]
fn a_custom_extractor_rejects_with_its_own_response_type() {
    let server = TestServer::start(app());
    let res = server.get("/me", &[]);
    assert_eq!(res.status, 401);
    assert_eq!(res.json(), serde_json::json!({ "code": "token_missing" }));
    let res = server.get("/me", &["Authorization: Basic x"]);
    assert_eq!(res.status, 400);
    assert_eq!(res.json(), serde_json::json!({ "code": "token_malformed" }));
    let res = server.get("/me", &["Authorization: Bearer abc"]);
    assert_eq!((res.status, res.text()), (200, "hello abc"));
}

#[test]
fn insert_header_replaces_and_with_header_appends() {
    let server = TestServer::start(app());
    let res = server.get("/headers", &[]);
    assert_eq!(res.header("x-request-id"), Some("req-42"));
    assert_eq!(res.header_all("vary"), ["origin", "accept-encoding"]);
    // The hook's `insert_header` replaced the handler's value: one field, not two.
    assert_eq!(res.header_all("cache-control"), ["private, no-store"]);
}

#[test]
fn a_bare_u16_is_an_answer() {
    let server = TestServer::start(app());
    let res = server.get("/nothing", &[]);
    assert_eq!(res.status, 204);
    assert!(res.body.is_empty());
    let res = server.get("/gone", &[]);
    res.assert_problem(410, "Gone");
}

#[tokio::test]
async fn the_test_client_gives_a_status_code() {
    let client = app().test();
    let res = client.get("/me").send().await;
    assert_eq!(res.status_code(), StatusCode::UNAUTHORIZED);
    assert_eq!(res.status_code(), 401);
    assert!(res.status_code().is_client_error());
    assert_eq!(res.status(), 401); // the number, as before
}
