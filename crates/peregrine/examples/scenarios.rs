//! The lab's scenario application ("peregrine" in the lab): exactly the contract of
//! `lab/contract/scenarios.json`, plus the protocols a deployment needs, none of
//! which any contract scenario uses.
//!
//! ```sh
//! ADDR=127.0.0.1:8080 WORKERS=2 cargo run --release --example scenarios --features tls,http2,ws
//! # or: cargo run --release --example scenarios --features tls,http2,ws -- --addr 127.0.0.1:8080 --workers 2
//! curl --http2-prior-knowledge http://127.0.0.1:8080/json   # h2c (feature http2)
//! curl -N http://127.0.0.1:8080/events                      # server-sent events
//! # over TLS, HTTP/2 or HTTP/1.1 by ALPN (feature tls), on ADDR instead of cleartext:
//! TLS_CERT=cert.pem TLS_KEY=key.pem cargo run --release --example scenarios --features tls,http2,ws -- --tls
//! curl -k --http2 https://127.0.0.1:8080/plaintext
//! ```
//!
//! * Cleartext (the lab's plaintext profiles): HTTP/1.1, and HTTP/2 with prior knowledge (h2c)
//!   when built with `http2` (the engine recognises the preface only on the HTTP/1.1 parser's
//!   error path, so HTTP/1.1 pays nothing for it).
//! * TLS with `--tls` (built with `tls`), the certificate from `TLS_CERT` / `TLS_KEY` (the
//!   engine's `TlsConfig::from_env`, as `hello_tls` and the `chat` example take them; also
//!   `TLS_CLIENT_CA` for mTLS): ADDR then speaks TLS only, `h2` or `http/1.1` by ALPN;
//!   certificates are reloaded on SIGHUP. `--tls` without both variables is an error; without
//!   `--tls` the variables are ignored (a stray `TLS_CERT` does not switch the lab's cleartext
//!   peer to TLS). The lab measures this as `peregrine-framework-tls` (`./scripts/lab
//!   protocols`, which passes `--tls`).
//! * `GET /ws` (feature `ws`): a WebSocket echo of text and binary messages up to 64 KiB
//!   (larger: close 1009), over HTTP/1.1 `Upgrade` and HTTP/2 extended CONNECT (RFC 8441).
//! * `GET /events`: server-sent events: three events (`id`, `event`, `data`, one of them with
//!   multi-line data), then a keep-alive comment every second until the client goes.
//!
//! * `GET /files/{*path}` when `STATIC_DIR` names a directory: its files through `ServeDir`
//!   (ranges, conditional requests, large files streamed from the descriptor). The probe's
//!   resource attacks (`probe/run_attacks.sh`) read a large file slowly through it.
//!
//! * `POST /upload` (feature `multipart`): a `multipart/form-data` body read part by part;
//!   answers `{"parts": N, "bytes": M}` (the soak's uploads check both).
//! * `POST /ledger` when `LEDGER` names a file: appends the body (one request id, at most 64
//!   bytes) to it as a line and answers 201: the restart measurement (`./scripts/lab restart`)
//!   counts in that file how often each request was executed, across processes.
//! * `ACCESS_LOG` naming a file: the access log (`peregrine::access_log`, one JSON line per
//!   request, the engine's refusals and timeouts included) appended to it; the restart
//!   measurement counts its lines, across processes, against the requests its clients sent.
//! * `GET /debug/heap` (Linux with glibc): the allocator's own figures, `{"in_use": B,
//!   "system": B}` (`mallinfo2`: bytes in allocated chunks, and bytes it holds from the
//!   system): the soak (`./scripts/lab soak`) budgets the live heap next to RSS with it.
//!
//! Stops gracefully on SIGTERM / SIGINT. With `DATABASE_URL` set it also serves the database
//! scenarios of `lab/contract/db.json` (`scenarios-db/db.rs`); without it, exactly the above.
//! Started with a listener handed over (`LISTEN_FDS=1`, `LISTEN_PID`, the socket at descriptor
//! 3: systemd socket activation or a restarting predecessor), it serves that listener instead
//! of binding `ADDR` (over TLS with `--tls`, without SIGHUP reloads).

