//! WebSocket over loopback with raw client frames: echo, fragmentation, control frames, close
//! handshake, invalid UTF-8 → 1007, oversize → 1009, protocol errors → 1002.
#![cfg(feature = "ws")]

mod ws_support;

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use ws_support::start_echo;

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CONT: u8 = 0x0;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// A masked client frame.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
    let len = payload.len();
    if len < 126 {
        f.push(0x80 | len as u8);
    } else if len < 65536 {
        f.push(0x80 | 126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mask = [0x12, 0x34, 0x56, 0x78];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// Reads one server frame: (fin, opcode, payload); `None` at end of stream.
async fn read_frame(tcp: &mut TcpStream) -> Option<(bool, u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    tcp.read_exact(&mut h).await.ok()?;
    assert_eq!(h[1] & 0x80, 0, "server frames are not masked");
    let len = match h[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            tcp.read_exact(&mut b).await.ok()?;
            u16::from_be_bytes(b) as usize
        }
        127 => {
            let mut b = [0u8; 8];
            tcp.read_exact(&mut b).await.ok()?;
            u64::from_be_bytes(b) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0; len];
    tcp.read_exact(&mut payload).await.ok()?;
    Some((h[0] & 0x80 != 0, h[0] & 0x0f, payload))
}

/// Opens a WebSocket to the echo server; checks the 101 and the accept value.
async fn open(addr: std::net::SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tcp.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(
        head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
        "{head}"
    );
    tcp
}

async fn expect_close(tcp: &mut TcpStream, code: u16) {
    let (fin, op, payload) = tokio::time::timeout(Duration::from_secs(10), read_frame(tcp))
        .await
        .expect("a close frame within 10 s")
        .expect("a close frame");
    assert!(fin);
    assert_eq!(op, CLOSE);
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), code);
}

#[tokio::test]
async fn echo_with_fragments_and_control_frames_interleaved() {
    let srv = start_echo(1024 * 1024).await;
    let mut ws = open(srv).await;
    ws.write_all(&frame(true, TEXT, b"hello")).await.unwrap();
    assert_eq!(
        read_frame(&mut ws).await.unwrap(),
        (true, TEXT, b"hello".to_vec())
    );
    ws.write_all(&frame(true, BINARY, &[0, 1, 2, 255]))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut ws).await.unwrap(),
        (true, BINARY, vec![0, 1, 2, 255])
    );
    // A text message in three fragments with a ping between them; the UTF-8 of "é" is split
    // across fragments (valid once joined).
    let mut out = frame(false, TEXT, b"caf\xc3");
    out.extend(frame(true, PING, b"p1"));
    out.extend(frame(false, CONT, b"\xa9 "));
    out.extend(frame(true, CONT, b"au lait"));
    ws.write_all(&out).await.unwrap();
    assert_eq!(
        read_frame(&mut ws).await.unwrap(),
        (true, PONG, b"p1".to_vec())
    );
    assert_eq!(
        read_frame(&mut ws).await.unwrap(),
        (true, TEXT, "café au lait".as_bytes().to_vec())
    );
    // A 70 000-byte message (64-bit length form).
    let big = vec![b'x'; 70_000];
    ws.write_all(&frame(true, BINARY, &big)).await.unwrap();
    assert_eq!(read_frame(&mut ws).await.unwrap(), (true, BINARY, big));
    // Close handshake: the server replies with the same code and closes.
    ws.write_all(&frame(true, CLOSE, &[0x03, 0xe8]))
        .await
        .unwrap();
    expect_close(&mut ws, 1000).await;
    assert!(read_frame(&mut ws).await.is_none());
}

#[tokio::test]
async fn invalid_utf8_is_closed_with_1007() {
    let srv = start_echo(1024 * 1024).await;
    let mut ws = open(srv).await;
    ws.write_all(&frame(true, TEXT, b"bad \xff\xfe"))
        .await
        .unwrap();
    expect_close(&mut ws, 1007).await;
    // Also when the bad byte is in a later fragment.
    let mut ws = open(srv).await;
    let mut out = frame(false, TEXT, b"fine ");
    out.extend(frame(true, CONT, b"\xc0\xaf"));
    ws.write_all(&out).await.unwrap();
    expect_close(&mut ws, 1007).await;
    // Others are still served.
    let mut ok = open(srv).await;
    ok.write_all(&frame(true, TEXT, b"still")).await.unwrap();
    assert_eq!(
        read_frame(&mut ok).await.unwrap(),
        (true, TEXT, b"still".to_vec())
    );
}

