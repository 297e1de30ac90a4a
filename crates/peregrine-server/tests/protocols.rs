//! The protocols through the real server (workers, accept loop, acceptor step, driver): TLS with
//! HTTP/1.1 and HTTP/2 by ALPN, h2c with prior knowledge on the plaintext listener, the
//! general Upgrade hook over plaintext and TLS, graceful shutdown of HTTP/2 connections.
#![cfg(all(feature = "tls", feature = "http2"))]

mod tls_support;

use bytes::Bytes;
use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
use peregrine_server::upgrade::Upgraded;
use peregrine_server::{
    service_fn, Request, Response, ResponseBody, Server, ServerConfig, ServerHandle,
};
use std::time::Duration;
use tls_support::{client_config, Ca};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

/// An upgrade function that echoes every byte back.
fn echo() -> peregrine_server::upgrade::OnUpgrade {
    Box::new(|mut io: Upgraded| {
        Box::pin(async move {
            let mut buf = [0u8; 256];
            loop {
                match io.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if io.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                }
            }
        })
    })
}

/// `/version` answers the protocol version; `/upgrade` switches to a line echo protocol;
/// `/upgrade/<status>` gives the same upgrade function with another status (not a switch).
fn service() -> impl peregrine_server::Service {
    service_fn(|req: Request| async move {
        match req.path() {
            "/version" => Response::text(format!("{:?}", req.version())),
            "/upgrade" => Response::new(101)
                .with_header("Upgrade", b"echo".as_slice())
                .with_body(ResponseBody::Upgrade(echo())),
            p if p.starts_with("/upgrade/") => Response::new(p[9..].parse().unwrap())
                .with_header("X-Not-Switched", b"yes".as_slice())
                .with_body(ResponseBody::Upgrade(echo())),
            // A 101 without an upgrade function is refused as before.
            "/bad101" => Response::new(101),
            _ => Response::new(404),
        }
    })
}

fn config() -> ServerConfig {
    ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build()
}

fn tls_server(ca: &Ca) -> ServerHandle {
    let leaf = ca.server("srv", &["localhost"]);
    let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
        leaf.cert_path,
        leaf.key_path,
    )]))
    .unwrap();
    Server::new(config())
        .with_acceptor(acceptor)
        .serve(service())
        .unwrap()
}

async fn tls_connect(
    handle: &ServerHandle,
    ca: &Ca,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    TlsConnector::from(client_config(ca, alpn, &[&rustls::version::TLS13], None))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Stops the server off the test's runtime (its clients must keep running to finish).
async fn shutdown(handle: ServerHandle) {
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
}

/// Reads a response head, up to and including its empty line, one byte at a time (so nothing
/// after it is taken from the stream).
async fn read_head<R: AsyncReadExt + Unpin>(r: &mut R) -> String {
    let mut data = Vec::new();
    let mut b = [0u8; 1];
    while !data.ends_with(b"\r\n\r\n") {
        r.read_exact(&mut b).await.unwrap();
        data.push(b[0]);
    }
    String::from_utf8(data).unwrap()
}

/// Reads an HTTP/1.1 response with a Content-Length body.
async fn read_response<R: AsyncReadExt + Unpin>(r: &mut R) -> String {
    let head = read_head(r).await;
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.unwrap();
    head + &String::from_utf8(body).unwrap()
}

/// An h2 client over `io` (TCP or TLS), its connection driven by a task of its own, ready to
/// send.
async fn h2_client<IO>(io: IO) -> h2::client::SendRequest<Bytes>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.unwrap()
}

async fn h2_get<IO>(io: IO, path: &str) -> (u16, Bytes)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut send = h2_client(io).await;
    let req = http::Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        data.extend_from_slice(&chunk.unwrap());
    }
    (status, Bytes::from(data))
}

