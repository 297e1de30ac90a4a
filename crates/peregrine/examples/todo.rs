//! A todo service written the way an axum user would write it: JSON CRUD on shared state,
//! pagination, validation errors as RFC 9457 problem documents with per-field errors, a custom
//! error type, a bearer-token auth extractor, CORS, request logging, a streamed NDJSON export,
//! and graceful shutdown on SIGTERM/SIGINT from `#[tokio::main]`.
//!
//! ```sh
//! TODO_TOKEN=secret cargo run --example todo            # 127.0.0.1:3000
//! curl -s localhost:3000/todos -H 'authorization: Bearer secret' \
//!      -H 'content-type: application/json' -d '{"title":"fly south","due":"2026-12-01"}'
//! curl -s 'localhost:3000/todos?page=1&per_page=10' -H 'authorization: Bearer secret'
//! curl -s localhost:3000/todos/export -H 'authorization: Bearer secret'   # NDJSON, streamed
//! ```
//!
//! Tested by `tests/todo.rs` through the in-process test client.

use peregrine::middleware::{Cors, Logger};
use peregrine::{
    get, App, Error, Extract, IntoResponse, Json, Need, Request, Response, State, StatusCode,
    StreamBody,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Shared by every worker: the store and the API token.
pub struct AppState {
    todos: Mutex<Store>,
    token: String,
}

#[derive(Default)]
struct Store {
    next_id: u64,
    items: BTreeMap<u64, Todo>,
}

impl AppState {
    pub fn new(token: impl Into<String>) -> Self {
        AppState {
            todos: Mutex::new(Store {
                next_id: 1,
                items: BTreeMap::new(),
            }),
            token: token.into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Todo {
    pub id: u64,
    pub title: String,
    pub done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
}

/// What a client sends to create or replace a todo.
#[derive(Debug, Deserialize)]
pub struct NewTodo {
    #[serde(default)]
    title: String,
    #[serde(default)]
    done: bool,
    due: Option<String>,
}

/// A partial update.
#[derive(Debug, Deserialize)]
pub struct PatchTodo {
    title: Option<String>,
    done: Option<bool>,
    due: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Page {
    page: Option<u32>,
    per_page: Option<u32>,
}

#[derive(Serialize)]
struct PageOf<T> {
    items: Vec<T>,
    page: u32,
    per_page: u32,
    total: usize,
}

/// The service's errors; each knows its answer.
#[derive(Debug)]
pub enum AppError {
    NotFound(u64),
    Invalid(Vec<(&'static str, String)>),
    Framework(Error),
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            AppError::NotFound(id) => Error::not_found()
                .with_type("https://todo.example/problems/not-found")
                .with_detail(format!("no todo with id {id}")),
            AppError::Invalid(fields) => fields.into_iter().fold(
                Error::unprocessable()
                    .with_type("https://todo.example/problems/validation")
                    .with_title("The todo is not valid"),
                |e, (field, why)| e.with_field_error(field, why),
            ),
            AppError::Framework(e) => e,
        }
        .into_response()
    }
}

/// Extractor and body errors (400, 413, 415...) keep their own answer.
impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Framework(e)
    }
}

type Result<T, E = AppError> = std::result::Result<T, E>;

/// The caller, from `Authorization: Bearer <token>`; 401 with `WWW-Authenticate` otherwise.
pub struct Authorized;

impl Extract for Authorized {
    fn extract(req: &Request) -> Result<Self, Error> {
        let state = req.state::<AppState>()?;
        let given = req
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "));
        match given {
            Some(t) if t == state.token => Ok(Authorized),
            _ => Err(Error::unauthorized()
                .with_detail("a valid bearer token is required")
                .with_header("www-authenticate", "Bearer realm=\"todo\"")),
        }
    }
    fn needs(needs: &mut Vec<Need>) {
        needs.push(Need::shared::<AppState>());
    }
}

fn validate(t: &NewTodo) -> Result<()> {
    let mut errors = Vec::new();
    let title = t.title.trim();
    if title.is_empty() {
        errors.push(("title", "must not be empty".to_owned()));
    } else if title.chars().count() > 200 {
        errors.push(("title", "must be at most 200 characters".to_owned()));
    }
    if let Some(due) = &t.due {
        if !is_date(due) {
            errors.push(("due", format!("{due:?} is not a date (YYYY-MM-DD)")));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(AppError::Invalid(errors))
    }
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && matches!(s[5..7].parse::<u8>(), Ok(1..=12))
        && matches!(s[8..10].parse::<u8>(), Ok(1..=31))
}

async fn list(
    req: Request,
    State(state): State<AppState>,
    _: Authorized,
) -> Result<impl IntoResponse> {
    let q: Page = req.query()?;
    let per_page = q.per_page.unwrap_or(20);
    let page = q.page.unwrap_or(1);
    if !(1..=100).contains(&per_page) || page == 0 {
        return Err(AppError::Invalid(vec![(
            "per_page",
            "page must be at least 1 and per_page between 1 and 100".to_owned(),
        )]));
    }
    let store = state.todos.lock().unwrap();
    let items = store
        .items
        .values()
        .skip(((page - 1) * per_page) as usize)
        .take(per_page as usize)
        .cloned()
        .collect();
    Ok(Json(PageOf {
        items,
        page,
        per_page,
        total: store.items.len(),
    }))
}

async fn create(
    mut req: Request,
    State(state): State<AppState>,
    _: Authorized,
) -> Result<impl IntoResponse> {
    let new: NewTodo = req.json().await?;
    validate(&new)?;
    let mut store = state.todos.lock().unwrap();
    let id = store.next_id;
    store.next_id += 1;
    let todo = Todo {
        id,
        title: new.title.trim().to_owned(),
        done: new.done,
        due: new.due,
    };
    store.items.insert(id, todo.clone());
    Ok((
        StatusCode::CREATED,
        [("location", format!("/todos/{id}"))],
        Json(todo),
    ))
}

async fn show(req: Request, State(state): State<AppState>, _: Authorized) -> Result<Json<Todo>> {
    let id: u64 = req.param("id")?;
    let store = state.todos.lock().unwrap();
    store
        .items
        .get(&id)
        .cloned()
        .map(Json)
        .ok_or(AppError::NotFound(id))
}

async fn replace(
    mut req: Request,
    State(state): State<AppState>,
    _: Authorized,
) -> Result<Json<Todo>> {
    let id: u64 = req.param("id")?;
    let new: NewTodo = req.json().await?;
    validate(&new)?;
    let mut store = state.todos.lock().unwrap();
    let todo = store.items.get_mut(&id).ok_or(AppError::NotFound(id))?;
    *todo = Todo {
        id,
        title: new.title.trim().to_owned(),
        done: new.done,
        due: new.due,
    };
    Ok(Json(todo.clone()))
}

async fn update(
    mut req: Request,
    State(state): State<AppState>,
    _: Authorized,
) -> Result<Json<Todo>> {
    let id: u64 = req.param("id")?;
    let patch: PatchTodo = req.json().await?;
    let mut store = state.todos.lock().unwrap();
    let current = store
        .items
        .get(&id)
        .cloned()
        .ok_or(AppError::NotFound(id))?;
    let merged = NewTodo {
        title: patch.title.unwrap_or(current.title),
        done: patch.done.unwrap_or(current.done),
        due: patch.due.or(current.due),
    };
    validate(&merged)?;
    let todo = Todo {
        id,
        title: merged.title.trim().to_owned(),
        done: merged.done,
        due: merged.due,
    };
    store.items.insert(id, todo.clone());
    Ok(Json(todo))
}

async fn remove(req: Request, State(state): State<AppState>, _: Authorized) -> Result<StatusCode> {
    let id: u64 = req.param("id")?;
    match state.todos.lock().unwrap().items.remove(&id) {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(AppError::NotFound(id)),
    }
}

/// Every todo as one JSON document per line, streamed as it is produced (the store is copied
/// out first, so the lock is not held while the client reads).
async fn export(_req: Request, State(state): State<AppState>, _: Authorized) -> StreamBody {
    let todos: Vec<Todo> = state
        .todos
        .lock()
        .unwrap()
        .items
        .values()
        .cloned()
        .collect();
    let (tx, body) = StreamBody::channel(16);
    tokio::task::spawn_local(async move {
        for t in todos {
            let mut line = serde_json::to_vec(&t).expect("a todo serialises");
            line.push(b'\n');
            if tx.send(line).await.is_err() {
                break; // the client went away
            }
        }
    });
    body.content_type("application/x-ndjson")
}

/// The application, also used by `tests/todo.rs`.
pub fn app(state: AppState) -> App {
    App::new()
        .with_state(state)
        .route("/todos", get(list).post(create))
        .route("/todos/export", get(export))
        .route(
            "/todos/{id}",
            get(show).put(replace).patch(update).delete(remove),
        )
        .route("/health", get(|_req: Request| async { "ok" }))
        .layer(
            Cors::new()
                .allow_origin("https://todo.example")
                .allow_headers(["content-type", "authorization"])
                .expose_headers(["location"])
                .max_age(600),
        )
        .layer(Logger::new())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("ADDR").is_none() && !args.iter().any(|a| a.starts_with("--addr")) {
        args.extend(["--addr".into(), "127.0.0.1:3000".into()]);
    }
    let config = peregrine::config::from_env_and_args(args)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let token = std::env::var("TODO_TOKEN").unwrap_or_else(|_| "dev-token".into());
    println!("todo service on http://{}", config.server.addr);
    // Until SIGTERM / SIGINT; in-flight requests finish (config.timeouts.shutdown).
    app(AppState::new(token)).run_async(config).await
}
