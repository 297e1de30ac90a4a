//! Peregrine's bare engine (`peregrine-server`, no framework) answering the seeds' plain-text
//! paths, as `examples/hello` answers `/plaintext`: `ADDR`, `WORKERS` (default one per CPU the
//! process may use) from the environment, SIGTERM drains.

use peregrine_server::{service_fn, Method, Request, Response, Server, ServerConfig};
use seeds::Seed;

/// rust-http's Apache fake: the page as text/html with Apache's header fields.
fn apache() -> Response {
    let mut r = Response::text(seeds::APACHE_BODY);
    r.insert_header("content-type", "text/html");
    seeds::APACHE_FIELDS
        .iter()
        .fold(r, |r, (k, v)| r.with_header(*k, *v))
}

fn main() -> std::io::Result<()> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let seed = Seed::from_env().map_err(invalid)?;
    let (config, _) = ServerConfig::from_env_and_args(std::iter::empty::<String>())?;
    let service = service_fn(move |req: Request| async move {
        let get = matches!(req.method_kind(), Method::Get | Method::Head);
        match (seed, req.path()) {
            (Seed::Nurl, "/") if get => Response::text(seeds::NURL_BODY),
            (Seed::Kourier, "/hello") if get => Response::text(seeds::KOURIER_BODY),
            (Seed::Lemire, "/simple") if get => Response::text(seeds::LEMIRE_BODY),
            (Seed::RustHttp, "/") if get => apache(),
            _ => Response::text("Not Found").with_status(404),
        }
    });
    Server::new(config).run_until_signal(service)
}
