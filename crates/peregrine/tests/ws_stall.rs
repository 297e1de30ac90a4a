//! A WebSocket client that stops reading is bounded in time by the engine's write rules
//! (`write_timeout`, `write_min_rate` after `write_rate_grace`), as an HTTP/1.1 response is:
//! the handler's `send` fails with the timed-out I/O error instead of waiting forever, and the
//! connection is closed. A client that reads slowly but steadily gets everything. Real
//! loopback sockets, the opening handshake and the masked frames written by hand.
#![cfg(feature = "ws")]

use peregrine::server::ServerConfigBuilder;
use peregrine::ws::{Message, WebSocket, WebSocketUpgrade, WsError};
use peregrine::{get, App, Error, Request, Response, ServerConfig, ServerHandle};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// How the handler's loop ended: which call failed (`"send"`, `"recv"`), with what, and when;
/// `("done", Ok)` once everything was sent.
type Report = Arc<Mutex<Option<(&'static str, Result<(), WsError>, Instant)>>>;

/// Echoes binary messages until a call fails.
async fn echo(mut ws: WebSocket, report: Report) {
    let (op, result) = loop {
        match ws.recv().await {
            Some(Ok(Message::Binary(b))) => {
                if let Err(e) = ws.send(Message::Binary(b)).await {
                    break ("send", Err(e));
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => break ("recv", Err(e)),
            None => break ("recv", Err(WsError::Closed)),
        }
    };
    *report.lock().unwrap() = Some((op, result, Instant::now()));
}

/// Sends `count` binary messages of 16 KiB.
async fn push(mut ws: WebSocket, count: usize, report: Report) {
    let piece = bytes::Bytes::from(vec![b'p'; 16 * 1024]);
    let mut result = Ok(());
    for _ in 0..count {
        result = ws.send(Message::Binary(piece.clone())).await;
        if result.is_err() {
            break;
        }
    }
    *report.lock().unwrap() = Some(("done", result, Instant::now()));
}

/// Serves `GET /echo` and `GET /push/<count>` on a loopback port with `config`'s write rules.
fn serve(config: ServerConfig, report: Report) -> ServerHandle {
    let on_echo = report.clone();
    let app = App::new()
        .route(
            "/echo",
            get(move |req: Request| {
                let report = on_echo.clone();
                async move {
                    let up = WebSocketUpgrade::from_request(&req)?;
                    Ok::<Response, Error>(up.on_upgrade(move |ws| echo(ws, report)))
                }
            }),
        )
        .route(
            "/push/{count}",
            get(move |req: Request| {
                let report = report.clone();
                async move {
                    let count: usize = req.param("count")?;
                    let up = WebSocketUpgrade::from_request(&req)?;
                    Ok::<Response, Error>(up.on_upgrade(move |ws| push(ws, count, report)))
                }
            }),
        );
    app.serve(
        ServerConfigBuilder::from(config)
            .addr("127.0.0.1:0".parse().unwrap())
            .workers(1)
            .shutdown_timeout(Duration::from_secs(2))
            .build(),
    )
    .unwrap()
}

/// Opens a WebSocket on `path` from a socket with a receive buffer of `rcvbuf` bytes (the
/// kernel doubles it); the 101's head is read one byte at a time, so no frame is taken.
async fn open(addr: std::net::SocketAddr, path: &str, rcvbuf: u32) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(rcvbuf).unwrap();
    let mut tcp = socket.connect(addr).await.unwrap();
    let handshake = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(handshake.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101 "), "{head:?}");
    tcp
}

/// A masked binary frame of `len` bytes (16-bit length form).
fn binary_frame(len: u16) -> Vec<u8> {
    let mut f = vec![0x82, 0x80 | 126];
    f.extend_from_slice(&len.to_be_bytes());
    let mask = [0x12, 0x34, 0x56, 0x78];
    f.extend_from_slice(&mask);
    f.extend((0..len as usize).map(|i| b'm' ^ mask[i % 4]));
    f
}

/// Waits (at most `guard`) for the handler's report.
async fn reported(
    report: &Report,
    guard: Duration,
) -> Option<(&'static str, Result<(), WsError>, Instant)> {
    let start = Instant::now();
    while start.elapsed() < guard {
        if let Some(r) = report.lock().unwrap().take() {
            return Some(r);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Reads until the end of the connection (at most `guard`): the bytes read, and how it ended.
async fn read_to_end(
    r: &mut (impl AsyncRead + Unpin),
    guard: Duration,
) -> (usize, Option<std::io::Result<()>>) {
    let mut got = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let end = tokio::time::timeout(guard, async {
        loop {
            match r.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => got += n,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .ok();
    (got, end)
}

async fn stop(handle: ServerHandle) {
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_echo_to_a_client_that_never_reads_fails_and_closes_after_the_write_timeout() {
    let report = Report::default();
    let write_timeout = Duration::from_secs(1);
    let config = ServerConfig::builder().write_timeout(write_timeout).build();
    let handle = serve(config, report.clone());
    let tcp = open(handle.local_addr(), "/echo", 4096).await;
    let (mut read, mut write) = tcp.into_split();
    // Messages to echo, written until the server stops taking them (it is stuck sending the
    // echoes nobody reads) or the connection is gone.
    let frame = binary_frame(16 * 1024);
    let writer = tokio::spawn(async move { while write.write_all(&frame).await.is_ok() {} });
    let start = Instant::now();
    let Some((op, result, at)) = reported(&report, Duration::from_secs(15)).await else {
        panic!("the handler still waits to send to a client that reads nothing after 15 s");
    };
    assert_eq!(op, "send", "{result:?}");
    match result {
        Err(WsError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}"),
        other => panic!("send returned {other:?}"),
    }
    let took = at - start;
    assert!(took < write_timeout * 5, "send failed after {took:?}");
    // The connection is closed with a reset: the few echoes queued for the client read out,
    // then the connection ends (the reset's error goes to whichever of the client's reads and
    // writes comes first), instead of the echoes flowing again as the client reads.
    let (got, end) = read_to_end(&mut read, Duration::from_secs(5)).await;
    let end = end.unwrap_or_else(|| panic!("still open after the timeout, {got} bytes read"));
    if let Err(e) = end {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    assert!(got < 8 << 20, "{got} bytes read after the timeout");
    tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("the client's writes fail once the connection is closed")
        .unwrap();
    stop(handle).await;
}

#[tokio::test]
async fn a_client_that_reads_slowly_but_steadily_gets_every_message() {
    let report = Report::default();
    let write_timeout = Duration::from_secs(1);
    let config = ServerConfig::builder()
        .write_timeout(write_timeout)
        .write_min_rate(256 * 1024)
        .write_rate_grace(write_timeout)
        .build();
    let handle = serve(config, report.clone());
    // More than the kernel buffers both ways hold on loopback (a few MiB), so the handler
    // waits for the client most of the time.
    let count = 1024;
    let mut tcp = open(handle.local_addr(), &format!("/push/{count}"), 128 * 1024).await;
    let start = Instant::now();
    // Each frame: 2 bytes of header, 2 of length, 16 KiB of payload.
    let total = count * (4 + 16 * 1024);
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    // About 2.5 MiB/s: 256 KiB, then a 100 ms pause.
    while got < total {
        let round = (got + 256 * 1024).min(total);
        while got < round {
            let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
                .await
                .expect("the server keeps sending")
                .unwrap();
            assert!(n > 0, "the connection ended after {got} of {total} bytes");
            got += n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got, total);
    let (op, result, at) = reported(&report, Duration::from_secs(5))
        .await
        .expect("the handler finished");
    assert_eq!(op, "done");
    result.expect("every send succeeded");
    let held = at - start;
    assert!(
        held > write_timeout * 2,
        "the handler finished after {held:?}: the client did not hold it up, nothing was tested"
    );
    stop(handle).await;
}