#[tokio::test]
async fn oversize_messages_are_closed_with_1009() {
    let srv = start_echo(1000).await;
    let mut ws = open(srv).await;
    ws.write_all(&frame(true, BINARY, &[7u8; 999]))
        .await
        .unwrap();
    assert_eq!(read_frame(&mut ws).await.unwrap().2.len(), 999);
    ws.write_all(&frame(true, BINARY, &[7u8; 1001]))
        .await
        .unwrap();
    expect_close(&mut ws, 1009).await;
    // Over the limit only once the fragments are joined.
    let mut ws = open(srv).await;
    let mut out = frame(false, TEXT, &[b'a'; 600]);
    out.extend(frame(true, CONT, &[b'b'; 600]));
    ws.write_all(&out).await.unwrap();
    expect_close(&mut ws, 1009).await;
    let mut ok = open(srv).await;
    ok.write_all(&frame(true, TEXT, b"small")).await.unwrap();
    assert_eq!(
        read_frame(&mut ok).await.unwrap(),
        (true, TEXT, b"small".to_vec())
    );
}

#[tokio::test]
async fn protocol_violations_are_closed_with_1002() {
    let srv = start_echo(1024 * 1024).await;
    // An unmasked client frame (RFC 6455 §5.1).
    let mut ws = open(srv).await;
    ws.write_all(&[0x81, 0x02, b'h', b'i']).await.unwrap();
    expect_close(&mut ws, 1002).await;
    // A continuation with nothing to continue.
    let mut ws = open(srv).await;
    ws.write_all(&frame(true, CONT, b"x")).await.unwrap();
    expect_close(&mut ws, 1002).await;
    // A fragmented ping (control frames must not be fragmented).
    let mut ws = open(srv).await;
    ws.write_all(&frame(false, PING, b"x")).await.unwrap();
    expect_close(&mut ws, 1002).await;
}

/// An accepted handshake whose status is changed afterwards (here to 403) is not a switch: the
/// engine sends the 403 without a body, never runs the WebSocket handler, and the connection
/// goes on as HTTP/1.1.
#[tokio::test]
async fn a_handshake_answer_with_another_status_is_sent_as_is_and_nothing_runs() {
    use peregrine::ws::WebSocketUpgrade;
    use peregrine::{get, App, Error, Request, Response};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let app = App::new().route(
        "/ws",
        get(move |req: Request| {
            let flag = flag.clone();
            async move {
                let up = WebSocketUpgrade::from_request(&req)?;
                let res = up.on_upgrade(move |ws| {
                    flag.store(true, Ordering::SeqCst);
                    ws_support::echo(ws)
                });
                Ok::<Response, Error>(res.with_status(403))
            }
        }),
    );
    let config = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let handle = app.serve(config).unwrap();
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\
          GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut got))
        .await
        .expect("both answers within 10 s")
        .unwrap();
    let got = String::from_utf8_lossy(&got);
    // The 403 (no body), then the second request's own answer: 426, not a WebSocket frame.
    let (first, second) = got.split_once("\r\n\r\n").expect("a first head");
    assert!(first.starts_with("HTTP/1.1 403 "), "{got}");
    assert!(first.contains("\r\nContent-Length: 0"), "{got}");
    assert!(second.starts_with("HTTP/1.1 426 "), "{got}");
    assert!(
        !ran.load(Ordering::SeqCst),
        "the WebSocket handler must not run"
    );
    drop(tcp);
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
}

/// A WebSocket route that refuses the handshake it accepted (a 403 set on the accepting
/// response, as an authorisation check or a middleware would) answers an ordinary response:
/// none of the switch's fields (`Upgrade`, `Connection: upgrade`, `Sec-WebSocket-Accept`,
/// the chosen `Sec-WebSocket-Protocol`), which RFC 9110 §7.8 and RFC 6455 §4.2.2 give to a
/// 101 only. The same over HTTP/2: `ws_h2.rs`.
#[tokio::test]
async fn a_refused_handshake_is_an_ordinary_response_without_the_switch_fields() {
    use peregrine::ws::WebSocketUpgrade;
    use peregrine::{get, App, Error, Request, Response};
    let app = App::new().route(
        "/ws",
        get(|req: Request| async move {
            let up = WebSocketUpgrade::from_request(&req)?.protocols(["chat"]);
            Ok::<Response, Error>(up.on_upgrade(ws_support::echo).with_status(403))
        }),
    );
    let config = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let handle = app.serve(config).unwrap();
    let mut tcp = TcpStream::connect(handle.local_addr()).await.unwrap();
    tcp.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Protocol: chat\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(10), tcp.read_exact(&mut b))
            .await
            .expect("the answer within 10 s")
            .unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 403 "), "{head}");
    for field in [
        "\r\nupgrade:",
        "\r\nsec-websocket-accept:",
        "\r\nsec-websocket-protocol:",
    ] {
        assert!(!head.contains(field), "{field:?} in a refusal: {head}");
    }
    assert!(
        !head
            .lines()
            .any(|l| l.starts_with("connection:") && l.contains("upgrade")),
        "{head}"
    );
    drop(tcp);
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
}
