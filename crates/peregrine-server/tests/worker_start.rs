//! The worker-start hook (`Server::on_worker_start`): it runs on every worker thread, on that
//! worker's `LocalRuntime`, before the worker accepts; a failing hook fails `serve`.

mod common;
use peregrine_server::{service_fn, Request, Response, Server};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

thread_local! {
    /// What the hook built on this worker thread (a pool would live here).
    static BUILT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::CLIENT_WAIT)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn every_worker_runs_its_hooks_before_serve_returns() {
    const WORKERS: usize = 3;
    let log = Arc::new(Mutex::new(Vec::new()));
    let (first, second) = (log.clone(), log.clone());
    let config = peregrine_server::ServerConfig {
        workers: WORKERS,
        ..common::config()
    };
    let handle = Server::new(config)
        .on_worker_start(move |worker| {
            let log = first.clone();
            async move {
                // On the worker's LocalRuntime: spawn_local and timers work.
                let n = tokio::task::spawn_local(async move { worker * 10 })
                    .await
                    .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                BUILT.with(|b| b.set(Some(n)));
                let thread = std::thread::current().name().unwrap().to_owned();
                log.lock().unwrap().push(format!("{thread} first {worker}"));
                Ok(())
            }
        })
        .on_worker_start(move |worker| {
            let log = second.clone();
            async move {
                log.lock().unwrap().push(format!("second {worker}"));
                Ok(())
            }
        })
        .serve(service_fn(|_req: Request| async {
            let built = BUILT.with(|b| b.get());
            Response::text(format!("{built:?}"))
        }))
        .unwrap();
    // Before any connection: every worker ran both hooks, in the order registered.
    let entries = log.lock().unwrap().clone();
    assert_eq!(entries.len(), 2 * WORKERS, "{entries:?}");
    for w in 0..WORKERS {
        let first = entries
            .iter()
            .position(|e| *e == format!("peregrine-w{w} first {w}"))
            .unwrap_or_else(|| panic!("worker {w} ran the first hook on its thread: {entries:?}"));
        let second = entries
            .iter()
            .position(|e| *e == format!("second {w}"))
            .unwrap();
        assert!(first < second, "{entries:?}");
    }
    // And what the hook built on the worker thread is what the service sees there.
    let res = get(handle.local_addr(), "/");
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    let built = res.rsplit("\r\n\r\n").next().unwrap();
    assert!(
        ["Some(0)", "Some(10)", "Some(20)"].contains(&built),
        "{res}"
    );
    handle.shutdown();
}

