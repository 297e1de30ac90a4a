//! Responses HTTP/3 cannot carry, over a real HTTP/3 connection (the h3 crate's client over
//! quinn): a 101, another 1xx as the final status, a status outside 100-999. Each is answered
//! 500, the connection keeps serving, and the log line names HTTP/3 and its RFC, not HTTP/2
//! (whose response rules HTTP/3 shares). A binary of its own: the subscriber is process-wide.
#![cfg(feature = "http3")]

mod h3_support;
mod log_capture;
mod tls_support;

use h3_support::{connect, serve};
use log_capture::Capture;
use peregrine_server::{service_fn, Request, Response, ServerConfig};

#[tokio::test]
async fn responses_http3_cannot_carry_are_logged_as_http3() {
    let capture = Capture::install();
    let service = service_fn(|req: Request| async move {
        match req.path() {
            "/bare101" => Response::new(101),
            "/early-hints" => Response::new(103).with_header("Link", b"</a.css>".as_slice()),
            "/status" => Response::new(1000),
            _ => Response::text("ok"),
        }
    });
    let server = serve(ServerConfig::builder().workers(1).build(), service);
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    for path in ["/bare101", "/early-hints", "/status"] {
        let reply = client.request("GET", path, &[], b"").await.unwrap();
        assert_eq!(reply.status, 500, "{path}");
        assert!(reply.body.is_empty(), "{path}: no body, no internals");
    }
    let reply = client.request("GET", "/", &[], b"").await.unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"ok"[..]));
    server.handle.shutdown();

    let switch = capture.line_with("status=101");
    assert!(
        switch.contains("ERROR")
            && switch.contains("on HTTP/3")
            && switch.contains("RFC 9114")
            && switch.contains("RFC 9220"),
        "{switch}"
    );
    let hints = capture.line_with("status=103");
    assert!(
        hints.contains("HTTP/3 cannot send") && hints.contains("RFC 9114"),
        "{hints}"
    );
    let status = capture.line_with("status=1000");
    assert!(status.contains("on HTTP/3"), "{status}");
    let out = capture.text();
    assert!(
        !out.contains("HTTP/2"),
        "no line names the wrong protocol: {out}"
    );
}