#[tokio::test]
async fn tls_serves_http11_and_http2_by_alpn() {
    let ca = Ca::new("server-alpn");
    let handle = tls_server(&ca);
    // HTTP/1.1 over TLS through the HTTP/1.1 driver (TlsTransport), keep-alive, two requests.
    let mut tls = tls_connect(&handle, &ca, &[b"http/1.1"]).await;
    for _ in 0..2 {
        tls.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let resp = read_response(&mut tls).await;
        assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
        assert!(resp.ends_with("\r\n\r\nHttp11"), "{resp}");
    }
    // HTTP/2 over TLS (ALPN h2) through the HTTP/2 driver, same service.
    let tls = tls_connect(&handle, &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (status, body) = h2_get(tls, "/version").await;
    assert_eq!(status, 200);
    assert_eq!(body, "Http2");
    shutdown(handle).await;
}

/// Counts what the engine reports, so the accept path with a listener is the one exercised.
#[derive(Default)]
struct Opened(std::sync::atomic::AtomicU64);

impl peregrine_server::events::EngineEvents for Opened {
    fn connection_opened(&self, _: &peregrine_server::events::ConnectionOpened) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// With an events listener set, the accept path is another branch; ALPN `h2` must still reach the
/// HTTP/2 driver (it used to reach the HTTP/1.1 driver and get 505).
#[tokio::test]
async fn tls_h2_by_alpn_with_engine_events_listening() {
    let ca = Ca::new("server-alpn-events");
    let leaf = ca.server("srv", &["localhost"]);
    let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
        leaf.cert_path,
        leaf.key_path,
    )]))
    .unwrap();
    let opened = std::sync::Arc::new(Opened::default());
    let handle = Server::new(config())
        .with_events(opened.clone())
        .with_acceptor(acceptor)
        .serve(service())
        .unwrap();
    let tls = tls_connect(&handle, &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(h2_get(tls, "/version").await, (200, Bytes::from("Http2")));
    let mut tls = tls_connect(&handle, &ca, &[b"http/1.1"]).await;
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let resp = read_response(&mut tls).await;
    assert!(resp.ends_with("\r\n\r\nHttp11"), "{resp}");
    assert_eq!(opened.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    shutdown(handle).await;
}

#[tokio::test]
async fn plaintext_listener_serves_h2c_with_prior_knowledge_and_http11() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    let (status, body) = h2_get(tcp, "/version").await;
    assert_eq!(status, 200);
    assert_eq!(body, "Http2");
    // The preface arriving a few bytes at a time is recognised too.
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    for piece in peregrine_server::h2::PREFACE.chunks(5) {
        tcp.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap(); // SETTINGS
    let mut head = [0u8; 9];
    tcp.read_exact(&mut head).await.unwrap();
    assert_eq!(head[3], 4, "the server's SETTINGS frame");
    // (A client that stays silent would hold shutdown until its deadline: this one goes.)
    drop(tcp);
    // A request line with HTTP/2.0 that is not the preface is still refused 505.
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut resp = String::new();
    tcp.read_to_string(&mut resp).await.unwrap();
    assert!(resp.starts_with("HTTP/1.1 505 "), "{resp}");
    // And HTTP/1.1 is unchanged.
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(b"GET /version HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut tcp).await.ends_with("Http11"));
    shutdown(handle).await;
}

#[tokio::test]
async fn upgrade_hands_over_the_connection_with_the_bytes_already_sent() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    // The first protocol bytes come in the same packet as the request.
    tcp.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\nearly ",
    )
    .await
    .unwrap();
    let head = read_head(&mut tcp).await;
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("Upgrade: echo\r\n"), "{head}");
    assert!(head.contains("Connection: upgrade\r\n"), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    let mut echoed = [0u8; 6];
    tcp.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"early ");
    tcp.write_all(b"later").await.unwrap();
    let mut echoed = [0u8; 5];
    tcp.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"later");
    drop(tcp);
    // A 101 without an upgrade function is still an error.
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(b"GET /bad101 HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut tcp).await.starts_with("HTTP/1.1 500 "));
    drop(tcp);
    shutdown(handle).await;
}

