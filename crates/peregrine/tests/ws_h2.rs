//! WebSocket over HTTP/2 (RFC 8441 extended CONNECT), against clients we did not write: the h2
//! crate's client sends the extended CONNECT, tokio-tungstenite's client runs the WebSocket on
//! the stream. The server is the same `peregrine::ws` handler that serves HTTP/1.1.

// Its echo handler and its server; not `start_echo` (the app is built below).
#[allow(dead_code)]
mod ws_support;

mod h2_stream;
use h2_stream::{extended_connect, h2_client, open_ws, ClientStream};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use peregrine::ws::WebSocketUpgrade;
use peregrine::{get, App, Error, Request, Response};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// `/ws`: the echo (messages up to 1000 bytes); `/version`: which HTTP version the handler
/// saw, sent as a text message; `/plain`: not a WebSocket resource; `/refuse`: accepts the
/// handshake (choosing subprotocol `chat`), then refuses it with 403.
fn start() -> std::net::SocketAddr {
    let app = App::new()
        .route(
            "/ws",
            get(|req: Request| async move {
                let up = WebSocketUpgrade::from_request(&req)?.max_message_size(1000);
                Ok::<Response, Error>(up.on_upgrade(ws_support::echo))
            }),
        )
        .route(
            "/version",
            get(|req: Request| async move {
                let version = format!("{:?}", req.version());
                let up = WebSocketUpgrade::from_request(&req)?;
                Ok::<Response, Error>(up.on_upgrade(move |mut ws| async move {
                    let _ = ws.send(peregrine::ws::Message::Text(version)).await;
                }))
            }),
        )
        .route(
            "/refuse",
            get(|req: Request| async move {
                let up = WebSocketUpgrade::from_request(&req)?.protocols(["chat"]);
                Ok::<Response, Error>(up.on_upgrade(ws_support::echo).with_status(403))
            }),
        )
        .route("/plain", get(|_req: Request| async { "not a websocket\n" }));
    ws_support::serve_for_the_process(app)
}

/// An HTTP/2 connection (h2c, prior knowledge) whose SETTINGS announced extended CONNECT.
async fn connect(addr: std::net::SocketAddr) -> h2::client::SendRequest<Bytes> {
    h2_client(TcpStream::connect(addr).await.unwrap()).await
}

async fn next(ws: &mut WebSocketStream<ClientStream>) -> Message {
    tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("a message within 10 s")
        .expect("a message")
        .expect("no error")
}

/// A plain HTTP/2 GET on a fresh connection is answered: the worker serves others.
async fn still_serving(addr: std::net::SocketAddr) {
    let mut send = connect(addr).await;
    let req = http::Request::get(format!("http://{addr}/plain"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    assert_eq!(resp.await.unwrap().status(), 200);
}

#[tokio::test]
async fn echo_ping_and_close_over_an_http2_stream() {
    let addr = start();
    let mut send = connect(addr).await;
    let mut ws = open_ws(&mut send, addr, "/ws").await;
    ws.send(Message::text("hello over h2")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("hello over h2"));
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::binary(vec![1u8, 2, 3]));
    ws.send(Message::Ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    assert_eq!(
        next(&mut ws).await,
        Message::Pong(Bytes::from_static(b"are you there"))
    );
    // Two WebSockets share the connection (two streams), independently.
    let mut other = open_ws(&mut send, addr, "/ws").await;
    other.send(Message::text("second")).await.unwrap();
    assert_eq!(next(&mut other).await, Message::text("second"));
    ws.send(Message::text("first again")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("first again"));
    // Close handshake: the server replies with the same code.
    ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    })))
    .await
    .unwrap();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(f.code, CloseCode::Normal),
        m => panic!("expected a close frame, got {m:?}"),
    }
    // The other stream is untouched.
    other.send(Message::text("still here")).await.unwrap();
    assert_eq!(next(&mut other).await, Message::text("still here"));
}

#[tokio::test]
async fn the_handler_sees_http2_and_nothing_else_differs() {
    let addr = start();
    let mut send = connect(addr).await;
    let mut ws = open_ws(&mut send, addr, "/version").await;
    assert_eq!(next(&mut ws).await, Message::text("Http2"));
}

#[tokio::test]
async fn oversize_message_is_closed_with_1009_and_the_worker_goes_on() {
    let addr = start();
    let mut send = connect(addr).await;
    let mut ws = open_ws(&mut send, addr, "/ws").await;
    ws.send(Message::binary(vec![7u8; 999])).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::binary(vec![7u8; 999]));
    ws.send(Message::binary(vec![7u8; 1001])).await.unwrap();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 1009),
        m => panic!("expected close 1009, got {m:?}"),
    }
    // The same HTTP/2 connection and the worker still serve.
    let mut again = open_ws(&mut send, addr, "/ws").await;
    again.send(Message::text("small")).await.unwrap();
    assert_eq!(next(&mut again).await, Message::text("small"));
    still_serving(addr).await;
}

#[tokio::test]
async fn invalid_utf8_is_closed_with_1007() {
    let addr = start();
    let mut send = connect(addr).await;
    let (_, stream) = extended_connect(&mut send, addr, "/ws", "websocket").await;
    let mut raw = stream.unwrap();
    // A masked text frame whose payload is not UTF-8, written as raw bytes on the stream.
    let payload = [0xffu8, 0xfe];
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    raw.write_all(&frame).await.unwrap();
    let mut head = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), raw.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head[0], 0x88, "a close frame");
    assert_eq!(u16::from_be_bytes([head[2], head[3]]), 1007);
    still_serving(addr).await;
}

#[tokio::test]
async fn extended_connect_answers_like_http11_when_not_a_websocket() {
    let addr = start();
    let mut send = connect(addr).await;
    // A resource that is not a WebSocket must not look like an open tunnel.
    let (status, _) = extended_connect(&mut send, addr, "/plain", "websocket").await;
    assert_eq!(status, 501);
    // A protocol other than websocket: the WebSocket handler's 426, as over HTTP/1.1.
    let (status, _) = extended_connect(&mut send, addr, "/ws", "not-websocket").await;
    assert_eq!(status, 426);
    // No route: 404.
    let (status, _) = extended_connect(&mut send, addr, "/nowhere", "websocket").await;
    assert_eq!(status, 404);
    // A plain HTTP/2 GET of the WebSocket route: 426, nothing opened.
    let req = http::Request::get(format!("http://{addr}/ws"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    assert_eq!(resp.await.unwrap().status(), 426);
}

/// A refused extended CONNECT (the route's 403) is an ordinary response: no tunnel, and none
/// of the accepting answer's fields (here the chosen `Sec-WebSocket-Protocol`; `Upgrade` and
/// `Connection` cannot exist in HTTP/2 at all). The same over HTTP/1.1: `ws.rs`.
#[tokio::test]
async fn a_refused_extended_connect_is_an_ordinary_response_without_the_switch_fields() {
    let addr = start();
    let mut send = connect(addr).await;
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://{addr}/refuse"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, _stream) = send.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 403);
    for field in [
        "upgrade",
        "connection",
        "sec-websocket-accept",
        "sec-websocket-protocol",
    ] {
        assert!(
            !resp.headers().contains_key(field),
            "{field} in a refusal: {:?}",
            resp.headers()
        );
    }
    // Not a tunnel: the response ends without DATA.
    let mut body = resp.into_body();
    let data = tokio::time::timeout(Duration::from_secs(10), body.data())
        .await
        .expect("the end of the response within 10 s");
    assert!(data.is_none(), "no DATA on a refusal");
    still_serving(addr).await;
}
