//! Per-worker state (`App::on_worker_start`, `Local<T>`, `Request::local`), shared state as a
//! handler argument (`State<T>`), missing-state detection when the app is built, and serving
//! from inside a tokio runtime (`run_async`/`run_until`, `run`'s error instead of a panic).

mod common;
use common::TestServer;
use peregrine::server::{Request as RawRequest, Service};
use peregrine::{get, App, Error, Local, Request, ResponseBody, State, WorkerContext};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A per-worker value that is neither `Send` nor `Sync` (as a pool bound to the worker's
/// runtime would be).
struct Pool {
    worker: usize,
    queries: Cell<u64>,
    _not_send: Rc<()>,
}

struct DbUrl(&'static str);

fn raw(target: &str) -> RawRequest {
    let bytes = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
    RawRequest::from_bytes(bytes.as_bytes(), "127.0.0.1:1".parse().unwrap()).unwrap()
}

fn body(res: &peregrine::Response) -> String {
    match &res.body {
        ResponseBody::Full(b) => String::from_utf8(b.to_vec()).unwrap(),
        _ => panic!("expected a full body"),
    }
}

async fn query(_req: Request, Local(pool): Local<Pool>, State(url): State<DbUrl>) -> String {
    pool.queries.set(pool.queries.get() + 1);
    format!("{} {} {}", url.0, pool.worker, pool.queries.get())
}

fn pool_app(inits: Arc<AtomicUsize>) -> App {
    App::new()
        .with_state(DbUrl("db://x"))
        .on_worker_start(move |w: WorkerContext| {
            let inits = inits.clone();
            async move {
                assert_eq!(w.state::<DbUrl>().unwrap().0, "db://x");
                // Runs on the worker's runtime, inside its LocalSet: await and spawn_local work.
                let answer = tokio::task::spawn_local(async { 41 + 1 }).await?;
                assert_eq!(answer, 42);
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                inits.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Pool {
                    worker: w.index(),
                    queries: Cell::new(0),
                    _not_send: Rc::new(()),
                })
            }
        })
        .route("/q", get(query))
}

#[test]
fn worker_state_is_built_once_per_worker_and_reaches_handlers() {
    let inits = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(pool_app(inits.clone()));
    for n in 1..=3 {
        let r = server.get("/q", &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("db://x 0 {n}"));
    }
    assert_eq!(inits.load(Ordering::SeqCst), 1);
}

#[test]
fn two_workers_each_build_their_own() {
    let inits = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start_with(pool_app(inits.clone()), |c| c.workers = 2);
    // New connections spread over both SO_REUSEPORT sockets; enough of them reach both.
    let mut workers_seen = std::collections::HashSet::new();
    for _ in 0..64 {
        let r = server.get("/q", &[]);
        assert_eq!(r.status, 200);
        workers_seen.insert(r.text().split(' ').nth(1).unwrap().to_owned());
        if workers_seen.len() == 2 {
            break;
        }
    }
    let n = inits.load(Ordering::SeqCst);
    assert_eq!(n, workers_seen.len(), "one build per worker that answered");
    assert!(n <= 2);
}

#[test]
fn concurrent_first_requests_share_one_init() {
    let inits = Arc::new(AtomicUsize::new(0));
    let svc = pool_app(inits.clone()).into_service();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let bodies = local.block_on(&rt, async {
        let (a, b, c) = tokio::join!(
            svc.call(raw("/q")),
            svc.call(raw("/q")),
            svc.call(raw("/q"))
        );
        [body(&a), body(&b), body(&c)]
    });
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    let mut counts: Vec<&str> = bodies
        .iter()
        .map(|b| b.rsplit(' ').next().unwrap())
        .collect();
    counts.sort();
    assert_eq!(counts, ["1", "2", "3"]);
}

#[test]
fn failed_init_answers_503_and_is_retried() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let app =
        App::new()
            .on_worker_start(move |_w| {
                let n = a.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        Err(std::io::Error::other("db at 10.0.0.7 refused"))
                    } else {
                        Ok(Pool {
                            worker: 9,
                            queries: Cell::new(0),
                            _not_send: Rc::new(()),
                        })
                    }
                }
            })
            .route(
                "/",
                get(|req: Request| async move {
                    Ok::<_, Error>(req.local::<Pool>()?.worker.to_string())
                }),
            );
    let server = TestServer::start(app);
    let r = server.get("/", &[]);
    let j = r.assert_problem(503, "Service Unavailable");
    assert!(!r.text().contains("10.0.0.7"), "no internals: {j}");
    let r = server.get("/", &[]);
    assert_eq!((r.status, r.text()), (200, "9"));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[test]