#[test]
fn a_failing_hook_fails_serve_and_nothing_listens() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = peregrine_server::ServerConfig {
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        workers: 2,
        ..common::config()
    };
    let err = Server::new(config)
        .on_worker_start(|worker| async move {
            if worker == 1 {
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "database refused",
                ))
            } else {
                Ok(())
            }
        })
        .serve(service_fn(|_req: Request| async {
            Response::text("never")
        }))
        .expect_err("startup must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(
        err.to_string(),
        "worker 1: on_worker_start hook failed: database refused"
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_hook_that_never_finishes_is_stopped_when_another_fails() {
    // Worker 0 hangs (a database that never answers); worker 1 fails: serve still returns.
    let config = peregrine_server::ServerConfig {
        workers: 2,
        ..common::config()
    };
    let err = Server::new(config)
        .on_worker_start(|worker| async move {
            if worker == 0 {
                std::future::pending::<()>().await;
            }
            Err(std::io::Error::other("no database"))
        })
        .serve(service_fn(|_req: Request| async {
            Response::text("never")
        }))
        .expect_err("startup must fail");
    assert!(err.to_string().contains("no database"), "{err}");
}

thread_local! {
    /// Set by a local task a handler left running after its response.
    static LEFT_BEHIND: Cell<u32> = const { Cell::new(0) };
}

#[test]
fn handlers_spawn_local_tasks_on_their_worker() {
    // Connection tasks are the worker's `LocalRuntime`'s own tasks: a handler's `spawn_local`
    // runs on the same worker thread, both for a task it awaits and for one that outlives its
    // response.
    let config = peregrine_server::ServerConfig {
        workers: 1,
        ..common::config()
    };
    let handle = Server::new(config)
        .serve(service_fn(|req: Request| async move {
            if req.path() == "/leave" {
                tokio::task::spawn_local(async {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    LEFT_BEHIND.with(|n| n.set(n.get() + 1));
                });
                return Response::text("left");
            }
            let thread = std::thread::current().name().unwrap().to_owned();
            let (awaited, on) = tokio::task::spawn_local(async move {
                let on = std::thread::current().name().unwrap().to_owned();
                (LEFT_BEHIND.with(|n| n.get()), on)
            })
            .await
            .unwrap();
            Response::text(format!("{awaited} {}", on == thread))
        }))
        .unwrap();
    let addr = handle.local_addr();
    let body = |res: String| res.rsplit("\r\n\r\n").next().unwrap().to_owned();
    assert_eq!(body(get(addr, "/awaited")), "0 true");
    assert_eq!(body(get(addr, "/leave")), "left");
    let deadline = std::time::Instant::now() + common::CLIENT_WAIT;
    loop {
        let seen = body(get(addr, "/awaited"));
        if seen == "1 true" {
            break;
        }
        assert_eq!(seen, "0 true");
        assert!(
            std::time::Instant::now() < deadline,
            "the left task never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    handle.shutdown();
}

/// Where a never-ending local task was dropped (the worker's thread name), or `None` yet.
static DROPPED_ON: Mutex<Option<String>> = Mutex::new(None);

/// Records, when dropped, the thread it was dropped on.
struct DropProbe;

impl Drop for DropProbe {
    fn drop(&mut self) {
        let on = std::thread::current().name().unwrap_or("?").to_owned();
        *DROPPED_ON.lock().unwrap() = Some(on);
    }
}

#[test]
fn local_tasks_still_running_at_stop_are_dropped_on_their_worker() {
    // A handler's local task that never ends (a subscription, say) does not keep the worker
    // alive: when the worker stops, its runtime drops it, on the worker thread, before
    // `shutdown` returns.
    let config = peregrine_server::ServerConfig {
        workers: 1,
        ..common::config()
    };
    let handle = Server::new(config)
        .serve(service_fn(|_req: Request| async move {
            let (started, running) = tokio::sync::oneshot::channel();
            tokio::task::spawn_local(async move {
                let _probe = DropProbe;
                let _ = started.send(());
                std::future::pending::<()>().await;
            });
            running.await.unwrap();
            Response::text("spawned")
        }))
        .unwrap();
    let res = get(handle.local_addr(), "/");
    assert!(res.ends_with("spawned"), "{res}");
    assert_eq!(*DROPPED_ON.lock().unwrap(), None);
    handle.shutdown();
    assert_eq!(DROPPED_ON.lock().unwrap().as_deref(), Some("peregrine-w0"));
}

#[test]
fn handlers_tokio_spawn_runs_on_their_worker() {
    // `tokio::spawn` (a `Send` task) from a handler lands on the worker's own runtime, which is
    // a current-thread one: the task runs on the worker thread.
    let config = peregrine_server::ServerConfig {
        workers: 1,
        ..common::config()
    };
    let handle = Server::new(config)
        .serve(service_fn(|_req: Request| async move {
            let here = std::thread::current().name().unwrap().to_owned();
            let there = tokio::spawn(async { std::thread::current().name().unwrap().to_owned() })
                .await
                .unwrap();
            Response::text(format!("{}", here == there))
        }))
        .unwrap();
    let res = get(handle.local_addr(), "/");
    assert!(res.ends_with("\r\n\r\ntrue"), "{res}");
    handle.shutdown();
}
