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
                // Runs on the worker's LocalRuntime: await and spawn_local work.
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
fn every_worker_builds_its_state_before_it_accepts() {
    // Each init records its worker thread; `serve` returns only once every worker is ready,
    // so all WORKERS inits have happened before the test opens its first connection.
    const WORKERS: usize = 3;
    let threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = threads.clone();
    let app = App::new()
        .on_worker_start(move |w: WorkerContext| {
            let seen = seen.clone();
            async move {
                // Slow, as a database connect is: startup waits for it.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                seen.lock().unwrap().push(w.thread_name().unwrap());
                Ok::<_, std::io::Error>(Pool {
                    worker: w.index(),
                    queries: Cell::new(0),
                    _not_send: Rc::new(()),
                })
            }
        })
        .route(
            "/q",
            get(|_r: Request, Local(p): Local<Pool>| async move { p.worker.to_string() }),
        );
    let server = TestServer::start_with(app, |c| c.server.workers = WORKERS);
    let mut names = threads.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["peregrine-w0", "peregrine-w1", "peregrine-w2"]);
    // The first request finds the state already built: no further init.
    assert_eq!(server.get("/q", &[]).status, 200);
    assert_eq!(threads.lock().unwrap().len(), WORKERS);
}

#[test]
fn a_failing_worker_init_fails_startup() {
    let app = App::new()
        .on_worker_start(|w: WorkerContext| async move {
            if w.thread_name().as_deref() == Some("peregrine-w1") {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "db at 10.0.0.7 refused",
                ));
            }
            Ok(Pool {
                worker: w.index(),
                queries: Cell::new(0),
                _not_send: Rc::new(()),
            })
        })
        .route("/q", get(query))
        .with_state(DbUrl("db://x"));
    let port = free_port();
    let config = peregrine::ServerConfig::builder()
        .addr(format!("127.0.0.1:{port}").parse().unwrap())
        .workers(2)
        .build();
    let e = app.serve(config).expect_err("startup must fail");
    // The engine names the worker and the hook, once; the framework adds nothing and keeps
    // the error's kind.
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(
        e.to_string(),
        "worker 1: on_worker_start hook failed: db at 10.0.0.7 refused"
    );
    // Nothing is left listening on the port.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_returns_a_failing_worker_init() {
    let app = App::new()
        .on_worker_start(|_w| async { Err::<Pool, _>(std::io::Error::other("no database")) })
        .route(
            "/q",
            get(|_r: Request, Local(p): Local<Pool>| async move { p.worker.to_string() }),
        );
    let config = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    // The shutdown future never completes: only the startup error ends run_until.
    let e = app
        .run_until(config, std::future::pending())
        .await
        .expect_err("startup must fail");
    assert!(e.to_string().contains("no database"), "{e}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

#[tokio::test]
async fn failed_init_of_a_bare_service_answers_503_and_is_retried() {
    // Outside App::serve (here the test client) state is built on first use: a failed init
    // is a 503 for that request and is retried by the next.
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let client =
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
            )
            .test();
    let r = client.get("/").send().await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(!r.text().contains("10.0.0.7"), "no internals: {}", r.text());
    let r = client.get("/").send().await;
    assert_eq!((r.status(), r.text()), (200, "9"));
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
        .serve(
            peregrine::ServerConfig::builder()
                .addr("127.0.0.1:0".parse().unwrap())
                .build(),
        )
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
    let config = peregrine::ServerConfig::builder()
        .addr(format!("127.0.0.1:{port}").parse().unwrap())
        .workers(1)
        .build();
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
