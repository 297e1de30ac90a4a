//! Control-frame floods over a real socket: a client that sends WINDOW_UPDATEs of one byte
//! (each makes the server send a 1-byte DATA frame), or PINGs, without end gets
//! `GOAWAY(ENHANCE_YOUR_CALM)` once past its budget, while another client of the same worker
//! (one thread) keeps being served. A download acknowledged frame by frame stays within it.
#![cfg(feature = "http2")]

mod common;
mod h2_support;

use bytes::Bytes;
use h2_support::{
    client, fetch, frame, get, get_block, raw_connect, read_frame, start, END_HEADERS, END_STREAM,
    GOAWAY, HEADERS, PING, SETTINGS,
};
use peregrine_server::h2::{Closed, Http2Config};
use peregrine_server::{service_fn, Request, Response, ServerConfig, Service};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const WINDOW_UPDATE: u8 = 0x8;
const ENHANCE_YOUR_CALM: u32 = 0xb;

fn app() -> impl Service {
    let big = Bytes::from(vec![1u8; 8 * 1024 * 1024]);
    service_fn(move |req: Request| {
        let big = big.clone();
        async move {
            match req.path() {
                "/big" => Response::new(200).with_body(peregrine_server::ResponseBody::Full(big)),
                _ => Response::text("hello"),
            }
        }
    })
}

/// Floods `frames` (one batch, repeated) until the server's GOAWAY, reading everything it
/// sends meanwhile; the GOAWAY's code, or `None` if 5 000 batches passed without one.
async fn flood_until_goaway(tcp: tokio::net::TcpStream, batch: Vec<u8>) -> Option<u32> {
    let (mut rd, mut wr) = tcp.into_split();
    let reader = tokio::spawn(async move {
        while let Some(f) = read_frame(&mut rd).await {
            if f.kind == GOAWAY {
                return Some(u32::from_be_bytes(f.payload[4..8].try_into().unwrap()));
            }
        }
        None
    });
    for _ in 0..5_000 {
        if reader.is_finished() || wr.write_all(&batch).await.is_err() {
            break;
        }
    }
    tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .ok()?
        .unwrap()
}

/// A second client on the same worker, fetching while the flood runs.
async fn fetches_during(addr: std::net::SocketAddr, n: usize) -> usize {
    let mut c = client(addr).await;
    let mut ok = 0;
    for _ in 0..n {
        let (status, _, body) = fetch(&mut c, get("/hello"), None).await.unwrap();
        assert_eq!((status.as_u16(), &body[..]), (200, &b"hello"[..]));
        ok += 1;
    }
    ok
}

#[tokio::test]
async fn window_update_of_one_byte_flood_gets_enhance_your_calm() {
    let srv = start(app(), ServerConfig::default(), Http2Config::default());
    let mut tcp = raw_connect(srv.addr).await;
    // A zero window for the stream, so each 1-byte update makes the server send 1 byte.
    tcp.write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .await
        .unwrap();
    tcp.write_all(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &get_block("/big"),
    ))
    .await
    .unwrap();
    let mut batch = Vec::new();
    for _ in 0..500 {
        batch.extend(frame(WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()));
        batch.extend(frame(WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes()));
    }
    let other = tokio::spawn(fetches_during(srv.addr, 20));
    let code = flood_until_goaway(tcp, batch).await;
    assert_eq!(code, Some(ENHANCE_YOUR_CALM));
    assert_eq!(other.await.unwrap(), 20);
    let closed = tokio::task::spawn_blocking(move || {
        let c = srv.next_closed();
        (c, srv)
    })
    .await
    .unwrap();
    assert_eq!(closed.0, Closed::ControlFlood);
    // The worker still serves.
    assert_eq!(fetches_during(closed.1.addr, 3).await, 3);
}

#[tokio::test]
async fn ping_flood_from_a_reading_client_gets_enhance_your_calm() {
    let srv = start(app(), ServerConfig::default(), Http2Config::default());
    let tcp = raw_connect(srv.addr).await;
    let mut batch = Vec::new();
    for i in 0..1000u64 {
        batch.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    let code = flood_until_goaway(tcp, batch).await;
    assert_eq!(code, Some(ENHANCE_YOUR_CALM));
}

/// A real client downloading 8 MiB with a small window acknowledges it in many
/// WINDOW_UPDATEs; the data sent earns them, so it is never taken for a flood.
#[tokio::test]
async fn a_download_acknowledged_frame_by_frame_is_not_a_flood() {
    let h2 = Http2Config {
        max_control_frames: 10,
        ..Http2Config::default()
    };
    let srv = start(app(), ServerConfig::default(), h2);
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(16 * 1024)
        .initial_connection_window_size(32 * 1024)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut send = send;
    for _ in 0..2 {
        let (status, _, body) = fetch(&mut send, get("/big"), None).await.unwrap();
        assert_eq!((status.as_u16(), body.len()), (200, 8 * 1024 * 1024));
    }
}
