//! The lab's scenario application (examples/scenarios.rs) over TLS, HTTP/2, WebSocket and SSE, with
//! clients we did not write, over real sockets: its WebSocket echo (tokio-tungstenite's client,
//! over HTTP/1.1 and over HTTP/2 extended CONNECT), its server-sent events parsed from real
//! responses, h2c with prior knowledge (the h2 crate's client), and the app over TLS with a
//! rustls client negotiating `h2` and `http/1.1` (the engine's TLS test helpers, reused).

#[allow(dead_code)]
#[path = "../examples/scenarios.rs"]
mod scenarios;

#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

mod h2_stream;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use h2_stream::{h2_client, ClientStream};
use peregrine::server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tls_support::{client_config, Ca};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(10);

fn config() -> peregrine::ServerConfig {
    peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build()
}

/// The app in cleartext (HTTP/1.1 and h2c), as the lab's plaintext profiles run it.
fn start_plain() -> SocketAddr {
    let handle = scenarios::serve(config(), None).unwrap();
    let addr = handle.local_addr();
    // The server lives for the rest of the test process.
    std::mem::forget(handle);
    addr
}

/// The app over TLS with a certificate for `localhost` signed by `ca`, as with
/// `TLS_CERT`/`TLS_KEY`.
fn start_tls(ca: &Ca) -> SocketAddr {
    let leaf = ca.server("scenarios", &["localhost"]);
    let tls = TlsConfig::new(vec![CertificateFiles::new(leaf.cert_path, leaf.key_path)]);
    let handle = scenarios::serve(config(), Some(TlsAcceptor::new(&tls).unwrap())).unwrap();
    let addr = handle.local_addr();
    std::mem::forget(handle);
    addr
}

/// A TLS connection offering `alpn`; the protocol the server picked.
async fn tls_connect(
    addr: SocketAddr,
    ca: &Ca,
    alpn: &[&[u8]],
) -> (tokio_rustls::client::TlsStream<TcpStream>, Vec<u8>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let config = client_config(ca, alpn, &[&rustls::version::TLS13], None);
    let tls = TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let proto = tls.get_ref().1.alpn_protocol().unwrap_or_default().to_vec();
    (tls, proto)
}

/// `GET path` over HTTP/2: status, content-type and the whole body.
async fn h2_get(send: &mut h2::client::SendRequest<Bytes>, path: &str) -> (u16, String, String) {
    let req = http::Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = tokio::time::timeout(WAIT, resp).await.unwrap().unwrap();
    let status = resp.status().as_u16();
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    let mut body = resp.into_body();
    let mut all = Vec::new();
    while let Some(chunk) = tokio::time::timeout(WAIT, body.data()).await.unwrap() {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        all.extend_from_slice(&chunk);
    }
    (status, ctype, String::from_utf8(all).unwrap())
}

async fn next<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) -> Message {
    tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("a message within 10 s")
        .expect("a message")
        .expect("no error")
}

/// Text and binary messages come back as sent.
async fn echo_round_trip<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
    ws.send(Message::text("hello, echo")).await.unwrap();
    assert_eq!(next(ws).await, Message::text("hello, echo"));
    let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    ws.send(Message::binary(bytes.clone())).await.unwrap();
    assert_eq!(next(ws).await, Message::binary(bytes));
}

/// One server-sent event, as the WHATWG parsing rules dispatch it.
#[derive(Debug, PartialEq)]
struct SseEvent {
    id: Option<String>,
    event: String,
    data: String,
}

/// Events and comments of a `text/event-stream` (HTML §9.2.6): fields up to a blank line,
/// `data` lines joined with `\n`, one space after the colon dropped, `:` lines are comments.
fn parse_sse(stream: &str) -> (Vec<SseEvent>, Vec<String>) {
    let (mut events, mut comments) = (Vec::new(), Vec::new());
    let (mut id, mut event, mut data) = (None, String::new(), None::<String>);
    for line in stream.split('\n') {
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(SseEvent {
                    id: id.take(),
                    event: if event.is_empty() {
                        "message".into()
                    } else {
                        std::mem::take(&mut event)
                    },
                    data: d,
                });
            }
            event.clear();
            continue;
        }
        if let Some(c) = line.strip_prefix(':') {
            comments.push(c.trim_start().to_owned());
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = Some(value.to_owned()),
            "event" => event = value.to_owned(),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    (events, comments)
}

