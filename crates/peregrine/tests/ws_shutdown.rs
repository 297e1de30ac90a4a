//! Graceful shutdown with WebSocket sessions open: each gets Close 1001, over HTTP/1.1 and over
//! HTTP/2 (RFC 8441), its handler sees the session end, and the server stops at once instead
//! of waiting out `shutdown_timeout` (10 s here). Clients are tokio-tungstenite's.

mod h2_stream;
use h2_stream::{h2_client, open_ws};

use futures_util::{SinkExt, StreamExt};
use peregrine::ws::{
    Message as ServerMessage, WebSocket, WebSocketUpgrade, GOING_AWAY, GOING_AWAY_REASON,
};
use peregrine::{get, App, Error, Request, Response, ServerConfig, ServerHandle};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Far longer than any wait these tests allow: a server that waits it out fails them.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers' `recv` returned last, one entry per ended session.
type Seen = Arc<Mutex<Vec<String>>>;

/// `/ws`: an echo that records how its session ended; `/last`: sends "moving on" when
/// shutdown starts, then closes with 1001 itself.
fn start(seen: &Seen) -> ServerHandle {
    let seen = seen.clone();
    let app = App::new()
        .route(
            "/ws",
            get(move |req: Request| {
                let seen = seen.clone();
                async move {
                    let up = WebSocketUpgrade::from_request(&req)?;
                    Ok::<Response, Error>(up.on_upgrade(move |ws| recording_echo(ws, seen)))
                }
            }),
        )
        .route(
            "/last",
            get(|req: Request| async move {
                Ok::<Response, Error>(WebSocketUpgrade::from_request(&req)?.on_upgrade(last_word))
            }),
        );
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .shutdown_timeout(SHUTDOWN_TIMEOUT)
        .build();
    app.serve(config).unwrap()
}

async fn recording_echo(mut ws: WebSocket, seen: Seen) {
    let mut last = "nothing".to_string();
    while let Some(msg) = ws.recv().await {
        last = format!("{msg:?}");
        match msg {
            Ok(m @ (ServerMessage::Text(_) | ServerMessage::Binary(_))) => {
                let _ = ws.send(m).await;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    // `recv` returns `None` after the close it returned.
    seen.lock().unwrap().push(format!("{last}, then None"));
}

async fn last_word(mut ws: WebSocket) {
    let shutdown = ws.shutdown_started();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => {
                let _ = ws.send(ServerMessage::Text("moving on".into())).await;
                let _ = ws.close(GOING_AWAY, "restarting").await;
                return;
            }
            msg = ws.recv() => if msg.is_none() { return },
        }
    }
}

/// Shuts `server` down on a blocking thread; resolves to how long it took.
fn shut_down(server: ServerHandle) -> tokio::task::JoinHandle<Duration> {
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        server.shutdown();
        start.elapsed()
    })
}

/// The next frame within 5 s.
async fn next<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) -> Message {
    tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("a frame within 5 s of the shutdown")
        .expect("a frame, not the end")
        .expect("no error")
}

/// Reads the server's Close and answers it (tungstenite replies on the read after it): its
/// code and reason.
async fn closed_by_server<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
) -> (u16, String) {
    let Message::Close(Some(frame)) = next(ws).await else {
        panic!("a Close frame with a code")
    };
    let end = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(
        matches!(end, Ok(None)),
        "the session ends after the close handshake: {end:?}"
    );
    (u16::from(frame.code), frame.reason.as_str().to_string())
}

/// An echoed message: the session is open and its handler waits in `recv`.
async fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
    ws.send(Message::text("hi")).await.unwrap();
    assert_eq!(next(ws).await, Message::text("hi"));
}

/// A ping answered by a pong: the session is open and its handler reads.
async fn ping_pong<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
    let ping = bytes::Bytes::from_static(b"?");
    ws.send(Message::Ping(ping.clone())).await.unwrap();
    assert_eq!(next(ws).await, Message::Pong(ping));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_over_http1_and_http2_get_1001_and_the_server_stops_at_once() {
    let seen = Seen::default();
    let server = start(&seen);
    let addr = server.local_addr();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut h1, _) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp)
        .await
        .unwrap();
    let mut send = h2_client(TcpStream::connect(addr).await.unwrap()).await;
    let mut h2 = open_ws(&mut send, addr, "/ws").await;
    round_trip(&mut h1).await;
    round_trip(&mut h2).await;

    let stopping = shut_down(server);
    let (h1_close, h2_close) = tokio::join!(closed_by_server(&mut h1), closed_by_server(&mut h2));
    let took = stopping.await.unwrap();

    let going_away = (GOING_AWAY, GOING_AWAY_REASON.to_string());
    assert_eq!((h1_close, h2_close), (going_away.clone(), going_away));
    assert_eq!(
        (GOING_AWAY, GOING_AWAY_REASON),
        (1001, "server shutting down")
    );
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    let handler_saw = format!(
        "Ok(Close(Some(CloseFrame {{ code: 1001, reason: {GOING_AWAY_REASON:?} }}))), then None"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![handler_saw.clone(), handler_saw]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_the_close_is_let_go_after_a_second() {
    let seen = Seen::default();
    let server = start(&seen);
    let addr = server.local_addr();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut silent, _) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp)
        .await
        .unwrap();
    round_trip(&mut silent).await;

    // The client reads nothing from now on: the server's Close waits in its socket.
    let took = shut_down(server).await.unwrap();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "a silent peer holds the shutdown for about a second, not {took:?}"
    );
    let Message::Close(Some(frame)) = next(&mut silent).await else {
        panic!("the Close is there once the client reads")
    };
    assert_eq!(u16::from(frame.code), 1001);
    assert_eq!(seen.lock().unwrap().len(), 1, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_watching_for_shutdown_sends_its_last_message_before_its_close() {
    let seen = Seen::default();
    let server = start(&seen);
    let addr = server.local_addr();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut h1, _) = tokio_tungstenite::client_async(format!("ws://{addr}/last"), tcp)
        .await
        .unwrap();
    let mut send = h2_client(TcpStream::connect(addr).await.unwrap()).await;
    let mut h2 = open_ws(&mut send, addr, "/last").await;
    // Both sessions are open (their handlers run) once a ping is answered.
    ping_pong(&mut h1).await;
    ping_pong(&mut h2).await;

    let stopping = shut_down(server);
    assert_eq!(next(&mut h1).await, Message::text("moving on"));
    assert_eq!(next(&mut h2).await, Message::text("moving on"));
    let closes = tokio::join!(closed_by_server(&mut h1), closed_by_server(&mut h2));
    let restarting = (1001, "restarting".to_string());
    assert_eq!(closes, (restarting.clone(), restarting));
    let took = stopping.await.unwrap();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
}
