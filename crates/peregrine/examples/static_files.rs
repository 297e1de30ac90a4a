//! A static directory for measuring large-file cost (`bench/static-file-cpu.sh`): `DIR` served
//! under `/static/` by `ServeDir` (files past 8 MiB go out as file bodies).
//!
//! `COPY=1` hands every TCP connection to the engine as a generic transport (the path TLS
//! takes), so file bodies are read into a buffer and written with `write(2)` instead of
//! `sendfile(2)`: the same server, the same bytes, only the write path differs.
//!
//! `DIR=/tmp/site ADDR=127.0.0.1:3000 cargo run --release --example static_files`

use peregrine::fs::ServeDir;
use peregrine::server::{Accept, Accepted, Acceptor, Server, Stream};
use peregrine::App;

/// Turns a plain TCP stream into `Stream::Other`, which the engine writes through the
/// transport (no `sendfile`).
#[derive(Clone)]
struct CopyAcceptor;

impl Acceptor for CopyAcceptor {
    fn accept(&self, conn: Accepted) -> Accept {
        Accept::Ready(match conn.stream {
            Stream::Tcp(tcp) => Stream::Other(Box::new(tcp)),
            other => other,
        })
    }
}

fn main() -> std::io::Result<()> {
    let dir = std::env::var("DIR").unwrap_or_else(|_| ".".into());
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("ADDR").is_none() && !args.iter().any(|a| a.starts_with("--addr")) {
        args.extend(["--addr".into(), "127.0.0.1:3000".into()]);
    }
    let config = peregrine::config::from_env_and_args(args)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?
        .server;
    let service = App::new()
        .merge(ServeDir::new(dir).router("/static"))
        .into_service();
    if std::env::var_os("COPY").is_some_and(|v| v == "1") {
        Server::new(config)
            .with_acceptor(CopyAcceptor)
            .run_until_signal(service)
    } else {
        Server::new(config).run_until_signal(service)
    }
}
