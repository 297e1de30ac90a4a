//! Shared pieces of the Rust peers: environment settings and the contract's data types.
//!
//! Every peer answers the scenario contract in `lab/contract/scenarios.json`. The types here are the
//! typed records the scenarios serialise; each binary uses its own framework's routing, extraction,
//! middleware and error path around them.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

pub mod db;
pub mod db_rules;
pub mod env;
pub use env::{addr, workers};

/// How the tokio-based peers (hyper, axum) run, from `RUNTIME`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RuntimeMode {
    /// `multi` (default): one multi-thread runtime with `WORKERS` workers, the accept loop in
    /// `block_on` on the main thread (what `#[tokio::main]` gives).
    Multi,
    /// `per-core`: `WORKERS` threads, each with its own current-thread runtime and its own
    /// `SO_REUSEPORT` listener (the shape of these stacks' community benchmarks, and Peregrine's).
    PerCore,
}

/// The runtime mode from `RUNTIME` (`multi` or `per-core`; default `multi`).
pub fn runtime_mode() -> RuntimeMode {
    match std::env::var("RUNTIME").as_deref() {
        Err(_) | Ok("") | Ok("multi") => RuntimeMode::Multi,
        Ok("per-core") => RuntimeMode::PerCore,
        Ok(other) => panic!("RUNTIME={other:?} is neither `multi` nor `per-core`"),
    }
}

/// Whether `FLAG` is set to `1` (e.g. hyper's `PIPELINE_FLUSH=1`).
pub fn flag(name: &str) -> bool {
    matches!(std::env::var(name).as_deref(), Ok("1") | Ok("true"))
}

/// A non-blocking listener on `addr` with `SO_REUSEPORT`, so that one per thread can share the
/// port (the kernel spreads connections across them).
pub fn reuseport_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

/// Runs `serve` on `WORKERS` threads, each with a current-thread tokio runtime and its own
/// `SO_REUSEPORT` listener on `addr`; returns when every thread has stopped.
pub fn run_per_core<F, Fut>(addr: SocketAddr, serve: F)
where
    F: Fn(tokio::net::TcpListener) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()>,
{
    // Bind every listener before any thread starts, so the port accepts as soon as it is open.
    let listeners: Vec<_> = (0..workers())
        .map(|_| reuseport_listener(addr).expect("bind ADDR with SO_REUSEPORT"))
        .collect();
    let threads: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, std_listener)| {
            let serve = serve.clone();
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("tokio runtime")
                        .block_on(async move {
                            let listener = tokio::net::TcpListener::from_std(std_listener)
                                .expect("register listener");
                            serve(listener).await
                        })
                })
                .expect("spawn worker thread")
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// `GET /json`
#[derive(Serialize)]
pub struct Message {
    pub message: &'static str,
}

/// `GET /users/{id}`
#[derive(Serialize)]
pub struct UserById {
    pub id: u64,
    pub name: String,
}

impl UserById {
    pub fn new(id: u64) -> Self {
        UserById {
            id,
            name: format!("user-{id}"),
        }
    }
}

/// Query of `GET /search?q=...&limit=...`
#[derive(Deserialize)]
pub struct SearchQuery {
    pub q: String,
    pub limit: u64,
}

/// Answer of `GET /search`
#[derive(Serialize)]
pub struct SearchResult {
    pub q: String,
    pub limit: u64,
}

/// Body of `POST /users`, echoed back with 201.
#[derive(Serialize, Deserialize)]
pub struct NewUser {
    pub name: String,
    pub email: String,
    pub age: u32,
}

/// `GET /api/v1/orgs/{org}/teams/{team}/members/{member}`
#[derive(Serialize)]
pub struct Member {
    pub org: u64,
    pub team: u64,
    pub member: u64,
}

/// RFC 9457 problem details body of the `error` scenario.
#[derive(Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: &'static str,
    pub status: u16,
}

/// The 500 problem the `error` scenario answers with.
pub const INTERNAL_ERROR: Problem = Problem {
    kind: "about:blank",
    title: "Internal Server Error",
    status: 500,
};

/// One element of the `large_json` payload.
#[derive(Serialize)]
pub struct Item {
    pub id: u32,
    pub name: String,
    pub active: bool,
    pub score: u32,
    pub tags: Vec<&'static str>,
}

/// The `large_json` payload (~10 KiB once serialised).
#[derive(Serialize)]
pub struct Large {
    pub items: Vec<Item>,
}

/// Builds the `large_json` data structure once at startup; handlers serialise it per request, as
/// the contract asks (no pre-encoded string).
pub fn large() -> Large {
    Large {
        items: (0..134)
            .map(|id| Item {
                id,
                name: format!("item-{id}"),
                active: id % 2 == 0,
                score: (id * 7) % 100,
                tags: vec!["alpha", "beta"],
            })
            .collect(),
    }
}

/// The error a handler fails with in the `error` scenario; each framework's error path turns it
/// into the problem+json 500.
#[derive(Debug)]
pub struct Failure(pub &'static str);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Failure {}

/// The handler of the `error` scenario: always fails.
pub fn fail() -> Result<(), Failure> {
    Err(Failure("the error scenario always fails"))
}

/// TLS settings shared by the Rust TLS peers (`axum-tls-peer`, `actix-tls-peer`): the lab's
/// certificate from `TLS_CERT` / `TLS_KEY` (PEM), rustls with the ring provider (the engine's
/// choice), TLS 1.3 and 1.2, and ALPN `h2` then `http/1.1`.
pub fn rustls_config() -> rustls::ServerConfig {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let cert_path = std::env::var("TLS_CERT").expect("TLS_CERT (PEM certificate) must be set");
    let key_path = std::env::var("TLS_KEY").expect("TLS_KEY (PEM private key) must be set");
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .unwrap_or_else(|e| panic!("TLS_CERT={cert_path}: {e}"));
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .unwrap_or_else(|e| panic!("TLS_KEY={key_path}: {e}"));
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}