/// `ResponseBody::Upgrade` with a status other than 101: the function is dropped and the
/// response sent as a normal one without a body; the connection is not handed over.
#[tokio::test]
async fn an_upgrade_body_with_another_status_is_a_normal_response_over_http11() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    for status in ["200 OK", "403 Forbidden"] {
        let code = &status[..3];
        tcp.write_all(
            format!(
                "GET /upgrade/{code} HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let resp = read_response(&mut tcp).await;
        assert!(
            resp.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{resp}"
        );
        assert!(resp.contains("X-Not-Switched: yes\r\n"), "{resp}");
        assert!(resp.contains("\r\nContent-Length: 0\r\n"), "{resp}");
        assert!(!resp.contains("Connection: upgrade"), "{resp}");
        // The connection still speaks HTTP/1.1: the next request is answered, not echoed.
        tcp.write_all(b"GET /version HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        let next = tokio::time::timeout(Duration::from_secs(10), read_response(&mut tcp))
            .await
            .expect("an answer to the next request");
        assert!(next.starts_with("HTTP/1.1 200 OK\r\n"), "{next}");
        assert!(next.ends_with("\r\n\r\nHttp11"), "{next}");
    }
    drop(tcp);
    shutdown(handle).await;
}

/// The same over HTTP/2: a plain request gets the status without a body, and an extended
/// CONNECT (RFC 8441) opens a tunnel only for a 101; a 2xx without a switch becomes 501 (the
/// client would take a 2xx for an open tunnel), any other status is sent as it is.
#[tokio::test]
async fn an_upgrade_body_with_another_status_is_a_normal_response_over_http2() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    let mut send = h2_client(tcp).await;
    for _ in 0..100 {
        if send.is_extended_connect_protocol_enabled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        send = send.ready().await.unwrap();
    }
    assert!(send.is_extended_connect_protocol_enabled());
    // A plain GET.
    let req = http::Request::get("http://a/upgrade/200").body(()).unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-not-switched"], "yes");
    let mut body = resp.into_body();
    assert!(body.data().await.is_none(), "no body");
    // A 101 on a plain HTTP/2 request cannot switch anything: 500.
    send = send.ready().await.unwrap();
    let req = http::Request::get("http://a/upgrade").body(()).unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    assert_eq!(resp.await.unwrap().status(), 500);
    // Extended CONNECT: (path, status the client gets).
    for (path, want) in [
        ("/upgrade/200", 501),
        ("/upgrade/403", 403),
        ("/upgrade", 200),
    ] {
        send = send.ready().await.unwrap();
        let mut req = http::Request::builder()
            .method(http::Method::CONNECT)
            .uri(format!("http://a{path}"))
            .body(())
            .unwrap();
        req.extensions_mut()
            .insert(h2::ext::Protocol::from_static("echo"));
        let (resp, mut stream) = send.send_request(req, false).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), resp)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), want, "{path}");
        let mut body = resp.into_body();
        if want == 200 {
            // The one real switch: the stream echoes.
            stream.send_data(Bytes::from_static(b"ping"), true).unwrap();
            let got = body.data().await.unwrap().unwrap();
            assert_eq!(got, "ping");
        } else {
            // Not a tunnel: the response ends without DATA.
            assert!(body.data().await.is_none(), "{path}: no body");
        }
    }
    shutdown(handle).await;
}

#[tokio::test]
async fn upgrade_over_tls() {
    let ca = Ca::new("server-upgrade");
    let handle = tls_server(&ca);
    let mut tls = tls_connect(&handle, &ca, &[b"http/1.1"]).await;
    tls.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    let resp = read_response(&mut tls).await;
    assert!(resp.starts_with("HTTP/1.1 101 "), "{resp}");
    tls.write_all(b"over tls").await.unwrap();
    let mut echoed = [0u8; 8];
    tls.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"over tls");
    // The client goes: the upgraded connection ends, and shutdown has nothing to wait for.
    drop(tls);
    shutdown(handle).await;
}

#[tokio::test]
async fn shutdown_sends_goaway_to_http2_connections_and_waits_for_them() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(conn);
    let mut send = send.ready().await.unwrap();
    let (resp, _) = send
        .send_request(
            http::Request::get("http://a/version").body(()).unwrap(),
            true,
        )
        .unwrap();
    assert_eq!(resp.await.unwrap().status(), 200);
    let stopped = tokio::task::spawn_blocking(move || handle.shutdown());
    // The client's connection ends (GOAWAY, then close) and the server stops well before its
    // 10 s shutdown deadline.
    tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("the connection ends after GOAWAY")
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), stopped)
        .await
        .expect("the server stops")
        .unwrap();
}

#[tokio::test]
async fn an_http2_only_listener_refuses_http11_with_goaway() {
    let handle = Server::new(config())
        .with_acceptor(peregrine_server::h2::Http2OnlyAcceptor)
        .serve(service())
        .unwrap();
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    assert_eq!(h2_get(tcp, "/version").await, (200, Bytes::from("Http2")));
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(b"GET /version HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tcp.read_to_end(&mut got).await.unwrap();
    // One GOAWAY frame (type 7) with PROTOCOL_ERROR, then end of stream.
    assert_eq!(got.len(), 17, "{got:?}");
    assert_eq!(got[3], 7);
    assert_eq!(&got[13..17], &1u32.to_be_bytes());
    drop(tcp);
    shutdown(handle).await;
}

#[tokio::test]
async fn an_unread_http2_request_body_is_drained_not_cancelled() {
    let handle = Server::new(config()).serve(service()).unwrap();
    let tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    let mut send = h2_client(tcp).await;
    let req = http::Request::post("http://a/version").body(()).unwrap();
    let (resp, mut body) = send.send_request(req, false).unwrap();
    body.send_data(Bytes::from_static(b"first"), false).unwrap();
    // The handler answers without reading the body.
    assert_eq!(resp.await.unwrap().status(), 200);
    // The rest of the request still goes through, and the stream is not reset (CANCEL).
    body.send_data(Bytes::from_static(b"rest"), true).unwrap();
    let reset = tokio::time::timeout(
        Duration::from_millis(500),
        std::future::poll_fn(|cx| body.poll_reset(cx)),
    )
    .await;
    assert!(
        !matches!(reset, Ok(Ok(r)) if r == h2::Reason::CANCEL),
        "{reset:?}"
    );
    drop((body, send));
    shutdown(handle).await;
}
