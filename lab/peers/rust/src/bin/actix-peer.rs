//! actix-web peer: the ordinary `HttpServer` with `WORKERS` workers (one single-threaded runtime
//! each). Every scenario, with actix's extractors, `from_fn` middleware and `ResponseError` errors.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::middleware::{from_fn, DefaultHeaders, Next};
use actix_web::{web, App, HttpResponse, HttpServer, ResponseError};
use peers::{Failure, Large, Member, Message, NewUser, SearchQuery, SearchResult, UserById};

async fn plaintext() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("Hello, World!")
}

async fn json() -> web::Json<Message> {
    web::Json(Message {
        message: "Hello, World!",
    })
}

async fn user(id: web::Path<u64>) -> web::Json<UserById> {
    web::Json(UserById::new(id.into_inner()))
}

async fn search(q: web::Query<SearchQuery>) -> web::Json<SearchResult> {
    let q = q.into_inner();
    web::Json(SearchResult {
        q: q.q,
        limit: q.limit,
    })
}

async fn create_user(user: web::Json<NewUser>) -> HttpResponse {
    HttpResponse::Created().json(user.into_inner())
}

async fn member(path: web::Path<(u64, u64, u64)>) -> web::Json<Member> {
    let (org, team, member) = path.into_inner();
    web::Json(Member { org, team, member })
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("OK")
}

/// The error path: handlers return `Result<_, AppError>` and actix renders it via `ResponseError`.
#[derive(Debug)]
struct AppError(Failure);

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Failure> for AppError {
    fn from(e: Failure) -> Self {
        AppError(e)
    }
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .insert_header((CONTENT_TYPE, "application/problem+json"))
            .body(serde_json::to_vec(&peers::INTERNAL_ERROR).expect("static problem serialises"))
    }
}

async fn error() -> Result<HttpResponse, AppError> {
    peers::fail()?;
    Ok(HttpResponse::Ok().finish())
}

async fn large(data: web::Data<Large>) -> HttpResponse {
    HttpResponse::Ok().json(&**data)
}

async fn empty() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

/// One middleware layer: runs the inner service, then adds its own `x-mw-N: 1` header.
async fn mark<const N: usize>(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    const NAMES: [&str; 5] = ["x-mw-1", "x-mw-2", "x-mw-3", "x-mw-4", "x-mw-5"];
    let mut res = next.call(req).await?;
    res.headers_mut().insert(
        HeaderName::from_static(NAMES[N - 1]),
        HeaderValue::from_static("1"),
    );
    Ok(res)
}

// ---------------------------------------------------------------- database scenarios ------------

/// A database failure answers 500 (actix's `ResponseError` path).
#[derive(Debug)]
struct DbFailure(peers::db::DbError);

impl std::fmt::Display for DbFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<peers::db::DbError> for DbFailure {
    fn from(e: peers::db::DbError) -> Self {
        DbFailure(e)
    }
}

impl ResponseError for DbFailure {}

type Db = web::Data<deadpool_postgres::Pool>;

async fn db_single(pool: Db) -> Result<web::Json<peers::db::World>, DbFailure> {
    Ok(web::Json(peers::db::single(&pool).await?))
}

async fn db_queries(
    pool: Db,
    req: actix_web::HttpRequest,
) -> Result<web::Json<Vec<peers::db::World>>, DbFailure> {
    let n = peers::db::query_count(Some(req.query_string()));
    Ok(web::Json(peers::db::queries(&pool, n).await?))
}

async fn db_updates(
    pool: Db,
    req: actix_web::HttpRequest,
) -> Result<web::Json<Vec<peers::db::World>>, DbFailure> {
    let n = peers::db::query_count(Some(req.query_string()));
    Ok(web::Json(peers::db::updates(&pool, n).await?))
}

async fn db_fortunes(pool: Db) -> Result<HttpResponse, DbFailure> {
    let page = peers::db::fortunes(&pool).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(page))
}

/// The four database routes, sharing one deadpool pool of `DB_POOL` connections (created in
/// `main`, as actix's examples do); nothing without `DATABASE_URL`.
fn db_routes(cfg: &mut web::ServiceConfig, pool: &Option<Db>) {
    if let Some(pool) = pool {
        cfg.app_data(pool.clone())
            .route("/db", web::get().to(db_single))
            .route("/queries", web::get().to(db_queries))
            .route("/fortunes", web::get().to(db_fortunes))
            .route("/updates", web::get().to(db_updates));
    }
}

fn main() -> std::io::Result<()> {
    let addr = peers::addr();
    let workers = peers::workers();
    let large_data = web::Data::new(peers::large());
    let db_pool =
        peers::db::url().map(|url| web::Data::new(peers::db::pool(&url, peers::db::pool_total())));
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || {
            App::new()
                .app_data(large_data.clone())
                // actix adds Date; nothing adds Server, which the contract requires.
                .wrap(DefaultHeaders::new().add(("Server", "actix-web")))
                .route("/plaintext", web::get().to(plaintext))
                .route("/json", web::get().to(json))
                .route("/users/{id}", web::get().to(user))
                .route("/users", web::post().to(create_user))
                .route("/search", web::get().to(search))
                .route(
                    "/api/v1/orgs/{org}/teams/{team}/members/{member}",
                    web::get().to(member),
                )
                .service(
                    web::resource("/middleware")
                        .wrap(from_fn(mark::<1>))
                        .wrap(from_fn(mark::<2>))
                        .wrap(from_fn(mark::<3>))
                        .wrap(from_fn(mark::<4>))
                        .wrap(from_fn(mark::<5>))
                        .route(web::get().to(ok)),
                )
                .route("/error", web::get().to(error))
                .route("/large", web::get().to(large))
                .route("/empty", web::get().to(empty))
                .configure(|cfg| db_routes(cfg, &db_pool))
        })
        .workers(workers)
        // actix closes idle keep-alive connections after 5 s by default; the lab's idle-memory step
        // holds thousands of idle connections for longer than that, so 65 s (nginx's Debian value).
        .keep_alive(std::time::Duration::from_secs(65))
        // The lab stops servers with SIGTERM; do not linger 30 s draining connections.
        .shutdown_timeout(1)
        .bind(addr)?
        .run()
        .await
    })
}