fn initialisers_see_earlier_values_and_middleware_sees_them_too() {
    struct Prefix(String);
    struct Counter(RefCell<Vec<String>>);
    let app = App::new()
        .worker_local(|_w| Prefix("w".into()))
        .on_worker_start(|w: WorkerContext| async move {
            let p = w.local::<Prefix>().expect("built before");
            Ok::<_, std::convert::Infallible>(Counter(RefCell::new(vec![p.0.clone()])))
        })
        .route(
            "/",
            get(|_req: Request, Local(c): Local<Counter>| async move { c.0.borrow().join(",") }),
        )
        .layer(peregrine::middleware::from_fn(
            |req: Request, next: peregrine::middleware::Next| async move {
                req.local::<Counter>()
                    .unwrap()
                    .0
                    .borrow_mut()
                    .push("mw".into());
                next.run(req).await
            },
        ));
    let server = TestServer::start(app);
    assert_eq!(server.get("/", &[]).text(), "w,mw");
    assert_eq!(server.get("/", &[]).text(), "w,mw,mw");
}

#[test]
fn missing_shared_state_is_a_build_error() {
    struct Config;
    async fn h(_req: Request, _c: State<Config>) -> &'static str {
        "x"
    }
    let err = App::new()
        .route("/cfg", get(h))
        .try_into_service()
        .err()
        .expect("must not build");
    assert!(err.contains("GET /cfg"), "{err}");
    assert!(err.contains("State<") && err.contains("Config"), "{err}");
    assert!(err.contains("with_state"), "{err}");

    // Through a nested group, and through serve (an InvalidInput error, not a panic).
    let group = peregrine::Router::new().route("/x", get(h));
    let e = App::new()
        .nest("/api", group)
        .serve(peregrine::ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("GET /api/x"), "{e}");
}

#[test]
fn missing_worker_state_is_a_build_error() {
    async fn h(_req: Request, _p: Local<Pool>) -> &'static str {
        "x"
    }
    let err = App::new()
        .route("/p", peregrine::post(h))
        .try_into_service()
        .err()
        .expect("must not build");
    assert!(
        err.contains("POST /p") && err.contains("on_worker_start"),
        "{err}"
    );
    let fallback = App::new().fallback(h).try_into_service().err().unwrap();
    assert!(fallback.contains("fallback"), "{fallback}");
}

#[test]
fn state_in_handler_body_is_still_a_logged_500_at_run_time() {
    // Not statically visible: documented as checked only when it runs.
    struct Missing;
    let svc = App::new()
        .route(
            "/",
            get(|req: Request| async move {
                req.state::<Missing>()?;
                Ok::<_, Error>("unreachable")
            }),
        )
        .into_service();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let res = rt.block_on(svc.call(raw("/")));
    assert_eq!(res.status, 500);
    assert!(!body(&res).contains("Missing"));
}

#[tokio::test]
async fn run_inside_a_runtime_is_an_error_not_a_panic() {
    let e = App::new()
        .run(peregrine::ServerConfig::default())
        .unwrap_err();
    assert!(e.to_string().contains("run_async"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_serves_inside_tokio_main_and_shuts_down() {
    // Find a free port first: run_until does not hand the address back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = peregrine::ServerConfig {
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        workers: 1,
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        App::new()
            .route("/", get(|_req: Request| async { "inside tokio" }))
            .run_until(config, async {
                let _ = stopped.await;
            }),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let text = tokio::task::spawn_blocking(move || {
        for _ in 0..200 {
            if let Ok(mut s) = std::net::TcpStream::connect(addr) {
                use std::io::{Read, Write};
                s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut out = String::new();
                s.read_to_string(&mut out).unwrap();
                return out;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("server never listened");
    })
    .await
    .unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("inside tokio"), "{text}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
