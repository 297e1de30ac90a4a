//! `ResponseBody::File` and `ResponseBody::SizedStream` over HTTP/2 (h2c and TLS, the h2
//! crate's client): GET gets every byte with the right `Content-Length`, HEAD the length and
//! no body, and a body shorter or longer than announced resets its stream.
#![cfg(all(feature = "tls", feature = "http2"))]

mod common;
mod h2_limits_support;
mod tls_support;

use bytes::Bytes;
use common::Iter;
use h2_limits_support::{config, connect, fetch, pattern, serve, TempFile, Via};
use peregrine_server::h2::Http2Config;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Service};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The file's length: several 64 KiB pieces and a partial one.
const FILE_LEN: usize = 300_000;

fn chunks(parts: &[&'static str]) -> peregrine_server::response::BodyStream {
    let items: Vec<Result<Bytes, std::io::Error>> = parts
        .iter()
        .map(|p| Ok(Bytes::from_static(p.as_bytes())))
        .collect();
    Box::pin(Iter(items.into_iter()))
}

fn app(file: Arc<PathBuf>) -> impl Service {
    service_fn(move |req: Request| {
        let file = file.clone();
        async move {
            let open = || std::fs::File::open(&*file).unwrap();
            let body = match req.path() {
                // A range from the middle: the offset is honoured.
                "/range" => ResponseBody::File {
                    file: open(),
                    offset: 1000,
                    len: 200_000,
                },
                "/file" => ResponseBody::File {
                    file: open(),
                    offset: 0,
                    len: FILE_LEN as u64,
                },
                "/file-short" => ResponseBody::File {
                    file: open(),
                    offset: 0,
                    len: FILE_LEN as u64 + 10,
                },
                "/sized" => ResponseBody::SizedStream {
                    len: 11,
                    stream: chunks(&["hello", " ", "world"]),
                },
                "/sized-short" => ResponseBody::SizedStream {
                    len: 20,
                    stream: chunks(&["hello", " ", "world"]),
                },
                "/sized-long" => ResponseBody::SizedStream {
                    len: 5,
                    stream: chunks(&["hel", "lo world"]),
                },
                _ => return Response::new(404),
            };
            Response::new(200).with_body(body)
        }
    })
}

fn content_length(h: &http::HeaderMap) -> Option<u64> {
    h.get("content-length")?.to_str().ok()?.parse().ok()
}

async fn bodies_arrive_whole(via: Via) {
    let file = TempFile::new("h2files", FILE_LEN);
    let cfg = config(
        Duration::from_secs(5),
        Duration::from_secs(5),
        Http2Config::default(),
    );
    let srv = serve(via, cfg, app(Arc::new(file.path.clone())));
    let (send, _conn) = connect(&srv, &h2::client::Builder::new()).await;
    let whole = pattern(FILE_LEN);
    let expect: [(&str, &[u8]); 3] = [
        ("/file", &whole),
        ("/range", &whole[1000..201_000]),
        ("/sized", b"hello world"),
    ];
    for (path, want) in expect {
        let (status, headers, body, _) = fetch(&send, "GET", path).await.unwrap();
        assert_eq!(status, 200, "{via:?} {path}");
        assert_eq!(
            content_length(&headers),
            Some(want.len() as u64),
            "{via:?} {path}"
        );
        assert_eq!(body.len(), want.len(), "{via:?} {path}");
        assert!(body == want, "{via:?} {path}: bytes differ");
        let (status, headers, body, ended) = fetch(&send, "HEAD", path).await.unwrap();
        assert_eq!(status, 200, "{via:?} HEAD {path}");
        assert_eq!(
            content_length(&headers),
            Some(want.len() as u64),
            "{via:?} HEAD {path}"
        );
        assert!(body.is_empty() && ended, "{via:?} HEAD {path}: a body");
    }
    // Fewer or more bytes than announced: the stream is reset, the connection serves on.
    for path in ["/file-short", "/sized-short", "/sized-long"] {
        let err = fetch(&send, "GET", path).await.unwrap_err();
        assert_eq!(
            err.reason(),
            Some(h2::Reason::INTERNAL_ERROR),
            "{via:?} {path}"
        );
    }
    let (status, _, body, _) = fetch(&send, "GET", "/sized").await.unwrap();
    assert_eq!((status, &body[..]), (200, &b"hello world"[..]));
    srv.stop().await;
}

#[tokio::test]
async fn file_and_sized_stream_bodies_arrive_whole_h2c() {
    bodies_arrive_whole(Via::H2c).await;
}

#[tokio::test]
async fn file_and_sized_stream_bodies_arrive_whole_tls() {
    bodies_arrive_whole(Via::Tls).await;
}