/// What `/events` sends first (see examples/scenarios.rs).
fn expected_events() -> Vec<SseEvent> {
    let ev = |id: &str, event: &str, data: &str| SseEvent {
        id: Some(id.into()),
        event: event.into(),
        data: data.into(),
    };
    vec![
        ev("1", "greeting", "Hello, World!"),
        ev("2", "lines", "line one\nline two\nline three"),
        ev("3", "json", r#"{"message":"Hello, World!"}"#),
    ]
}

/// Whether the stream so far holds the three events and then a keep-alive comment.
fn events_then_keep_alive(text: &str) -> bool {
    let (events, comments) = parse_sse(text);
    events.len() >= 3 && text.ends_with("\n\n") && comments.iter().any(|c| c == "keep-alive")
}

/// Decodes the complete chunks of an HTTP/1.1 chunked body received so far.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = std::str::from_utf8(&raw[..eol]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        let start = eol + 2;
        if size == 0 || raw.len() < start + size + 2 {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = &raw[start + size + 2..];
    }
    out
}

/// Whether a response with a Content-Length has all of its body.
fn complete(head: &str, body: &[u8]) -> bool {
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap());
    len.is_some_and(|n| body.len() >= n)
}

/// Sends a raw HTTP/1.1 request on `io` and reads the response until `done(head, body)`.
async fn http1_until<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
    request: &str,
    done: impl Fn(&str, &[u8]) -> bool,
) -> (String, Vec<u8>) {
    io.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(WAIT, io.read(&mut buf))
            .await
            .expect("the response within 10 s")
            .unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(raw[..end].to_vec())
                .unwrap()
                .to_ascii_lowercase();
            let mut body = raw[end + 4..].to_vec();
            if head.contains("transfer-encoding: chunked") {
                body = dechunk(&body);
            }
            if done(&head, &body) {
                return (head, body);
            }
        }
    }
}

#[tokio::test]
async fn ws_echoes_text_and_binary_over_http1_and_closes_oversize_messages_with_1009() {
    let addr = start_plain();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, resp) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp)
        .await
        .unwrap();
    assert_eq!(resp.status(), 101);
    echo_round_trip(&mut ws).await;
    // One byte over the app's limit: the framework closes with 1009 (message too big).
    ws.send(Message::binary(vec![7u8; scenarios::WS_MAX_MESSAGE + 1]))
        .await
        .unwrap();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(f.code, CloseCode::Size),
        m => panic!("expected close 1009, got {m:?}"),
    }
    // The worker still serves everyone else.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let (head, body) = http1_until(
        &mut tcp,
        "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
        complete,
    )
    .await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, b"Hello, World!");
}

#[tokio::test]
async fn a_plain_get_of_ws_is_refused_and_the_contract_routes_are_unchanged() {
    let addr = start_plain();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // Not an upgrade request: the framework's 400 (WebSocketUpgrade::from_request fails).
    let (head, _) = http1_until(
        &mut tcp,
        "GET /ws HTTP/1.1\r\nHost: localhost\r\n\r\n",
        complete,
    )
    .await;
    assert!(head.starts_with("http/1.1 4"), "{head}");
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let (head, body) = http1_until(
        &mut tcp,
        "GET /json HTTP/1.1\r\nHost: localhost\r\n\r\n",
        complete,
    )
    .await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, br#"{"message":"Hello, World!"}"#);
}

#[tokio::test]
async fn events_over_http1_are_three_events_then_keep_alive_comments() {
    let addr = start_plain();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let (head, body) = http1_until(
        &mut tcp,
        "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n",
        |_, b| events_then_keep_alive(&String::from_utf8_lossy(b)),
    )
    .await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains("cache-control: no-cache"), "{head}");
    let (events, comments) = parse_sse(std::str::from_utf8(&body).unwrap());
    assert_eq!(events, expected_events());
    assert!(comments.iter().all(|c| c == "keep-alive"), "{comments:?}");
    // The client goes; the worker serves the next one.
    drop(tcp);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let (_, body) = http1_until(
        &mut tcp,
        "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
        complete,
    )
    .await;
    assert_eq!(body, b"Hello, World!");
}

