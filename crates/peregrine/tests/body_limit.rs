//! One body limit for every way of reading a body, enforced by the engine: `bytes`, `text`,
//! `json`, `form`, `multipart` and the raw stream each take a body at the limit and answer 413
//! one byte past it, over HTTP/1.1 (Content-Length and chunked) and HTTP/2 (with and without
//! `content-length`); a route's own limit replaces the application's both ways (larger and
//! smaller).

mod common;
use common::TestServer;
use peregrine::{post, App, Error, Request};

/// The application-wide limit of [`app`].
const LIMIT: usize = 1000;
/// `/stream-big` takes more than [`LIMIT`], `/stream-small` less.
const BIG: usize = 5000;
const SMALL: usize = 100;
const BOUNDARY: &str = "XX";

async fn bytes(mut req: Request) -> Result<String, Error> {
    Ok(req.bytes().await?.len().to_string())
}
async fn text(mut req: Request) -> Result<String, Error> {
    Ok(req.text().await?.len().to_string())
}
/// The body is a JSON string; its length with the quotes.
async fn json(mut req: Request) -> Result<String, Error> {
    Ok((req.json::<String>().await?.len() + 2).to_string())
}
/// The body is `a=xxx…`; its length with `a=`.
async fn form(mut req: Request) -> Result<String, Error> {
    #[derive(serde::Deserialize)]
    struct F {
        a: String,
    }
    Ok((req.form::<F>().await?.a.len() + 2).to_string())
}
/// One part; the body's length, counted from the part's size and the framing around it.
#[cfg(feature = "multipart")]
async fn multipart(mut req: Request) -> Result<String, Error> {
    let mut form = req.multipart()?;
    let mut n = 0;
    while let Some(mut part) = form.next_field().await? {
        n += part.bytes().await?.len();
    }
    Ok((n + multipart_overhead()).to_string())
}
async fn stream(mut req: Request) -> Result<String, Error> {
    let mut body = req.body_mut();
    while body.chunk().await?.is_some() {}
    Ok(body.bytes_read().to_string())
}

fn app() -> App {
    #[cfg(feature = "multipart")]
    let app = App::new().route("/multipart", post(multipart));
    #[cfg(not(feature = "multipart"))]
    let app = App::new();
    app.body_limit(LIMIT as u64)
        .route("/bytes", post(bytes))
        .route("/text", post(text))
        .route("/json", post(json))
        .route("/form", post(form))
        .route("/stream", post(stream))
        .route("/stream-big", post(stream).body_limit(BIG as u64))
        .route("/stream-small", post(stream).body_limit(SMALL as u64))
}

fn multipart_framing() -> (String, String) {
    (
        format!("--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"f\"\r\n\r\n"),
        format!("\r\n--{BOUNDARY}--\r\n"),
    )
}

fn multipart_overhead() -> usize {
    let (head, tail) = multipart_framing();
    head.len() + tail.len()
}

/// A body of exactly `n` bytes that `path`'s handler accepts, with its content type.
fn body_for(path: &str, n: usize) -> (Vec<u8>, String) {
    let fill = |k: usize| "x".repeat(k);
    match path {
        "/json" => (
            format!("\"{}\"", fill(n - 2)).into(),
            "application/json".into(),
        ),
        "/form" => (
            format!("a={}", fill(n - 2)).into(),
            "application/x-www-form-urlencoded".into(),
        ),
        "/multipart" => {
            let (head, tail) = multipart_framing();
            let data = fill(n - multipart_overhead());
            (
                format!("{head}{data}{tail}").into(),
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
        }
        _ => (fill(n).into(), "text/plain".into()),
    }
}

/// Every route and the limit it is held to.
fn cases() -> Vec<(&'static str, usize)> {
    let mut all: Vec<_> = ["/bytes", "/text", "/json", "/form", "/stream"]
        .into_iter()
        .map(|p| (p, LIMIT))
        .collect();
    if cfg!(feature = "multipart") {
        all.push(("/multipart", LIMIT));
    }
    all.extend([("/stream-big", BIG), ("/stream-small", SMALL)]);
    all
}

/// An HTTP/1.1 request for `path` with a body of `n` bytes, declared or chunked (in pieces of
/// 64 bytes).
fn http1(path: &str, n: usize, chunked: bool) -> Vec<u8> {
    let (body, ct) = body_for(path, n);
    let framing = if chunked {
        "transfer-encoding: chunked".to_string()
    } else {
        format!("content-length: {}", body.len())
    };
    let mut raw =
        format!("POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: {ct}\r\n{framing}\r\n\r\n")
            .into_bytes();
    if chunked {
        for piece in body.chunks(64) {
            raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            raw.extend_from_slice(piece);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
    } else {
        raw.extend_from_slice(&body);
    }
    raw
}

#[test]
fn every_way_of_reading_takes_the_limit_and_refuses_one_byte_more_over_http1() {
    let s = TestServer::start(app());
    for chunked in [false, true] {
        for (path, limit) in cases() {
            let at = s.send_bytes(&http1(path, limit, chunked), false);
            let what = format!("{path}, chunked: {chunked}");
            assert_eq!((at.status, at.text()), (200, &*limit.to_string()), "{what}");
            let over = s.send_bytes(&http1(path, limit + 1, chunked), false);
            assert_eq!(over.status, 413, "{what}: {}", over.text());
            assert!(
                over.text().contains("size limit"),
                "{what}: {}",
                over.text()
            );
        }
    }
}

#[test]
fn the_engines_max_body_size_is_the_default_and_a_route_overrides_it_both_ways() {
    // No application-wide limit: the engine's (200 bytes here) holds, routes replace it.
    let app = App::new()
        .route("/stream", post(stream))
        .route("/stream-big", post(stream).body_limit(BIG as u64))
        .route("/stream-small", post(stream).body_limit(SMALL as u64));
    let s = TestServer::start_with(app, |c| c.server.limits.max_body_size = 200);
    for (path, limit) in [
        ("/stream", 200),
        ("/stream-big", BIG),
        ("/stream-small", SMALL),
    ] {
        for chunked in [false, true] {
            let at = s.send_bytes(&http1(path, limit, chunked), false);
            assert_eq!((at.status, at.text()), (200, &*limit.to_string()), "{path}");
            let over = s.send_bytes(&http1(path, limit + 1, chunked), false);
            assert_eq!(over.status, 413, "{path}, chunked: {chunked}");
        }
    }
}

#[cfg(feature = "http2")]
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn every_way_of_reading_takes_the_limit_and_refuses_one_byte_more_over_http2() {
    use bytes::Bytes;
    let s = TestServer::start(app());
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.unwrap();
    for declared in [true, false] {
        for (path, limit) in cases() {
            for (n, want) in [(limit, 200), (limit + 1, 413)] {
                let (body, ct) = body_for(path, n);
                let mut req =
                    http::Request::post(format!("http://t{path}")).header("content-type", ct);
                if declared {
                    req = req.header("content-length", body.len());
                }
                let (resp, mut out) = send.send_request(req.body(()).unwrap(), false).unwrap();
                // Small bodies: within the stream's initial window.
                out.send_data(Bytes::from(body), true).unwrap();
                let (parts, mut recv) = resp.await.unwrap().into_parts();
                let mut text = Vec::new();
                while let Some(piece) = recv.data().await {
                    text.extend_from_slice(&piece.unwrap());
                }
                let what = format!("{path} with {n} bytes, declared: {declared}");
                assert_eq!(parts.status.as_u16(), want, "{what}");
                if want == 200 {
                    assert_eq!(String::from_utf8_lossy(&text), n.to_string(), "{what}");
                }
            }
        }
    }
}
