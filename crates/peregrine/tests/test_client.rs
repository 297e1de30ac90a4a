//! The in-process test client, and through it the response ergonomics: custom error types,
//! status constants, header values of any kind, RFC 9457 members.

use peregrine::{
    get, post, App, Error, Headers, IntoResponse, Json, Local, Request, Response, StatusCode,
    StreamBody,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::cell::Cell;

#[derive(Debug)]
enum AppError {
    NotFound(u64),
    Validation(Vec<(&'static str, &'static str)>),
    Framework(Error),
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
// A trap: with std::error::Error implemented, a blanket conversion made
// every AppError a bare 500. Now the Result's own IntoResponse is used.
impl std::error::Error for AppError {}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            AppError::NotFound(id) => Error::not_found()
                .with_type("https://todo.example/problems/not-found")
                .with_detail(format!("no todo {id}")),
            AppError::Validation(fields) => fields.into_iter().fold(
                Error::unprocessable().with_title("Invalid todo"),
                |e, (f, d)| e.with_field_error(f, d),
            ),
            AppError::Framework(e) => e,
        }
        .into_response()
    }
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Framework(e)
    }
}

#[derive(Serialize, Deserialize)]
struct Todo {
    title: String,
}

async fn show(req: Request) -> Result<Json<Todo>, AppError> {
    let id: u64 = req.param("id")?;
    if id == 1 {
        return Ok(Json(Todo {
            title: "fly".into(),
        }));
    }
    Err(AppError::NotFound(id))
}

async fn create(mut req: Request) -> Result<impl IntoResponse, AppError> {
    let todo: Todo = req.json().await?;
    if todo.title.is_empty() {
        return Err(AppError::Validation(vec![("title", "must not be empty")]));
    }
    let location = format!("/todos/{}", 2);
    Ok((StatusCode::CREATED, [("location", location)], Json(todo)))
}

async fn std_error(_req: Request) -> Result<String, Error> {
    let n: u32 = "not a number; secret=hunter2".parse()?; // a std error: logged 500
    Ok(n.to_string())
}

fn app() -> App {
    App::new()
        .route("/todos/{id}", get(show))
        .route("/todos", post(create))
        .route("/std", get(std_error))
        .route("/gone", get(|_r: Request| async { StatusCode::GONE }))
        .route(
            "/empty",
            get(|_r: Request| async { StatusCode::NO_CONTENT }),
        )
        .route(
            "/mixed",
            get(|_r: Request| async {
                (
                    StatusCode::ACCEPTED,
                    Headers::new()
                        .add("x-job", format!("job-{}", 7))
                        .add("x-attempts", 3u8)
                        .add("x-raw", &b"\xffok"[..]),
                    "queued",
                )
            }),
        )
        .route(
            "/inject",
            get(|req: Request| async move {
                // A header value taken from the request must not split the response.
                let v = req.query_string().unwrap_or("").replace("%0D%0A", "\r\n");
                (200, [("x-echo", v)], "echo")
            }),
        )
        .route(
            "/stream",
            get(|_r: Request| async {
                let (tx, body) = StreamBody::channel(2);
                tokio::task::spawn_local(async move {
                    for i in 0..3 {
                        tx.send(format!("part {i};")).await.unwrap();
                    }
                });
                body.content_type("text/plain")
            }),
        )
        .route(
            "/echo",
            post(|mut req: Request| async move {
                let ct = req.header("content-type").unwrap_or("").to_owned();
                let agent = req.header("x-agent").unwrap_or("").to_owned();
                let body = req.text().await?;
                Ok::<_, Error>(format!("{ct}|{agent}|{body}"))
            }),
        )
}

#[tokio::test]
async fn custom_error_type_keeps_its_own_answer() {
    let c = app().test();
    let r = c.get("/todos/1").send().await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>(), json!({"title": "fly"}));

    let r = c.get("/todos/9").send().await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(
        r.json::<Value>(),
        json!({"type": "https://todo.example/problems/not-found", "title": "Not Found",
               "status": 404, "detail": "no todo 9"})
    );

    // An extractor's own error passes through AppError unchanged.
    let r = c.get("/todos/abc").send().await;
    assert_eq!(r.status(), 400);
    assert!(r.json::<Value>()["detail"]
        .as_str()
        .unwrap()
        .contains("`id`"));
}

