//! hyper 1.x in the seeds' shape: tokio's default multi-thread runtime (one worker per CPU the
//! process may use, as NURL's and Kourier's hyper servers; `WORKERS` overrides it for the lab's
//! measured checks), one accept loop, `http1::Builder` defaults. For Kourier, a request timer
//! (`header_read_timeout`, 20 s) as Kourier's hyper server sets "timers only for requests".
//! `PIPELINE_FLUSH=1` turns on `pipeline_flush` (answers to pipelined requests written together,
//! TechEmpower's hyper setting): a measured check of the Kourier table, off by default.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use seeds::Seed;

fn answer(seed: Seed, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let ok = req.method() == hyper::Method::GET;
    let (body, ctype): (&'static str, &'static str) = match (seed, req.uri().path()) {
        (Seed::Nurl, "/") if ok => (seeds::NURL_BODY, "text/plain; charset=utf-8"),
        (Seed::Kourier, "/hello") if ok => (seeds::KOURIER_BODY, "text/plain"),
        (Seed::RustHttp, "/") if ok => (seeds::APACHE_BODY, "text/html"),
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"Not Found")));
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            return r;
        }
    };
    let mut b = Response::builder().header("content-type", ctype);
    if seed == Seed::RustHttp {
        for (k, v) in seeds::APACHE_FIELDS {
            b = b.header(k, v);
        }
    }
    b.body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("static header fields are valid")
}

async fn serve(seed: Seed, addr: String, flush: bool) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            // Out of descriptors or a connection reset before accept: keep serving the others.
            Err(_) => continue,
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let svc = service_fn(move |req| async move { Ok::<_, Infallible>(answer(seed, &req)) });
            let mut builder = http1::Builder::new();
            builder.pipeline_flush(flush);
            if seed == Seed::Kourier {
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(20));
            }
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

fn main() {
    let run = || -> Result<(), String> {
        let seed = Seed::from_env()?;
        if matches!(seed, Seed::NextRush | Seed::Lemire) {
            return Err(format!("{seed:?} has no hyper server"));
        }
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = seeds::workers()? {
            rt.worker_threads(n);
        }
        let rt = rt.enable_all().build().map_err(|e| e.to_string())?;
        let flush = std::env::var("PIPELINE_FLUSH").is_ok_and(|v| v == "1");
        rt.block_on(serve(seed, seeds::addr(), flush))
            .map_err(|e| e.to_string())
    };
    if let Err(e) = run() {
        eprintln!("seeds-hyper: {e}");
        std::process::exit(2);
    }
}
