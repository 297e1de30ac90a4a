//! One checker per route kind: what a user of that route gets with no observer and no layer
//! (status, framing, bytes, the upgrade), asserted over the cell's own connection. `Err` says
//! what differed.

use super::app::{
    file_bytes, fnv, stream_chunk, FILE_PATH, FILE_SIZE, JSON_BODY, ORIGIN, STREAM_CHUNKS,
};
use super::client::{
    connect, err, exchange, h1_read, h1_send, h2_collect, h2_connect, h2_send, Reply, Req, Target,
    WAIT,
};
use super::table::{Middleware, Route};
use crate::h2_stream::ClientStream;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Runs `route`'s checker against the target.
pub async fn check(route: Route, t: &Target<'_>, mw: Middleware) -> Result<(), String> {
    match route {
        Route::Json => json(t, mw).await,
        Route::Streamed => streamed(t).await,
        Route::SizedStream => sized_stream(t).await,
        Route::File => file(t).await,
        Route::FileRange => file_range(t).await,
        Route::FileHead => file_head(t).await,
        Route::Multipart => multipart(t).await,
        Route::WebSocket => websocket(t).await,
        Route::Sse => sse(t).await,
        Route::Preflight => preflight(t, mw).await,
    }
}

/// A body of known length: `Content-Length` says it, never chunked.
fn sized(r: &Reply, len: usize) -> Result<(), String> {
    ensure!(
        r.content_length() == Some(len) && !r.chunked,
        "framing: content-length {:?} (want {len}), chunked {}; {} body bytes",
        r.header("content-length"),
        r.chunked,
        r.body.len()
    );
    Ok(())
}

/// The same bytes; on a difference, where it starts (not 3 MiB of output).
fn same_bytes(got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    Err(format!(
        "body: {} bytes (want {}), first difference at {at:?}",
        got.len(),
        want.len()
    ))
}

async fn json(t: &Target<'_>, mw: Middleware) -> Result<(), String> {
    let r = exchange(
        t,
        &Req {
            headers: &[("origin", ORIGIN)],
            ..Req::get("/api/json")
        },
    )
    .await?;
    ensure!(r.status == 200, "status {}", r.status);
    ensure!(
        r.header("content-type") == Some("application/json"),
        "content-type {:?}",
        r.header("content-type")
    );
    sized(&r, JSON_BODY.len())?;
    same_bytes(&r.body, JSON_BODY.as_bytes())?;
    if mw.cors() {
        ensure!(
            r.header("access-control-allow-origin") == Some(ORIGIN),
            "access-control-allow-origin {:?}",
            r.header("access-control-allow-origin")
        );
    }
    Ok(())
}

async fn streamed(t: &Target<'_>) -> Result<(), String> {
    let r = exchange(t, &Req::get("/api/stream")).await?;
    ensure!(r.status == 200, "status {}", r.status);
    // Unknown length: no Content-Length; HTTP/1.1 frames it chunked.
    ensure!(
        r.header("content-length").is_none() && (t.transport.h2() || r.chunked),
        "framing: content-length {:?}, chunked {}",
        r.header("content-length"),
        r.chunked
    );
    let want: Vec<u8> = (0..STREAM_CHUNKS).flat_map(stream_chunk).collect();
    same_bytes(&r.body, &want)
}

async fn sized_stream(t: &Target<'_>) -> Result<(), String> {
    let r = exchange(t, &Req::get("/api/sized")).await?;
    ensure!(r.status == 200, "status {}", r.status);
    let want: Vec<u8> = (0..STREAM_CHUNKS).flat_map(stream_chunk).collect();
    sized(&r, want.len())?;
    same_bytes(&r.body, &want)
}

async fn file(t: &Target<'_>) -> Result<(), String> {
    let r = exchange(t, &Req::get(FILE_PATH)).await?;
    ensure!(r.status == 200, "status {}", r.status);
    sized(&r, FILE_SIZE)?;
    same_bytes(&r.body, &file_bytes())
}

async fn file_range(t: &Target<'_>) -> Result<(), String> {
    let (first, last) = (1_000_000usize, 1_999_999usize);
    let range = format!("bytes={first}-{last}");
    let r = exchange(
        t,
        &Req {
            headers: &[("range", &range)],
            ..Req::get(FILE_PATH)
        },
    )
    .await?;
    ensure!(r.status == 206, "status {}", r.status);
    let want_range = format!("bytes {first}-{last}/{FILE_SIZE}");
    ensure!(
        r.header("content-range") == Some(want_range.as_str()),
        "content-range {:?}",
        r.header("content-range")
    );
    sized(&r, last - first + 1)?;
    same_bytes(&r.body, &file_bytes()[first..=last])
}

async fn file_head(t: &Target<'_>) -> Result<(), String> {
    let r = exchange(
        t,
        &Req {
            method: "HEAD",
            ..Req::get(FILE_PATH)
        },
    )
    .await?;
    ensure!(r.status == 200, "status {}", r.status);
    // HEAD announces the length GET would send.
    sized(&r, FILE_SIZE)?;
    ensure!(r.body.is_empty(), "HEAD body of {} bytes", r.body.len());
    Ok(())
}

