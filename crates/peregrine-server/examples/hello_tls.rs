//! The hello-world server over TLS that the lab measures as "peregrine-hello-tls" (the HTTPS and
//! HTTP/2 lanes of `./scripts/lab protocols`).
//!
//! The same service as `hello` (`GET /plaintext` → `Hello, World!`), on one TLS listener that
//! speaks HTTP/2 or HTTP/1.1 by ALPN. Configured like `hello` (`ADDR`, `WORKERS` or flags) plus
//! `TLS_CERT` / `TLS_KEY` (PEM paths, required).
//!
//! ```sh
//! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
//!   -subj /CN=localhost -keyout key.pem -out cert.pem
//! TLS_CERT=cert.pem TLS_KEY=key.pem ADDR=127.0.0.1:8443 WORKERS=1 \
//!   cargo run --release -p peregrine-server --example hello_tls --features tls,http2
//! ```

use peregrine_server::tls::{TlsAcceptor, TlsConfig};
use peregrine_server::{service_fn, Method, Request, Response, Server, ServerConfig};

fn main() -> std::io::Result<()> {
    let (config, rest) = ServerConfig::from_env_and_args(std::env::args().skip(1))?;
    if let Some(arg) = rest.first() {
        let e = format!("unknown argument {arg}");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
    }
    let tls = TlsConfig::from_env()?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "TLS_CERT and TLS_KEY must be set",
        )
    })?;
    let service = service_fn(|req: Request| async move {
        match (req.method_kind(), req.path()) {
            (Method::Get | Method::Head, "/plaintext") => Response::text("Hello, World!"),
            _ => Response::text("Not Found").with_status(404),
        }
    });
    Server::new(config)
        .with_acceptor(TlsAcceptor::new(&tls)?)
        .run_until_signal(service)
}
