//! Responses HTTP/2 cannot carry, over a real HTTP/2 connection (the h2 crate's client): a
//! handler's 101 on a request that is not an extended CONNECT (HTTP/2 has no 101, RFC 9113
//! §8.6), another 1xx as the final status, a field name or value HTTP/2 cannot encode. Each is
//! answered 500, the connection keeps serving, and the log line names the cause (checked by
//! capturing a real `tracing` subscriber's output; its own test binary, as the subscriber is
//! process-wide).
#![cfg(feature = "http2")]

mod common;
mod h2_support;
mod log_capture;

use h2_support::{client, fetch, get, start};
use log_capture::Capture;
use peregrine_server::h2::Http2Config;
use peregrine_server::upgrade::Upgraded;
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig};

fn service() -> impl peregrine_server::Service {
    service_fn(|req: Request| async move {
        match req.path() {
            // What a WebSocket handler answers to an HTTP/1.1 handshake.
            "/switch" => Response::new(101)
                .with_header("Upgrade", b"websocket".as_slice())
                .with_body(ResponseBody::Upgrade(Box::new(|_io: Upgraded| {
                    Box::pin(async {})
                }))),
            "/bare101" => Response::new(101),
            "/early-hints" => Response::new(103).with_header("Link", b"</a.css>".as_slice()),
            "/bad-name" => Response::text("x").with_header("Bad Name", b"v".as_slice()),
            "/bad-value" => Response::text("x").with_header("X-Bad", b"a\r\nb".as_slice()),
            _ => Response::text("ok"),
        }
    })
}

#[tokio::test]
async fn responses_http2_cannot_carry_are_answered_500_and_logged_with_their_cause() {
    let capture = Capture::install();
    let srv = start(service(), ServerConfig::default(), Http2Config::default());
    let mut c = client(srv.addr).await;
    for path in [
        "/switch",
        "/bare101",
        "/early-hints",
        "/bad-name",
        "/bad-value",
    ] {
        let (status, _, body) = fetch(&mut c, get(path), None).await.unwrap();
        assert_eq!(status, 500, "{path}");
        assert!(body.is_empty(), "{path}: no body, no internals");
    }
    // The same connection still serves.
    let (status, _, body) = fetch(&mut c, get("/"), None).await.unwrap();
    assert_eq!((status.as_u16(), &body[..]), (200, &b"ok"[..]));
    srv.shutdown().await;

    let switch = capture.line_with("status=101");
    assert!(switch.contains("ERROR"), "{switch}");
    assert!(
        switch.contains("101 Switching Protocols")
            && switch.contains("RFC 9113")
            && switch.contains("extended CONNECT"),
        "the cause and the way that works over HTTP/2: {switch}"
    );
    let hints = capture.line_with("status=103");
    assert!(
        hints.contains("1xx") && hints.contains("final") && hints.contains("HTTP/2"),
        "{hints}"
    );
    let name = capture.line_with("Bad Name");
    assert!(name.contains("field name"), "{name}");
    let value = capture.line_with("X-Bad");
    assert!(value.contains("field value"), "{value}");
    let out = capture.text();
    assert!(
        !out.contains("invalid response header field"),
        "no line blames a field that is not the cause: {out}"
    );
}
