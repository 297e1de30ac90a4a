//! Trailer fields over HTTP/3, from the h3 crate's client over quinn: a response's trailers
//! (known up front or only once a streamed body ended) arrive as a HEADERS frame after the
//! DATA, and a request's reach the handler.
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;
mod trailers_support;

use bytes::{Buf, Bytes};
use h3_support::{connect, serve, Client};
use peregrine_server::ServerConfig;

/// A response: status, body, trailers.
struct Reply {
    status: u16,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

/// Sends `method path` with `body` and, if given, request trailers; reads the whole response
/// and its trailers.
async fn exchange(
    client: &mut Client,
    method: &str,
    path: &str,
    body: &[u8],
    trailers: Option<http::HeaderMap>,
) -> Reply {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let mut stream = client.send.send_request(req).await.unwrap();
    if !body.is_empty() {
        stream
            .send_data(Bytes::copy_from_slice(body))
            .await
            .unwrap();
    }
    if let Some(t) = trailers {
        stream.send_trailers(t).await.unwrap();
    }
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    let mut got = Vec::new();
    while let Some(mut data) = stream.recv_data().await.unwrap() {
        while data.has_remaining() {
            let n = data.chunk().len();
            got.extend_from_slice(data.chunk());
            data.advance(n);
        }
    }
    Reply {
        status: response.status().as_u16(),
        body: got,
        trailers: stream.recv_trailers().await.unwrap(),
    }
}

#[tokio::test]
async fn http3_sends_response_trailers_after_the_data() {
    let server = serve(
        ServerConfig::builder().workers(1).build(),
        trailers_support::service(),
    );
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let reply = exchange(&mut client, "GET", "/stream", b"", None).await;
    assert_eq!((reply.status, &reply.body[..]), (200, &b"abcd"[..]));
    assert_eq!(reply.trailers.expect("trailers")["x-pieces"], "2");
    let reply = exchange(&mut client, "GET", "/full", b"", None).await;
    assert_eq!(reply.body, b"hello");
    assert_eq!(reply.trailers.expect("trailers")["x-checksum"], "5");
    let reply = exchange(&mut client, "GET", "/empty", b"", None).await;
    assert!(reply.body.is_empty());
    assert_eq!(reply.trailers.expect("trailers")["x-status"], "0");
    // HEAD: no body, so no trailers either.
    let reply = exchange(&mut client, "HEAD", "/full", b"", None).await;
    assert!(reply.body.is_empty() && reply.trailers.is_none());
    server.handle.shutdown();
}

#[tokio::test]
async fn http3_request_trailers_reach_the_handler() {
    let server = serve(
        ServerConfig::builder().workers(1).build(),
        trailers_support::service(),
    );
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", "7".parse().unwrap());
    let reply = exchange(&mut client, "POST", "/echo", b"hello", Some(trailers)).await;
    assert_eq!(reply.body, b"body=hello;trailers=x-sum:7");
    let reply = exchange(&mut client, "POST", "/echo", b"hi", None).await;
    assert_eq!(reply.body, b"body=hi;trailers=");
    server.handle.shutdown();
}