async fn multipart(t: &Target<'_>) -> Result<(), String> {
    let boundary = "matrix-boundary-7d1f";
    let data: Vec<u8> = (0..200 * 1024).map(|i| (i * 7 % 256) as u8).collect();
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\ncontent-disposition: form-data; name=\"title\"\r\n\r\nmatrix\r\n\
             --{boundary}\r\ncontent-disposition: form-data; name=\"file\"; \
             filename=\"data.bin\"\r\ncontent-type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ctype = format!("multipart/form-data; boundary={boundary}");
    let r = exchange(
        t,
        &Req {
            method: "POST",
            path: "/api/upload",
            headers: &[("content-type", &ctype)],
            body: Bytes::from(body),
        },
    )
    .await?;
    let want = format!(
        "title::6:{:08x};file:data.bin:{}:{:08x};",
        fnv(b"matrix"),
        data.len(),
        fnv(&data)
    );
    ensure!(
        r.status == 200,
        "status {}: {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    sized(&r, want.len())?;
    same_bytes(&r.body, want.as_bytes())
}

async fn next<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
) -> Result<Message, String> {
    match tokio::time::timeout(WAIT, ws.next()).await {
        Err(_) => Err("no WebSocket message within the wait".into()),
        Ok(None) => Err("WebSocket closed".into()),
        Ok(Some(m)) => m.map_err(err),
    }
}

/// Text and binary messages come back as sent.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
) -> Result<(), String> {
    ws.send(Message::text("hello, matrix")).await.map_err(err)?;
    ensure!(
        next(ws).await? == Message::text("hello, matrix"),
        "text not echoed"
    );
    let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    ws.send(Message::binary(bytes.clone())).await.map_err(err)?;
    ensure!(
        next(ws).await? == Message::binary(bytes),
        "binary not echoed"
    );
    Ok(())
}

async fn websocket(t: &Target<'_>) -> Result<(), String> {
    if !t.transport.h2() {
        let io = connect(t).await?;
        let (mut ws, resp) = tokio::time::timeout(
            WAIT,
            tokio_tungstenite::client_async("ws://localhost/api/ws", io),
        )
        .await
        .map_err(|_| "no handshake answer".to_string())?
        .map_err(|e| format!("handshake: {e}"))?;
        ensure!(resp.status() == 101, "status {}", resp.status());
        return echo(&mut ws).await;
    }
    let mut send = h2_connect(t).await?;
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri("https://localhost/api/ws")
        .header("sec-websocket-version", "13")
        .body(())
        .map_err(err)?;
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, stream) = send.send_request(req, false).map_err(err)?;
    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .map_err(|_| "no extended CONNECT answer".to_string())?
        .map_err(err)?;
    ensure!(
        resp.status() == 200,
        "extended CONNECT status {}",
        resp.status()
    );
    let io = ClientStream {
        recv: resp.into_body(),
        send: stream,
        pending: Bytes::new(),
    };
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    echo(&mut ws).await
}

const EVENTS: &str =
    "id: 1\ndata: one\n\nid: 2\nevent: multi\ndata: two\ndata: lines\n\nid: 3\ndata: three\n\n";

async fn sse(t: &Target<'_>) -> Result<(), String> {
    let req = Req::get("/api/events");
    let three = |body: &[u8]| body.len() >= EVENTS.len();
    let r = if t.transport.h2() {
        let mut send = h2_connect(t).await?;
        let (resp, _stream) = h2_send(&mut send, &req).await?;
        // Returning drops the stream: the client cancels it (RST_STREAM).
        h2_collect(resp, false, three).await?
    } else {
        let mut io = connect(t).await?;
        h1_send(&mut io, &req).await?;
        // Returning drops the connection: the client leaves.
        h1_read(&mut io, false, three).await?
    };
    ensure!(r.status == 200, "status {}", r.status);
    ensure!(
        r.header("content-type") == Some("text/event-stream"),
        "content-type {:?}",
        r.header("content-type")
    );
    ensure!(
        r.header("content-length").is_none() && (t.transport.h2() || r.chunked),
        "framing: content-length {:?}, chunked {}",
        r.header("content-length"),
        r.chunked
    );
    same_bytes(&r.body, EVENTS.as_bytes())?;
    // The client left; the worker serves the next one. (The server noticing that it left
    // is checked at shutdown: the stream must not hold the drain.)
    let again = exchange(t, &Req::get("/api/json")).await?;
    ensure!(
        again.status == 200,
        "after the stream: status {}",
        again.status
    );
    Ok(())
}

async fn preflight(t: &Target<'_>, mw: Middleware) -> Result<(), String> {
    let r = exchange(
        t,
        &Req {
            method: "OPTIONS",
            headers: &[
                ("origin", ORIGIN),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "content-type"),
            ],
            ..Req::get("/api/upload")
        },
    )
    .await?;
    let allow_origin = r.header("access-control-allow-origin");
    if !mw.cors() {
        // No CORS layer: an ordinary answer to OPTIONS that grants nothing.
        ensure!(r.status < 500, "status {}", r.status);
        ensure!(allow_origin.is_none(), "CORS without a CORS layer");
        return Ok(());
    }
    ensure!((200..300).contains(&r.status), "status {}", r.status);
    ensure!(
        allow_origin == Some(ORIGIN),
        "access-control-allow-origin {allow_origin:?}"
    );
    let methods = r
        .header("access-control-allow-methods")
        .unwrap_or_default()
        .to_ascii_uppercase();
    ensure!(
        methods.contains("POST"),
        "access-control-allow-methods {methods:?}"
    );
    Ok(())
}
