//! Trailer fields end to end over HTTP/1.1 (raw TCP, with and without `TE: trailers`), HTTP/2
//! (the h2 crate's client) and HTTP/3 (the h3 crate's client), against the real server: a response's trailers (known up
//! front or only once a streamed body ended) and a request's, read by the handler.
#![cfg(feature = "http2")]

#[cfg(feature = "http3")]
mod h3_support;
#[cfg(feature = "http3")]
mod tls_support;
mod trailers_support;

use bytes::Bytes;
use peregrine_server::{Server, ServerConfig, ServerHandle};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn start() -> ServerHandle {
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    Server::new(config)
        .serve(trailers_support::service())
        .unwrap()
}

/// Sends `request` on a new connection and reads until the server closes it.
fn exchange(server: &ServerHandle, request: &str) -> String {
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn http1_streamed_body_ends_with_its_trailers_only_when_the_request_said_te_trailers() {
    let server = start();
    for te in ["trailers", "gzip;q=0.5, Trailers"] {
        let got = exchange(
            &server,
            &format!("GET /stream HTTP/1.1\r\nHost: x\r\nTE: {te}\r\nConnection: close\r\n\r\n"),
        );
        assert!(got.contains("Transfer-Encoding: chunked\r\n"), "{got}");
        assert!(
            got.ends_with("\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\nx-pieces: 2\r\n\r\n"),
            "TE: {te}: {got:?}"
        );
    }
    // Without TE: trailers (or with another coding only) the client never sees them.
    for te in ["", "TE: gzip\r\n"] {
        let got = exchange(
            &server,
            &format!("GET /stream HTTP/1.1\r\nHost: x\r\n{te}Connection: close\r\n\r\n"),
        );
        assert!(
            got.ends_with("\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"),
            "{te:?}: {got:?}"
        );
    }
    // HTTP/1.0 has no chunked framing: the body is delimited by the close, no trailers.
    let got = exchange(&server, "GET /stream HTTP/1.0\r\nTE: trailers\r\n\r\n");
    assert!(got.ends_with("\r\n\r\nabcd"), "{got:?}");
    server.shutdown();
}

#[test]
fn http1_fixed_length_body_drops_its_trailers() {
    let server = start();
    let got = exchange(
        &server,
        "GET /full HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n",
    );
    assert!(got.contains("Content-Length: 5\r\n"), "{got}");
    assert!(got.ends_with("\r\n\r\nhello"), "{got:?}");
    assert!(!got.to_ascii_lowercase().contains("x-checksum"), "{got}");
    server.shutdown();
}

/// Reads one response with a `Content-Length` body from `s`; its body.
fn read_sized(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "connection closed mid-head");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap_or_else(|| panic!("no length: {head}"))
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

#[test]
fn http1_request_trailers_reach_the_handler_and_never_the_next_request() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    s.write_all(format!("{chunked}5\r\nhello\r\n0\r\nX-Sum: 7\r\nX-Two: a b\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(read_sized(&mut s), "body=hello;trailers=x-sum:7,x-two:a b");
    // The next requests on the connection, chunked without trailers and sized, have none.
    s.write_all(format!("{chunked}2\r\nhi\r\n0\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(read_sized(&mut s), "body=hi;trailers=");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        .unwrap();
    assert_eq!(read_sized(&mut s), "body=ok;trailers=");
    server.shutdown();
}

/// An h2 client on a new connection to `server` (h2c, prior knowledge).
async fn h2_client(server: &ServerHandle) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.unwrap()
}

/// Drops the client and shuts the server down off the test's runtime, which must keep running
/// the client connection's task to answer the GOAWAY.
async fn stop(server: ServerHandle, client: impl Sized) {
    drop(client);
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

/// The response to `method path` (no request body): status, fields, body, trailers.
async fn h2_get(
    send: &mut h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
) -> (u16, http::HeaderMap, Vec<u8>, Option<http::HeaderMap>) {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://localhost{path}"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let (parts, mut recv) = resp.await.unwrap().into_parts();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        let _ = recv.flow_control().release_capacity(data.len());
        body.extend_from_slice(&data);
    }
    let trailers = recv.trailers().await.unwrap();
    (parts.status.as_u16(), parts.headers, body, trailers)
}

#[tokio::test]
async fn http2_sends_response_trailers_as_the_last_headers_frame() {
    let server = start();
    let mut send = h2_client(&server).await;
    let (status, _, body, trailers) = h2_get(&mut send, "GET", "/stream").await;
    assert_eq!((status, &body[..]), (200, &b"abcd"[..]));
    assert_eq!(trailers.expect("trailers")["x-pieces"], "2");
    let (_, fields, body, trailers) = h2_get(&mut send, "GET", "/full").await;
    assert_eq!(
        (&fields["content-length"], &body[..]),
        (&"5".parse().unwrap(), &b"hello"[..])
    );
    assert_eq!(trailers.expect("trailers")["x-checksum"], "5");
    // No body at all: the head, then the trailers.
    let (_, _, body, trailers) = h2_get(&mut send, "GET", "/empty").await;
    assert!(body.is_empty());
    assert_eq!(trailers.expect("trailers")["x-status"], "0");
    // HEAD: no body, so no trailers either.
    let (status, _, body, trailers) = h2_get(&mut send, "HEAD", "/full").await;
    assert_eq!((status, body.len()), (200, 0));
    assert!(trailers.is_none());
    stop(server, send).await;
}

#[tokio::test]
async fn http2_request_trailers_reach_the_handler() {
    let server = start();
    let mut send = h2_client(&server).await;
    let req = http::Request::post("http://localhost/echo")
        .body(())
        .unwrap();
    let (resp, mut stream) = send.send_request(req, false).unwrap();
    stream
        .send_data(Bytes::from_static(b"hello"), false)
        .unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", "7".parse().unwrap());
    stream.send_trailers(trailers).unwrap();
    let (_, mut recv) = resp.await.unwrap().into_parts();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        body.extend_from_slice(&data.unwrap());
    }
    assert_eq!(body, b"body=hello;trailers=x-sum:7");
    // Without trailers the handler sees none.
    let (resp, mut stream) = send
        .send_request(
            http::Request::post("http://localhost/echo")
                .body(())
                .unwrap(),
            false,
        )
        .unwrap();
    stream.send_data(Bytes::from_static(b"hi"), true).unwrap();
    let (_, mut recv) = resp.await.unwrap().into_parts();
    let data = recv.data().await.unwrap().unwrap();
    assert_eq!(&data[..], b"body=hi;trailers=");
    stop(server, (send, stream, recv)).await;
}

/// HTTP/3, from the h3 crate's client over quinn: the response's trailers arrive as a HEADERS
/// frame after the DATA, and the request's reach the handler.
#[cfg(feature = "http3")]
mod http3 {
    use super::h3_support::{connect, serve, Client};
    use super::trailers_support;
    use bytes::{Buf, Bytes};
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
}
