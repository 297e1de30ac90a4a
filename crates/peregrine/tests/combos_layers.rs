//! tower layers where they meet other features, over real sockets: a WebSocket route behind
//! tower-http's `TraceLayer` (HTTP/1.1 with tokio-tungstenite's client, HTTP/2 extended CONNECT
//! with the h2 crate's client), and sized downloads (a file, a sized stream) behind
//! `TraceLayer` and `CompressionLayer`, which must keep their `Content-Length`.

mod common;
#[allow(dead_code)]
mod h2_stream;
#[allow(dead_code)]
mod ws_support;

use bytes::Bytes;
use common::{request, TestServer};
use futures_util::{SinkExt, StreamExt};
use h2_stream::{h2_client, ClientStream};
use peregrine::tower::TowerLayer;
use peregrine::ws::WebSocketUpgrade;
use peregrine::{get, App, Error, Request, Response, ResponseBody, Router};
use std::io::Write;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tower_http::compression::CompressionLayer;
use tower_http::trace::TraceLayer;

/// `/ws`: the echo, inside a group wrapped in `TraceLayer` and `CompressionLayer` (what an
/// axum user puts around everything).
fn ws_app() -> App {
    let ws = Router::new()
        .route(
            "/ws",
            get(|req: Request| async move {
                let up = WebSocketUpgrade::from_request(&req)?;
                Ok::<Response, Error>(up.on_upgrade(ws_support::echo))
            }),
        )
        .layer(TowerLayer::new(CompressionLayer::new()))
        .layer(TowerLayer::new(TraceLayer::new_for_http()));
    App::new().merge(ws)
}

async fn next<S>(ws: &mut WebSocketStream<S>) -> Message
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("a message within 10 s")
        .expect("a message")
        .expect("no error")
}

#[tokio::test]
async fn websocket_behind_tower_layers_over_http1() {
    let addr = ws_support::serve_for_the_process(ws_app());
    let tcp = TcpStream::connect(addr).await.unwrap();
    // Before: the layers lost the upgrade, and the client got `500 invalid response from
    // handler` instead of the 101.
    let (mut ws, res) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp)
        .await
        .expect("the handshake succeeds through the tower layers");
    assert_eq!(res.status(), 101);
    ws.send(Message::text("through trace and compression"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut ws).await,
        Message::text("through trace and compression")
    );
    ws.send(Message::binary(vec![7u8; 3000])).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::binary(vec![7u8; 3000]));
    ws.close(None).await.unwrap();
}

#[tokio::test]
async fn websocket_behind_tower_layers_over_http2() {
    let addr = ws_support::serve_for_the_process(ws_app());
    let mut send = h2_client(TcpStream::connect(addr).await.unwrap()).await;
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://{addr}/ws"))
        .header("sec-websocket-version", "13")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, stream) = send.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .unwrap()
        .unwrap();
    // RFC 8441: the tunnel is open on a 200 (before: 500).
    assert_eq!(resp.status(), 200);
    let io = ClientStream {
        recv: resp.into_body(),
        send: stream,
        pending: Bytes::new(),
    };
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    ws.send(Message::text("over h2")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("over h2"));
}

/// 3 MiB, more than the bridge gathers in memory (1 MiB).
const PHOTO: usize = 3 * 1024 * 1024;

fn photo_bytes() -> Vec<u8> {
    (0..PHOTO).map(|i| (i % 251) as u8).collect()
}

/// `/photo.jpg` (a file body) and `/stream.bin` (a sized stream), behind `layer`.
fn download_server<L>(layer: L) -> (TestServer, tempfile::NamedTempFile)
where
    L: peregrine::middleware::Middleware,
{
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&photo_bytes()).unwrap();
    let path = file.path().to_owned();
    let app = App::new()
        .route(
            "/photo.jpg",
            get(move |_r: Request| {
                let path = path.clone();
                async move {
                    let file = std::fs::File::open(&path).map_err(Error::from)?;
                    let len = file.metadata().map_err(Error::from)?.len();
                    Ok::<_, Error>(
                        Response::new(200)
                            .with_header("content-type", &b"image/jpeg"[..])
                            .with_body(ResponseBody::File {
                                file,
                                offset: 0,
                                len,
                            }),
                    )
                }
            }),
        )
        .route(
            "/stream.bin",
            get(|_r: Request| async {
                let pieces = photo_bytes()
                    .chunks(64 * 1024)
                    .map(|c| Ok(Bytes::copy_from_slice(c)))
                    .collect::<Vec<_>>();
                Response::new(200)
                    .with_header("content-type", &b"application/octet-stream"[..])
                    .with_body(ResponseBody::SizedStream {
                        len: PHOTO as u64,
                        stream: Box::pin(futures_util::stream::iter(pieces)),
                    })
            }),
        )
        .layer(layer);
    (TestServer::start(app), file)
}

/// GET and HEAD of `path` (asking for gzip) keep the exact length, never chunked.
fn assert_sized(server: &TestServer, path: &str) {
    let res = server.get(path, &["Accept-Encoding: gzip"]);
    assert_eq!(res.status, 200, "{path}");
    assert!(!res.chunked, "{path}: sent chunked");
    assert_eq!(res.header("content-length"), Some("3145728"), "{path}");
    assert_eq!(res.header("content-encoding"), None, "{path}");
    assert!(res.body == photo_bytes(), "{path}: body differs");
    let head = server.send(&request("HEAD", path, &["Accept-Encoding: gzip"], ""));
    assert_eq!(head.status, 200, "HEAD {path}");
    assert!(!head.chunked, "HEAD {path}: announced chunked");
    assert_eq!(
        head.header("content-length"),
        Some("3145728"),
        "HEAD {path}"
    );
}

#[test]
fn sized_downloads_keep_their_length_behind_trace_layer() {
    // Before: `Transfer-Encoding: chunked`, no `Content-Length`.
    let (server, _file) = download_server(TowerLayer::new(TraceLayer::new_for_http()));
    assert_sized(&server, "/photo.jpg");
    assert_sized(&server, "/stream.bin");
}

#[test]
fn sized_downloads_keep_their_length_behind_compression_layer() {
    // tower-http never compresses `image/jpeg`: the photo goes out as it is, sized.
    let (server, _file) = download_server(TowerLayer::new(CompressionLayer::new()));
    assert_sized(&server, "/photo.jpg");
    // What it does compress loses its length (the compressed size is not known ahead).
    let res = server.get("/stream.bin", &["Accept-Encoding: gzip"]);
    assert_eq!(res.header("content-encoding"), Some("gzip"));
    assert_eq!(common::gunzip(&res.body), photo_bytes());
}
