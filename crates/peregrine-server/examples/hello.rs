//! The hello-world server the lab measures as "peregrine-hello".
//!
//! `GET /plaintext` (or `HEAD`) → `Hello, World!` as `text/plain`, anything else → 404.
//! Listens on `ADDR` (default `127.0.0.1:8080`) with `WORKERS` workers (default: available
//! cores); stops gracefully on SIGTERM or SIGINT.
//!
//! ```sh
//! ADDR=127.0.0.1:8080 WORKERS=1 cargo run --release --example hello
//! ```

use peregrine_server::{service_fn, Method, Request, Response, Server, ServerConfig};
use std::net::SocketAddr;

fn main() -> std::io::Result<()> {
    let mut config = ServerConfig::default();
    if let Ok(addr) = std::env::var("ADDR") {
        config.addr = addr.parse::<SocketAddr>().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("ADDR={addr}: {e}"),
            )
        })?;
    }
    if let Ok(w) = std::env::var("WORKERS") {
        config.workers = w.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("WORKERS={w}: {e}"),
            )
        })?;
    }
    let service = service_fn(|req: Request| async move {
        match (req.method_kind(), req.path()) {
            (Method::Get | Method::Head, "/plaintext") => Response::text("Hello, World!"),
            _ => Response::text("Not Found").with_status(404),
        }
    });
    Server::new(config).run_until_signal(service)
}
