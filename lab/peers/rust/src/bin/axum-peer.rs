//! axum peer: the ordinary `axum::serve` on a multi-threaded tokio runtime with `WORKERS` worker
//! threads. Every scenario, with axum's extractors, `from_fn` middleware and `IntoResponse` errors.
//! `RUNTIME=per-core`: one current-thread runtime and `SO_REUSEPORT` listener per worker instead.
//! `PIPELINE_FLUSH=1`: connections served the way TechEmpower's axum entry serves them (hyper-util's
//! `auto` builder with `http1().pipeline_flush(true)`), since `axum::serve` cannot set that option.

use axum::extract::{Path, Query, RawQuery, Request, State};
use axum::http::header::{CONTENT_TYPE, SERVER};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use peers::{Failure, Large, Member, Message, NewUser, SearchQuery, SearchResult, UserById};
use std::sync::Arc;
use tower_http::set_header::SetResponseHeaderLayer;

async fn plaintext() -> &'static str {
    // &str answers `text/plain; charset=utf-8`.
    "Hello, World!"
}

async fn json() -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

async fn user(Path(id): Path<u64>) -> Json<UserById> {
    Json(UserById::new(id))
}

async fn search(Query(q): Query<SearchQuery>) -> Json<SearchResult> {
    Json(SearchResult {
        q: q.q,
        limit: q.limit,
    })
}

async fn create_user(Json(user): Json<NewUser>) -> (StatusCode, Json<NewUser>) {
    (StatusCode::CREATED, Json(user))
}

async fn member(Path((org, team, member)): Path<(u64, u64, u64)>) -> Json<Member> {
    Json(Member { org, team, member })
}

async fn ok() -> &'static str {
    "OK"
}

/// The error path: handlers return `Result<_, AppError>` and axum turns the error into a response.
struct AppError(#[allow(dead_code)] Failure);

impl From<Failure> for AppError {
    fn from(e: Failure) -> Self {
        AppError(e)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let mut res = (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(peers::INTERNAL_ERROR),
        )
            .into_response();
        res.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        res
    }
}

async fn error() -> Result<&'static str, AppError> {
    peers::fail()?;
    Ok("unreachable")
}

async fn large(State(large): State<Arc<Large>>) -> Json<Arc<Large>> {
    Json(large)
}

async fn empty() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// One middleware layer: runs the inner service, then adds its own `x-mw-N: 1` header.
async fn mark<const N: usize>(req: Request, next: Next) -> Response {
    const NAMES: [&str; 5] = ["x-mw-1", "x-mw-2", "x-mw-3", "x-mw-4", "x-mw-5"];
    let mut res = next.run(req).await;
    res.headers_mut().insert(
        HeaderName::from_static(NAMES[N - 1]),
        HeaderValue::from_static("1"),
    );
    res
}

fn app() -> Router {
    let middleware_route = Router::new()
        .route("/middleware", get(ok))
        .layer(middleware::from_fn(mark::<1>))
        .layer(middleware::from_fn(mark::<2>))
        .layer(middleware::from_fn(mark::<3>))
        .layer(middleware::from_fn(mark::<4>))
        .layer(middleware::from_fn(mark::<5>));
    Router::new()
        .route("/plaintext", get(plaintext))
        .route("/json", get(json))
        .route("/users/{id}", get(user))
        .route("/users", post(create_user))
        .route("/search", get(search))
        .route(
            "/api/v1/orgs/{org}/teams/{team}/members/{member}",
            get(member),
        )
        .route("/error", get(error))
        .route("/large", get(large))
        .route("/empty", get(empty))
        .with_state(Arc::new(peers::large()))
        .merge(middleware_route)
        .merge(db_routes())
        // hyper adds Date; nothing adds Server, which the contract requires.
        .layer(SetResponseHeaderLayer::overriding(
            SERVER,
            HeaderValue::from_static("axum"),
        ))
}

async fn serve(listener: tokio::net::TcpListener) {
    if peers::flag("PIPELINE_FLUSH") {
        return serve_flushing(listener).await;
    }
    // Small responses go out at once, as with the other peers (Nagle off).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app()).await.expect("serve");
}

/// The same router behind hyper-util's `auto` builder with `pipeline_flush(true)`, one task per
/// connection: TechEmpower's axum entry (`serve_hyper`). Answers to requests that arrived together
/// leave in one write; hyper's cost of the option is in lab/peers/README.md (hyper-flush).
async fn serve_flushing(listener: tokio::net::TcpListener) {
    let service = TowerToHyperService::new(app());
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            // A transient accept error (e.g. EMFILE) must not stop the server nor spin a core.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = service.clone();
        tokio::spawn(async move {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().pipeline_flush(true);
            let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}

// ---------------------------------------------------------------- database scenarios ------------

/// A database failure answers 500 (axum's `IntoResponse` error path).
struct DbFailure(peers::db::DbError);

impl From<peers::db::DbError> for DbFailure {
    fn from(e: peers::db::DbError) -> Self {
        DbFailure(e)
    }
}

impl IntoResponse for DbFailure {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.0.to_string()).into_response()
    }
}

type Db = State<deadpool_postgres::Pool>;

async fn db_single(State(pool): Db) -> Result<Json<peers::db::World>, DbFailure> {
    Ok(Json(peers::db::single(&pool).await?))
}

async fn db_queries(
    State(pool): Db,
    RawQuery(q): RawQuery,
) -> Result<Json<Vec<peers::db::World>>, DbFailure> {
    let n = peers::db::query_count(q.as_deref());
    Ok(Json(peers::db::queries(&pool, n).await?))
}

async fn db_updates(
    State(pool): Db,
    RawQuery(q): RawQuery,
) -> Result<Json<Vec<peers::db::World>>, DbFailure> {
    let n = peers::db::query_count(q.as_deref());
    Ok(Json(peers::db::updates(&pool, n).await?))
}

async fn db_fortunes(State(pool): Db) -> Result<Html<String>, DbFailure> {
    Ok(Html(peers::db::fortunes(&pool).await?))
}

/// The four database routes with one deadpool pool of `DB_POOL` connections shared by the
/// runtime's workers, or with RUNTIME=per-core (built once per worker) each worker's share of
/// them, so the server holds `DB_POOL` in total either way; none without `DATABASE_URL`.
fn db_routes() -> Router {
    let Some(url) = peers::db::url() else {
        return Router::new();
    };
    let size = match peers::runtime_mode() {
        peers::RuntimeMode::Multi => peers::db::pool_total(),
        peers::RuntimeMode::PerCore => peers::db::pool_total().div_ceil(peers::workers()),
    };
    Router::new()
        .route("/db", get(db_single))
        .route("/queries", get(db_queries))
        .route("/fortunes", get(db_fortunes))
        .route("/updates", get(db_updates))
        .with_state(peers::db::pool(&url, size))
}

fn main() {
    let addr = peers::addr();
    match peers::runtime_mode() {
        peers::RuntimeMode::PerCore => peers::run_per_core(addr, serve),
        peers::RuntimeMode::Multi => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(peers::workers())
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .expect("bind ADDR");
                serve(listener).await
            }),
    }
}
