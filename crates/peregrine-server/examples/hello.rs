//! The hello-world server the lab measures as "peregrine-hello".
//!
//! `GET /plaintext` (or `HEAD`) → `Hello, World!` as `text/plain`, anything else → 404.
//! Configured by [`ServerConfig::from_env_and_args`]: listens on `ADDR` (default
//! `127.0.0.1:8080`) with `WORKERS` workers (default: available cores), `STEER=1` / `PIN=1` for
//! connection steering and worker pinning (`bench/steering.sh`), or the same as flags; stops
//! gracefully on SIGTERM or SIGINT.
//!
//! ```sh
//! ADDR=127.0.0.1:8080 WORKERS=1 cargo run --release --example hello
//! cargo run --release --example hello -- --addr localhost:3000 --workers 2
//! ```

use peregrine_server::{service_fn, Method, Request, Response, Server, ServerConfig};

fn main() -> std::io::Result<()> {
    let (config, rest) = ServerConfig::from_env_and_args(std::env::args().skip(1))?;
    if let Some(arg) = rest.first() {
        let e = format!("unknown argument {arg}");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
    }
    let service = service_fn(|req: Request| async move {
        match (req.method_kind(), req.path()) {
            (Method::Get | Method::Head, "/plaintext") => Response::text("Hello, World!"),
            _ => Response::text("Not Found").with_status(404),
        }
    });
    Server::new(config).run_until_signal(service)
}