use peregrine::access_log::AccessLog;
use peregrine::middleware::Hook;
use peregrine::server::events::EngineEvents;
use peregrine::sse::{Event, Sse};
use peregrine::{get, post, App, Error, IntoResponse, Json, Request, Response, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[path = "scenarios-db/db.rs"]
mod db;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

async fn plaintext(_req: Request) -> &'static str {
    "Hello, World!"
}

async fn json(_req: Request) -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

#[derive(Serialize)]
struct User {
    id: u64,
    name: String,
}

async fn user(req: Request) -> Result<Response, Error> {
    let id: u64 = req.param("id")?;
    // The name is built as a String, as every peer builds it (the lab compares like with like).
    Ok(Json(User {
        id,
        name: format!("user-{id}"),
    })
    .into_response())
}

#[derive(Serialize, Deserialize)]
struct Search {
    q: String,
    limit: u32,
}

async fn search(req: Request) -> Result<Json<Search>, Error> {
    Ok(Json(req.query::<Search>()?))
}

#[derive(Serialize, Deserialize)]
struct NewUser {
    name: String,
    email: String,
    age: u32,
}

async fn create_user(mut req: Request) -> Result<(u16, Json<NewUser>), Error> {
    let user: NewUser = req.json().await?;
    Ok((201, Json(user)))
}

#[derive(Serialize)]
struct Member {
    org: u64,
    team: u64,
    member: u64,
}

#[cfg(feature = "multipart")]
#[derive(Serialize)]
struct Upload {
    parts: usize,
    bytes: u64,
}

/// `POST /upload`: every part read to its end, counted.
#[cfg(feature = "multipart")]
async fn upload(mut req: Request) -> Result<Json<Upload>, Error> {
    let mut form = req.multipart()?;
    let mut out = Upload { parts: 0, bytes: 0 };
    while let Some(mut field) = form.next_field().await? {
        out.parts += 1;
        while let Some(chunk) = field.chunk().await? {
            out.bytes += chunk.len() as u64;
        }
    }
    Ok(Json(out))
}

/// `app` with `POST /ledger` appending to `file` (`LEDGER`), or unchanged without one.
pub fn with_ledger(app: App, file: Option<std::ffi::OsString>) -> App {
    match file {
        Some(path) => app
            .with_state(Ledger(std::sync::Arc::new(path.into())))
            .route("/ledger", post(ledger)),
        None => app,
    }
}

/// The file `POST /ledger` appends to (`LEDGER`).
#[derive(Clone)]
struct Ledger(std::sync::Arc<std::path::PathBuf>);

/// `POST /ledger`: the request id in the body, appended as one line (`O_APPEND`: the lines of
/// two processes sharing the file do not interleave) before the 201 is sent.
async fn ledger(mut req: Request) -> Result<Response, Error> {
    use tokio::io::AsyncWriteExt;
    let path = req.state::<Ledger>()?.0.clone();
    let id = req.text().await?;
    if id.is_empty() || id.len() > 64 || id.contains(['\n', '\r']) {
        return Err(
            Error::bad_request().with_detail("the body must be one request id of 1 to 64 bytes")
        );
    }
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path.as_path())
        .await
        .map_err(Error::internal_from)?;
    file.write_all(format!("{id}\n").as_bytes())
        .await
        .map_err(Error::internal_from)?;
    // tokio's `write_all` only hands the bytes to a blocking task; `flush` waits until they
    // are written, so the line is in the file before the 201 says so.
    file.flush().await.map_err(Error::internal_from)?;
    Ok(Response::new(201))
}

async fn member(req: Request) -> Result<Json<Member>, Error> {
    Ok(Json(Member {
        org: req.param("org")?,
        team: req.param("team")?,
        member: req.param("member")?,
    }))
}

async fn middleware_ok(_req: Request) -> &'static str {
    "OK"
}

/// One of the five layers of the middleware scenario: adds `x-mw-N: 1` to the response.
/// A synchronous [`Hook`]: it awaits nothing, so the five of them are composed into one
/// wrapper at startup (one allocation per request for the whole stack).
struct MarkLayer(&'static str);

impl Hook for MarkLayer {
    fn after(&self, res: &mut Response) {
        res.headers.push((self.0.into(), b"1"[..].into()));
    }
}

async fn error(_req: Request) -> Result<&'static str, Error> {
    // A failure from below (here: an I/O error) goes through the framework's error path: the
    // client gets the bare 500 problem document, the cause goes to the log.
    Err(std::io::Error::other("simulated backend failure"))?
}

