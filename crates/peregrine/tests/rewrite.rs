//! Middleware rewriting the method, path and headers: before routing (what routing sees, with
//! the rewritten path normalised like a client's) and after it (what handlers see).

use peregrine::middleware::{from_fn, Hook, Next};
use peregrine::{delete, get, post, App, Error, IntoResponse, Request, Response};

struct MethodOverride;

impl Hook for MethodOverride {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        if req.method() == "POST" {
            if let Some(m) = req.header("x-http-method-override").map(str::to_owned) {
                req.remove_header("x-http-method-override");
                req.set_method(&m).map_err(|e| e.into_response())?;
            }
        }
        Ok(())
    }
}

fn app() -> App {
    App::new()
        .route(
            "/api/users/{id}",
            get(|req: Request| async move {
                let id: u32 = req.param("id")?;
                Ok::<_, Error>(format!("user {id} via {}", req.path()))
            })
            .delete(|req: Request| async move {
                let left = req.header("x-http-method-override").is_some();
                format!(
                    "deleted {} (override header left: {left})",
                    req.param_str("id").unwrap()
                )
            }),
        )
        .route("/admin", get(|_r: Request| async { "admin" }))
        .route(
            "/headers",
            post(|mut req: Request| async move {
                let names: Vec<String> =
                    req.headers().map(|(n, _)| n.to_ascii_lowercase()).collect();
                let v: serde_json::Value = req.json().await?;
                Ok::<_, Error>(format!(
                    "{}|{}|{v}",
                    req.header("x-tenant").unwrap_or("-"),
                    names.join(",")
                ))
            }),
        )
        .route(
            "/late",
            get(|mut req: Request| async move {
                match req.set_path("/admin") {
                    Ok(()) => "rewrote".into_response(),
                    Err(e) => e.into_response(),
                }
            }),
        )
        // After routing: what the handler sees.
        .layer(from_fn(|mut req: Request, next: Next| async move {
            if let Some(t) = req.header("x-forwarded-tenant").map(str::to_owned) {
                req.remove_header("x-forwarded-tenant");
                if let Err(e) = req.set_header("x-tenant", t) {
                    return e.into_response();
                }
            }
            // A JSON body sent as text/plain by an old client.
            if req.header("content-type") == Some("text/plain") {
                req.set_header("content-type", "application/json").unwrap();
            }
            next.run(req).await
        }))
        // Before routing: what routing sees.
        .layer_before_routing(from_fn(|mut req: Request, next: Next| async move {
            if let Some(rest) = req.path().strip_prefix("/v1/") {
                let new = format!("/api/{rest}");
                if let Err(e) = req.set_path(&new) {
                    return e.into_response();
                }
            }
            next.run(req).await
        }))
        .hook_before_routing(MethodOverride)
}

#[tokio::test]
async fn method_override_before_routing_selects_another_handler() {
    let c = app().test();
    let r = c
        .post("/api/users/3")
        .header("x-http-method-override", "DELETE")
        .send()
        .await;
    assert_eq!(r.status(), 200, "{}", r.text());
    assert_eq!(r.text(), "deleted 3 (override header left: false)");
    // Without the header POST is not allowed on that route.
    assert_eq!(c.post("/api/users/3").send().await.status(), 405);
    let r = c
        .post("/api/users/3")
        .header("x-http-method-override", "NOT A TOKEN")
        .send()
        .await;
    assert_eq!(r.status(), 500);
}

#[tokio::test]
async fn rewritten_paths_are_routed_with_their_parameters() {
    let c = app().test();
    let r = c.get("/v1/users/7").send().await;
    assert_eq!((r.status(), r.text()), (200, "user 7 via /api/users/7"));
    // The rewritten path is normalised like a client's: `//` merged, `%75` decoded.
    let r = c.get("/v1//users/%37").send().await;
    assert_eq!((r.status(), r.text()), (200, "user 7 via /api/users/7"));
}

#[tokio::test]
async fn a_rewrite_cannot_smuggle_dot_segments_or_encoded_slashes() {
    let c = app().test();
    // Both would reach /admin if the rewritten path skipped normalisation.
    assert_eq!(c.get("/v1/..%2Fadmin").send().await.status(), 400);
    assert_eq!(c.get("/v1/users/../../admin").send().await.status(), 400);
}

#[tokio::test]
async fn headers_rewritten_after_routing_reach_the_handler() {
    let c = app().test();
    let r = c
        .post("/headers")
        .header("x-forwarded-tenant", "acme")
        .header("content-type", "text/plain")
        .body(r#"{"a":1}"#)
        .send()
        .await;
    assert_eq!(r.status(), 200, "{}", r.text());
    // set_header replaces in place of removal: the new field comes last.
    assert_eq!(
        r.text(),
        r#"acme|host,content-length,x-tenant,content-type|{"a":1}"#
    );
}

#[tokio::test]
async fn set_path_after_routing_is_a_500() {
    let r = app().test().get("/late").send().await;
    assert_eq!(r.status(), 500);
}

#[tokio::test]
async fn bad_header_values_are_refused() {
    let c = App::new()
        .route("/", delete(|_r: Request| async { "x" }))
        .route(
            "/h",
            get(|mut req: Request| async move {
                let a = req.set_header("x-a", "ok\r\nx-b: injected").is_err();
                let b = req.set_header("bad name", "v").is_err();
                let c =
                    req.append_header("x-c", "1").is_ok() && req.append_header("x-c", "2").is_ok();
                let all: Vec<&str> = req
                    .headers()
                    .filter(|(n, _)| *n == "x-c")
                    .map(|(_, v)| std::str::from_utf8(v).unwrap())
                    .collect();
                format!("{a} {b} {c} {}", all.join(","))
            }),
        )
        .test();
    assert_eq!(c.get("/h").send().await.text(), "true true true 1,2");
}
