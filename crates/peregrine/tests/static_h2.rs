//! Static files above the in-memory limit over HTTP/2 (h2c, prior knowledge, the `h2` crate's
//! client): the file body and the streamed `multipart/byteranges` body arrive whole, with
//! `content-length`, in DATA frames.
#![cfg(feature = "http2")]

mod common;
use bytes::Bytes;
use common::TestServer;
use peregrine::fs::ServeDir;
use peregrine::App;
use tokio::net::TcpStream;

/// 2 MiB: above the in-memory limit, and above the h2 stream window (64 KiB), so the body
/// waits for WINDOW_UPDATEs.
const LEN: usize = 2 * 1024 * 1024;

fn data() -> Vec<u8> {
    (0..LEN as u32)
        .map(|i| (i.wrapping_mul(7) % 251) as u8)
        .collect()
}

async fn get(
    send: &mut h2::client::SendRequest<Bytes>,
    path: &str,
    range: Option<&str>,
) -> (http::response::Parts, Vec<u8>) {
    let mut req = http::Request::get(format!("http://t{path}"));
    if let Some(r) = range {
        req = req.header("range", r);
    }
    let (resp, _) = send.send_request(req.body(()).unwrap(), true).unwrap();
    let (parts, mut body) = resp.await.unwrap().into_parts();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (parts, out)
}

#[tokio::test]
async fn large_files_and_streamed_ranges_over_http2() {
    let dir = tempfile::tempdir().unwrap();
    let full = data();
    std::fs::write(dir.path().join("big.bin"), &full).unwrap();
    let s = TestServer::start(App::new().merge(ServeDir::new(dir.path()).router("/static")));
    let (send, conn) = h2::client::handshake(TcpStream::connect(s.addr).await.unwrap())
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.unwrap();

    let (head, body) = get(&mut send, "/static/big.bin", None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-length"], LEN.to_string().as_str());
    assert!(body == full, "the body is the file");

    let (head, body) = get(&mut send, "/static/big.bin", Some("bytes=1000-1500999")).await;
    assert_eq!(head.status, 206);
    assert_eq!(
        head.headers["content-range"],
        format!("bytes 1000-1500999/{LEN}").as_str()
    );
    assert!(body[..] == full[1000..1_501_000]);

    // Two ranges of 1 MiB: a multipart body streamed 64 KiB at a time.
    let (head, body) = get(
        &mut send,
        "/static/big.bin",
        Some("bytes=0-1048575, 1048577-"),
    )
    .await;
    assert_eq!(head.status, 206);
    assert_eq!(
        head.headers["content-length"],
        body.len().to_string().as_str()
    );
    let ctype = head.headers["content-type"].to_str().unwrap();
    let boundary = ctype
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap();
    let first = format!(
        "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
         Content-Range: bytes 0-1048575/{LEN}\r\n\r\n"
    );
    let second = format!(
        "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
         Content-Range: bytes 1048577-{}/{LEN}\r\n\r\n",
        LEN - 1
    );
    let mut want = first.into_bytes();
    want.extend_from_slice(&full[..1_048_576]);
    want.extend_from_slice(second.as_bytes());
    want.extend_from_slice(&full[1_048_577..]);
    want.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert!(body == want, "the multipart body, byte for byte");
}