#[tokio::test]
async fn h2c_prior_knowledge_serves_the_contract_routes_events_and_ws() {
    let addr = start_plain();
    let mut send = h2_client(TcpStream::connect(addr).await.unwrap()).await;
    assert_eq!(
        h2_get(&mut send, "/plaintext").await,
        (
            200,
            "text/plain; charset=utf-8".into(),
            "Hello, World!".into()
        )
    );
    let (status, ctype, body) = h2_get(&mut send, "/users/42").await;
    assert_eq!((status, ctype.as_str()), (200, "application/json"));
    assert_eq!(body, r#"{"id":42,"name":"user-42"}"#);
    let (status, _, _) = h2_get(&mut send, "/no-such-route").await;
    assert_eq!(status, 404);
    h2_events(&mut send).await;
    h2_ws(&mut send).await;
}

/// `/events` on an HTTP/2 stream: the three events and a keep-alive comment; then the client
/// cancels the stream (RST_STREAM) and the connection goes on serving.
async fn h2_events(send: &mut h2::client::SendRequest<Bytes>) {
    let req = http::Request::get("https://localhost/events")
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = tokio::time::timeout(WAIT, resp).await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    let mut all = Vec::new();
    while !events_then_keep_alive(&String::from_utf8_lossy(&all)) {
        let chunk = tokio::time::timeout(WAIT, body.data())
            .await
            .expect("events within 10 s")
            .expect("the stream stays open")
            .unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        all.extend_from_slice(&chunk);
    }
    let (events, _) = parse_sse(std::str::from_utf8(&all).unwrap());
    assert_eq!(events, expected_events());
    drop(body);
    let (status, _, text) = h2_get(send, "/plaintext").await;
    assert_eq!((status, text.as_str()), (200, "Hello, World!"));
}

/// `/ws` by RFC 8441 extended CONNECT on an HTTP/2 connection: the same echo.
async fn h2_ws(send: &mut h2::client::SendRequest<Bytes>) {
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri("https://localhost/ws")
        .header("sec-websocket-version", "13")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, stream) = send.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(WAIT, resp).await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);
    let io = ClientStream {
        recv: resp.into_body(),
        send: stream,
        pending: Bytes::new(),
    };
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    echo_round_trip(&mut ws).await;
}

#[tokio::test]
async fn over_tls_alpn_h2_serves_routes_events_and_ws_on_http2() {
    let ca = Ca::new("scenarios-h2");
    let addr = start_tls(&ca);
    let (tls, proto) = tls_connect(addr, &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(proto, b"h2");
    let mut send = h2_client(tls).await;
    assert_eq!(
        h2_get(&mut send, "/plaintext").await,
        (
            200,
            "text/plain; charset=utf-8".into(),
            "Hello, World!".into()
        )
    );
    let (status, _, body) = h2_get(&mut send, "/json").await;
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"message":"Hello, World!"}"#)
    );
    h2_events(&mut send).await;
    h2_ws(&mut send).await;
}

#[tokio::test]
async fn over_tls_alpn_http11_serves_routes_events_and_ws_on_http1() {
    let ca = Ca::new("scenarios-h1");
    let addr = start_tls(&ca);
    let (mut tls, proto) = tls_connect(addr, &ca, &[b"http/1.1"]).await;
    assert_eq!(proto, b"http/1.1");
    let (head, body) = http1_until(
        &mut tls,
        "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
        complete,
    )
    .await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, b"Hello, World!");
    // The same connection (keep-alive), then the event stream.
    let (head, body) = http1_until(
        &mut tls,
        "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n",
        |_, b| events_then_keep_alive(&String::from_utf8_lossy(b)),
    )
    .await;
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert_eq!(
        parse_sse(std::str::from_utf8(&body).unwrap()).0,
        expected_events()
    );
    drop(tls);
    // A client that offers no ALPN at all gets HTTP/1.1 too: the WebSocket by Upgrade.
    let (tls, proto) = tls_connect(addr, &ca, &[]).await;
    assert!(proto.is_empty());
    let (mut ws, resp) = tokio_tungstenite::client_async("wss://localhost/ws", tls)
        .await
        .unwrap();
    assert_eq!(resp.status(), 101);
    echo_round_trip(&mut ws).await;
}