#[derive(Serialize)]
struct Item {
    id: u32,
    name: String,
    active: bool,
    score: u32,
    tags: [&'static str; 2],
}

#[derive(Serialize)]
struct Large {
    items: Vec<Item>,
}

impl Large {
    /// The data of `lab/contract/large.json`: 134 items.
    fn build() -> Self {
        let items = (0..134)
            .map(|i| Item {
                id: i,
                name: format!("item-{i}"),
                active: i % 2 == 0,
                score: i * 7 % 100,
                tags: ["alpha", "beta"],
            })
            .collect();
        Large { items }
    }
}

async fn large(req: Request) -> Result<Response, Error> {
    // Serialised per request from the structure built at startup (shared state).
    let large = req.state::<Large>()?;
    Ok(Json(large).into_response())
}

async fn empty(_req: Request) -> Response {
    Response::new(204)
}

/// The application, also used by `tests/scenarios.rs`.
pub fn app() -> App {
    let layered = Router::new()
        .route("/middleware", get(middleware_ok))
        .hook(MarkLayer("x-mw-5"))
        .hook(MarkLayer("x-mw-4"))
        .hook(MarkLayer("x-mw-3"))
        .hook(MarkLayer("x-mw-2"))
        .hook(MarkLayer("x-mw-1"));
    let app = App::new()
        .with_state(Large::build())
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
        .route("/events", get(events))
        .merge(layered);
    #[cfg(feature = "ws")]
    let app = app.route("/ws", get(ws_echo));
    #[cfg(feature = "multipart")]
    let app = app.route("/upload", post(upload));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let app = match GLIBC_HEAP.load(std::sync::atomic::Ordering::Relaxed) {
        true => app.route("/debug/heap", get(heap)),
        false => app,
    };
    let app = with_ledger(app, std::env::var_os("LEDGER"));
    let app = match std::env::var_os("STATIC_DIR") {
        Some(dir) => app.merge(peregrine::fs::ServeDir::new(dir).router("/files")),
        None => app,
    };
    db::routes(app)
}

/// Whether glibc's malloc is the allocator, so `GET /debug/heap` tells the truth; the
/// `scenarios_mimalloc` build clears it before the app is built.
pub static GLIBC_HEAP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// What `GET /debug/heap` answers: bytes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[derive(Serialize)]
struct Heap {
    in_use: usize,
    system: usize,
}

/// `GET /debug/heap`: glibc's live heap. RSS also counts what the allocator keeps after a free
/// (per-thread arenas, fragmentation), so only this tells a leak from the allocator settling;
/// chunks in glibc's per-thread caches count as in use (the soak turns those caches off).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
async fn heap(_req: Request) -> Json<Heap> {
    // SAFETY: mallinfo2 only reads the allocator's statistics (under its arena locks).
    let info = unsafe { libc::mallinfo2() };
    Json(Heap {
        in_use: info.uordblks + info.hblkhd,
        system: info.arena + info.hblkhd,
    })
}

/// Interval of the keep-alive comments of `/events` (short, so a demo client sees them).
pub const EVENTS_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /events`: three events, then keep-alive comments until the client goes (the engine
/// drops the response body, and the stream with it, when the connection or stream closes).
async fn events(_req: Request) -> Result<Sse, Error> {
    use futures_util::StreamExt;
    let first = [
        Event::data("Hello, World!").id("1").event("greeting"),
        Event::data("line one\nline two\nline three")
            .id("2")
            .event("lines"),
        Event::json(&Message {
            message: "Hello, World!",
        })?
        .id("3")
        .event("json"),
    ];
    let events = futures_util::stream::iter(first).chain(futures_util::stream::pending());
    Ok(Sse::new(events).keep_alive(Some(EVENTS_KEEP_ALIVE)))
}

/// Largest WebSocket message (and frame) `/ws` accepts, in bytes; larger closes with 1009.
#[cfg(feature = "ws")]
pub const WS_MAX_MESSAGE: usize = 64 * 1024;

/// `GET /ws`: a WebSocket echo (text and binary) until the client closes.
#[cfg(feature = "ws")]
async fn ws_echo(req: Request) -> Result<Response, Error> {
    use peregrine::ws::{Message, WebSocketUpgrade};
    let upgrade = WebSocketUpgrade::from_request(&req)?
        .max_message_size(WS_MAX_MESSAGE)
        .max_frame_size(WS_MAX_MESSAGE);
    Ok(upgrade.on_upgrade(|mut ws| async move {
        while let Some(Ok(msg)) = ws.recv().await {
            if matches!(msg, Message::Text(_) | Message::Binary(_)) && ws.send(msg).await.is_err() {
                break;
            }
        }
    }))
}

/// Starts the app: TLS on `config.addr` when `tls` is given (HTTP/2 or HTTP/1.1 by ALPN),
/// else cleartext (HTTP/1.1, and h2c with the `http2` feature). Also used by
/// `tests/scenarios_protocols.rs`.
#[cfg(feature = "tls")]
pub fn serve(
    config: peregrine::ServerConfig,
    tls: Option<peregrine::server::tls::TlsAcceptor>,
) -> std::io::Result<peregrine::server::ServerHandle> {
    let (server, service) = app().into_server(config)?;
    match tls {
        None => server.serve(service),
        Some(acceptor) => server.with_acceptor(acceptor).serve(service),
    }
}

/// How the app serves `ADDR`: cleartext unless TLS is asked for with `--tls`.
#[derive(Debug, PartialEq, Eq)]
pub enum Transport {
    /// Cleartext (HTTP/1.1, and h2c with `http2`); the TLS variables that were set anyway,
    /// ignored (a note on stderr says so).
    Cleartext { ignored: Vec<&'static str> },
    /// TLS with the certificate of `TLS_CERT` / `TLS_KEY` (both set).
    Tls,
}

/// The environment variables the TLS setup reads (`TlsConfig::from_env`).
const TLS_VARS: [&str; 4] = ["TLS_CERT", "TLS_KEY", "TLS_CLIENT_CA", "TLS_CLIENT_AUTH"];

/// TLS is an explicit choice: `--tls` (taken out of `args`), which needs both `TLS_CERT` and
/// `TLS_KEY`. Without the flag the TLS variables are ignored, so a `TLS_CERT` left in a shell
/// cannot turn the lab's cleartext peer into a TLS one. `var` reads the environment.
pub fn choose_transport(
    args: &mut Vec<String>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Transport, String> {
    let given = args.len();
    args.retain(|a| a != "--tls");
    if args.len() == given {
        let ignored = TLS_VARS.into_iter().filter(|v| var(v).is_some()).collect();
        return Ok(Transport::Cleartext { ignored });
    }
    let missing: Vec<&str> = ["TLS_CERT", "TLS_KEY"]
        .into_iter()
        .filter(|v| var(v).is_none_or(|value| value.trim().is_empty()))
        .collect();
    match missing[..] {
        [] => Ok(Transport::Tls),
        [one] => Err(format!(
            "--tls needs TLS_CERT and TLS_KEY (paths of the PEM certificate and private key); \
             {one} is not set"
        )),
        _ => Err(
            "--tls needs TLS_CERT and TLS_KEY (paths of the PEM certificate and private \
                  key); neither is set"
                .to_string(),
        ),
    }
}

/// Reads the command line and the environment, then serves until a signal.
pub fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let env = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let transport = choose_transport(&mut args, env).and_then(|transport| {
        // TLS is chosen by `--tls` alone: the framework's reading of the TLS variables is
        // left out, so a stray TLS_CERT neither switches nor fails the cleartext peer.
        let engine_vars = |name: &str| (!TLS_VARS.contains(&name)).then(|| env(name)).flatten();
        peregrine::config::from_vars_and_args(engine_vars, args)
            .map(|config| (transport, config.server))
    });
    let (transport, config) = match transport {
        Ok(chosen) => chosen,
        Err(e) => {
            eprintln!("scenarios: {e}");
            std::process::exit(2);
        }
    };
    if let Transport::Cleartext { ignored } = &transport {
        if !ignored.is_empty() {
            eprintln!(
                "scenarios: {} set but ignored: serving cleartext (add --tls to serve TLS)",
                ignored.join(", ")
            );
        }
    }
    if let Err(e) = run(config, transport) {
        eprintln!("scenarios: {e}");
        std::process::exit(1);
    }
}

/// The access log of `ACCESS_LOG` (a file, appended to), if that is set.
fn access_log() -> std::io::Result<Option<AccessLog>> {
    std::env::var_os("ACCESS_LOG")
        .map(AccessLog::to_file)
        .transpose()
}

/// `app()` with `log` as its outermost layer (so 404s and 405s are logged too), and the
/// log as the engine's events listener for the requests it refuses itself.
fn logged_app(log: Option<AccessLog>) -> (App, Option<Arc<dyn EngineEvents>>) {
    match log {
        Some(log) => (
            app().layer_before_routing(log.clone()),
            Some(Arc::new(log) as Arc<dyn EngineEvents>),
        ),
        None => (app(), None),
    }
}

/// The app's engine server on the listeners handed to this process (`LISTEN_FDS`), or `None`
/// when none was handed over (the server then binds `ADDR` itself).
fn inherited(
    config: peregrine::ServerConfig,
    log: Option<AccessLog>,
) -> std::io::Result<Option<(peregrine::server::Server, peregrine::AppService)>> {
    let Some(listeners) = peregrine::server::Listener::from_systemd_env()? else {
        return Ok(None);
    };
    eprintln!(
        "scenarios: serving {} inherited listener(s) with {} workers",
        listeners.len(),
        config.workers
    );
    let (app, events) = logged_app(log);
    let (server, service) = app.into_server(config)?;
    let server = listeners
        .into_iter()
        .fold(server, |s, l| s.with_listener(l));
    let server = match events {
        Some(events) => server.with_events(events),
        None => server,
    };
    Ok(Some((server, service)))
}

/// The certificate of `TLS_CERT` / `TLS_KEY` (`choose_transport` checked that both are set).
#[cfg(feature = "tls")]
fn tls_from_env() -> std::io::Result<peregrine::tls::TlsConfig> {
    peregrine::tls::TlsConfig::from_env()?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "TLS_CERT is not set"))
}

/// Serves until SIGTERM / SIGINT: over TLS when `--tls` chose it (certificates reloaded on
/// SIGHUP, except on a handed-over listener). `App::run` also returns, with the error, if the
/// server stops by itself.
#[cfg(feature = "tls")]
fn run(config: peregrine::ServerConfig, transport: Transport) -> std::io::Result<()> {
    let log = access_log()?;
    if let Some((server, service)) = inherited(config.clone(), log.clone())? {
        return match transport {
            Transport::Tls => {
                let acceptor = peregrine::server::tls::TlsAcceptor::new(&tls_from_env()?)?;
                server.with_acceptor(acceptor).run_until_signal(service)
            }
            Transport::Cleartext { .. } => server.run_until_signal(service),
        };
    }
    let config = match transport {
        Transport::Tls => peregrine::config::Config::new(config).with_tls(tls_from_env()?),
        Transport::Cleartext { .. } => peregrine::config::Config::new(config),
    };
    eprintln!(
        "scenarios: listening on {}{} with {} workers",
        config.server.addr,
        if config.tls.is_some() {
            " (TLS: h2 and http/1.1 by ALPN)"
        } else {
            ""
        },
        config.server.workers
    );
    serve_logged(config, log)
}

/// Serves until SIGTERM / SIGINT (cleartext: this build has no `tls` feature).
#[cfg(not(feature = "tls"))]
fn run(config: peregrine::ServerConfig, transport: Transport) -> std::io::Result<()> {
    if transport == Transport::Tls {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--tls needs a build with TLS: --features tls,http2,ws",
        ));
    }
    let log = access_log()?;
    if let Some((server, service)) = inherited(config.clone(), log.clone())? {
        return server.run_until_signal(service);
    }
    eprintln!(
        "scenarios: listening on {} with {} workers",
        config.addr, config.workers
    );
    serve_logged(config.into(), log)
}

/// Binds `ADDR` and serves until SIGTERM / SIGINT, logging to `log` if given.
fn serve_logged(config: peregrine::config::Config, log: Option<AccessLog>) -> std::io::Result<()> {
    let (app, events) = logged_app(log);
    match events {
        Some(events) => app.run(config.with_events(events)),
        None => app.run(config),
    }
}