#[tokio::test]
async fn validation_errors_are_problem_documents_with_field_errors() {
    let c = app().test();
    let r = c.post("/todos").json(&json!({"title": ""})).send().await;
    assert_eq!(r.status(), 422);
    assert_eq!(
        r.json::<Value>(),
        json!({"type": "about:blank", "title": "Invalid todo", "status": 422,
               "errors": [{"pointer": "#/title", "field": "title", "detail": "must not be empty"}]})
    );
    let r = c.post("/todos").json(&json!({"title": "x"})).send().await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.header("location"), Some("/todos/2"));
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn std_errors_are_a_bare_logged_500() {
    let r = app().test().get("/std").send().await;
    assert_eq!(r.status(), 500);
    assert_eq!(
        r.json::<Value>(),
        json!({"type": "about:blank", "title": "Internal Server Error", "status": 500})
    );
    assert!(!r.text().contains("hunter2"));
}

#[tokio::test]
async fn bare_statuses_and_mixed_headers() {
    let c = app().test();
    let r = c.get("/gone").send().await;
    assert_eq!(r.status(), 410);
    assert_eq!(r.json::<Value>()["title"], "Gone");
    let r = c.get("/empty").send().await;
    assert_eq!((r.status(), r.bytes().len()), (204, 0));
    let r = c.get("/mixed").send().await;
    assert_eq!(r.status(), 202);
    assert_eq!(r.header("x-job"), Some("job-7"));
    assert_eq!(r.header("x-attempts"), Some("3"));
    assert_eq!(r.header_bytes("x-raw"), Some(&b"\xffok"[..]));
}

#[tokio::test]
async fn header_injection_is_refused_with_a_500() {
    let c = app().test();
    let r = c.get("/inject?a%0D%0Aset-cookie:%20x=1").send().await;
    assert_eq!(r.status(), 500);
    assert!(r.header("set-cookie").is_none());
    assert!(r.header("x-echo").is_none());
    let r = c.get("/inject?fine").send().await;
    assert_eq!(r.header("x-echo"), Some("fine"));
}

#[tokio::test]
async fn client_sends_headers_bodies_and_reads_streams() {
    let c = app().test();
    let r = c
        .post("/echo")
        .header("x-agent", String::from("tests"))
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await;
    assert_eq!(r.text(), "text/plain|tests|hello");
    let r = c.post("/echo").form(&[("a", "1 2")]).send().await;
    assert_eq!(r.text(), "application/x-www-form-urlencoded||a=1+2");
    // A body fed by a spawn_local task, read to the end.
    let r = c.get("/stream").send().await;
    assert_eq!(r.text(), "part 0;part 1;part 2;");
    assert_eq!(r.stream_error(), None);
    // HEAD: GET's headers, no body.
    let r = c.head("/todos/1").send().await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.bytes().is_empty());
    // Unknown path and method: the framework's problem answers.
    assert_eq!(c.get("/nope").send().await.status(), 404);
    let r = c.delete("/todos").send().await;
    assert_eq!(r.status(), 405);
    assert_eq!(r.header("allow"), Some("POST, OPTIONS"));
}

#[tokio::test]
async fn client_builds_worker_state_once() {
    struct Hits(Cell<u32>);
    let c = App::new()
        .worker_local(|_w| Hits(Cell::new(0)))
        .route(
            "/",
            get(|_r: Request, Local(h): Local<Hits>| async move {
                h.0.set(h.0.get() + 1);
                h.0.get().to_string()
            }),
        )
        .test();
    assert_eq!(c.get("/").send().await.text(), "1");
    assert_eq!(c.get("/").send().await.text(), "2");
}

#[test]
#[should_panic(expected = "not valid HTTP/1.1")]
fn a_malformed_test_request_fails_loudly() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(app().test().get("/a b").send());
}
