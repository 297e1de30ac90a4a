//! The todo example (examples/todo.rs) through the in-process test client: CRUD, pagination,
//! validation problems with field errors, auth, CORS, streaming export.

#[allow(dead_code)]
#[path = "../examples/todo.rs"]
mod todo;

use peregrine::{StatusCode, TestClient};
use serde_json::{json, Value};

const TOKEN: &str = "Bearer t0ken";

fn client() -> TestClient {
    todo::app(todo::AppState::new("t0ken")).test()
}

async fn create(c: &TestClient, title: &str) -> Value {
    let r = c
        .post("/todos")
        .header("authorization", TOKEN)
        .json(&json!({ "title": title }))
        .send()
        .await;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text());
    r.json()
}

#[tokio::test]
async fn crud_round_trip() {
    let c = client();
    let r = c
        .post("/todos")
        .header("authorization", TOKEN)
        .json(&json!({"title": "  fly south ", "due": "2026-12-01"}))
        .send()
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.header("location"), Some("/todos/1"));
    assert_eq!(
        r.json::<Value>(),
        json!({"id": 1, "title": "fly south", "done": false, "due": "2026-12-01"})
    );

    let r = c
        .get("/todos/1")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.json::<Value>()["title"], "fly south");

    let r = c
        .patch("/todos/1")
        .header("authorization", TOKEN)
        .json(&json!({"done": true}))
        .send()
        .await;
    assert_eq!(r.json::<Value>()["done"], true);
    assert_eq!(r.json::<Value>()["title"], "fly south");

    let r = c
        .put("/todos/1")
        .header("authorization", TOKEN)
        .json(&json!({"title": "rest"}))
        .send()
        .await;
    assert_eq!(
        r.json::<Value>(),
        json!({"id": 1, "title": "rest", "done": false})
    );

    let r = c
        .delete("/todos/1")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!((r.status(), r.bytes().len()), (204, 0));
    let r = c
        .get("/todos/1")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>(),
        json!({"type": "https://todo.example/problems/not-found", "title": "Not Found",
               "status": 404, "detail": "no todo with id 1"})
    );
    let r = c
        .delete("/todos/1")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn validation_errors_name_each_field() {
    let c = client();
    let r = c
        .post("/todos")
        .header("authorization", TOKEN)
        .json(&json!({"title": " ", "due": "tomorrow"}))
        .send()
        .await;
    assert_eq!(r.status(), 422);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(
        r.json::<Value>(),
        json!({
            "type": "https://todo.example/problems/validation",
            "title": "The todo is not valid",
            "status": 422,
            "errors": [
                {"pointer": "#/title", "field": "title", "detail": "must not be empty"},
                {"pointer": "#/due", "field": "due", "detail": "\"tomorrow\" is not a date (YYYY-MM-DD)"}
            ]
        })
    );
    // The framework's own body errors pass through the app's error type unchanged.
    let r = c
        .post("/todos")
        .header("authorization", TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await;
    assert_eq!(r.status(), 400);
    let r = c
        .post("/todos")
        .header("authorization", TOKEN)
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await;
    assert_eq!(r.status(), 415);
    let r = c
        .get("/todos/abc")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn pagination() {
    let c = client();
    for i in 1..=25 {
        create(&c, &format!("todo {i}")).await;
    }
    let r = c
        .get("/todos?page=2&per_page=10")
        .header("authorization", TOKEN)
        .send()
        .await;
    let j: Value = r.json();
    assert_eq!(
        (j["page"].clone(), j["per_page"].clone(), j["total"].clone()),
        (json!(2), json!(10), json!(25))
    );
    let ids: Vec<u64> = j["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, (11..=20).collect::<Vec<_>>());
    let j: Value = c
        .get("/todos?page=3&per_page=10")
        .header("authorization", TOKEN)
        .send()
        .await
        .json();
    assert_eq!(j["items"].as_array().unwrap().len(), 5);
    let r = c
        .get("/todos?per_page=1000")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 422);
    let r = c
        .get("/todos?page=x")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn auth_is_required() {
    let c = client();
    let r = c.get("/todos").send().await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"todo\""));
    let r = c
        .get("/todos")
        .header("authorization", "Bearer wrong")
        .send()
        .await;
    assert_eq!(r.status(), 401);
    // Health needs none.
    assert_eq!(c.get("/health").send().await.text(), "ok");
}

#[tokio::test]
async fn cors_preflight_and_simple_requests() {
    let c = client();
    let r = c
        .options("/todos")
        .header("origin", "https://todo.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, authorization",
        )
        .send()
        .await;
    assert_eq!(r.status(), 204);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://todo.example")
    );
    assert!(r
        .header("access-control-allow-methods")
        .unwrap()
        .contains("POST"));
    let r = c
        .get("/health")
        .header("origin", "https://todo.example")
        .send()
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://todo.example")
    );
    let r = c
        .get("/health")
        .header("origin", "https://evil.example")
        .send()
        .await;
    assert!(r.header("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn export_streams_ndjson() {
    let c = client();
    for t in ["a", "b", "c"] {
        create(&c, t).await;
    }
    let r = c
        .get("/todos/export")
        .header("authorization", TOKEN)
        .send()
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let titles: Vec<String> = r
        .text()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["title"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(titles, ["a", "b", "c"]);
}
