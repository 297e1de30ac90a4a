//! The framework over HTTP/3 (feature `http3`): `App::serve` with TLS in the configuration
//! serves the same routes, extractors and middleware over QUIC, with the h3 crate's client.

#[path = "../../peregrine-server/tests/h3_support/mod.rs"]
mod h3_support;
#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

use peregrine::config::Config;
use peregrine::middleware::RequestIdLayer;
use peregrine::tls::{CertificateFiles, TlsConfig};
use peregrine::{get, post, App, Error, Request};
use tls_support::Ca;

async fn hello(req: Request) -> Result<String, Error> {
    Ok(format!("{:?} {}", req.version(), req.param_str("name")?))
}

async fn length(mut req: Request) -> Result<String, Error> {
    let body = req.bytes().await?;
    Ok(body.len().to_string())
}

#[tokio::test]
async fn routes_extractors_and_middleware_serve_http3() {
    let ca = Ca::new("h3app");
    let leaf = ca.server("localhost", &["localhost"]);
    let tls = TlsConfig::new(vec![CertificateFiles::new(&leaf.cert_path, &leaf.key_path)]);
    let server = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let handle = App::new()
        .route("/hello/{name}", get(hello))
        .route("/len", post(length))
        .layer(RequestIdLayer::new())
        .serve(Config::new(server).with_tls(tls))
        .unwrap();
    let mut client = h3_support::connect(handle.local_addr(), &ca).await;
    let reply = client
        .request("GET", "/hello/kestrel", &[], b"")
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"Http3 kestrel");
    // The middleware ran: its id is on the response.
    assert!(reply.headers.contains_key("x-request-id"));
    let reply = client
        .request("POST", "/len", &[], &vec![7u8; 300_000])
        .await
        .unwrap();
    assert_eq!((reply.status, reply.body.as_slice()), (200, &b"300000"[..]));
    // The router's answers too: an unknown path, a known one with another method.
    let reply = client.request("GET", "/nowhere", &[], b"").await.unwrap();
    assert_eq!(reply.status, 404);
    let reply = client.request("DELETE", "/len", &[], b"").await.unwrap();
    assert_eq!(reply.status, 405);
    handle.shutdown();
}
