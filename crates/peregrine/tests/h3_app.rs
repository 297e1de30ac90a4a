//! The framework over HTTP/3 (feature `http3`): `App::serve` with TLS in the configuration
//! serves the same routes, extractors and middleware over QUIC, with the h3 crate's client.

#[path = "../../peregrine-server/tests/h3_support/mod.rs"]
mod h3_support;
#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

use peregrine::config::Config;
use peregrine::middleware::RequestIdLayer;
use peregrine::server::h3::Http3Config;
use peregrine::tls::{CertificateFiles, TlsConfig};
use peregrine::{get, post, App, Error, Request};
use tls_support::Ca;

async fn hello(req: Request) -> Result<String, Error> {
    Ok(format!("{:?} {}", req.version(), req.param_str("name")?))
}

async fn length(mut req: Request) -> Result<String, Error> {
    let body = req.bytes().await?;
    Ok(body.len().to_string())
}

/// Serves `app` with a fresh certificate (its CA named `name`, returned to outlive the
/// server), one worker and these HTTP/3 settings, and connects the h3 crate's client to it.
async fn serve_h3(
    app: App,
    name: &str,
    http3: Http3Config,
) -> (peregrine::ServerHandle, h3_support::Client, Ca) {
    let ca = Ca::new(name);
    let leaf = ca.server("localhost", &["localhost"]);
    let tls = TlsConfig::new(vec![CertificateFiles::new(&leaf.cert_path, &leaf.key_path)]);
    let server = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .http3(http3)
        .build();
    let handle = app.serve(Config::new(server).with_tls(tls)).unwrap();
    let client = h3_support::connect(handle.local_addr(), &ca).await;
    (handle, client, ca)
}

#[tokio::test]
async fn routes_extractors_and_middleware_serve_http3() {
    let app = App::new()
        .route("/hello/{name}", get(hello))
        .route("/len", post(length))
        .layer(RequestIdLayer::new());
    let (handle, mut client, _ca) = serve_h3(app, "h3app", Http3Config::default()).await;
    let reply = client
        .request("GET", "/hello/kestrel", &[], b"")
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"Http3 kestrel");
    // The middleware ran: its id is on the response.
    assert!(reply.headers.contains_key("x-request-id"));
    let reply = client
        .request("POST", "/len", &[], &vec![7u8; 300_000])
        .await
        .unwrap();
    assert_eq!((reply.status, reply.body.as_slice()), (200, &b"300000"[..]));
    // The router's answers too: an unknown path, a known one with another method.
    let reply = client.request("GET", "/nowhere", &[], b"").await.unwrap();
    assert_eq!(reply.status, 404);
    let reply = client.request("DELETE", "/len", &[], b"").await.unwrap();
    assert_eq!(reply.status, 405);
    handle.shutdown();
}

/// The WebSocket extractor over HTTP/3 (feature `ws` too).
#[cfg(feature = "ws")]
mod websocket {
    use super::*;
    use peregrine::server::h3::Http3Config;
    use peregrine::ws::WebSocketUpgrade;
    use peregrine::Response;

    /// A WebSocket route; no tunnel opens in these tests (see below), so its socket goes unused.
    async fn ws(req: Request) -> Result<Response, Error> {
        let up = WebSocketUpgrade::from_request(&req)?;
        Ok(up.on_upgrade(|_ws| async {}))
    }

    /// The WebSocket extractor over HTTP/3: the handshake is an extended CONNECT there (RFC 9220),
    /// which reaches a WebSocket route as over HTTP/2. h3 0.0.8 parses no `:protocol websocket`,
    /// so the client's CONNECT names another protocol and the route answers as it does over HTTP/2
    /// to one (426); a request that carries `Upgrade` itself is malformed in HTTP/3 and never
    /// reaches the route.
    #[tokio::test]
    async fn a_websocket_route_answers_http3_as_it_answers_http2() {
        let http3 = Http3Config {
            extended_connect: true,
            ..Http3Config::default()
        };
        let app = App::new().route("/ws", get(ws));
        let (handle, mut client, _ca) = super::serve_h3(app, "wsh3", http3).await;
        // An extended CONNECT for a protocol that is not WebSocket: the handler's 426, as over
        // HTTP/2 (tests/ws_h2.rs), not a refusal of HTTP/3 itself.
        let mut req = http::Request::builder()
            .method(http::Method::CONNECT)
            .uri("https://localhost/ws")
            .header("sec-websocket-version", "13")
            .body(())
            .unwrap();
        req.extensions_mut().insert(h3::ext::Protocol::CONNECT_UDP);
        let mut stream = client.send.send_request(req).await.unwrap();
        let response = stream.recv_response().await.unwrap();
        assert_eq!(response.status(), 426);
        // A plain GET of the route: 426, nothing opened.
        let reply = client.request("GET", "/ws", &[], b"").await.unwrap();
        assert_eq!(reply.status, 426);
        // `Upgrade` from the client itself is malformed over HTTP/3: 400 from the engine.
        let forged = [("upgrade", "websocket"), ("sec-websocket-version", "13")];
        let reply = client.request("GET", "/ws", &forged, b"").await.unwrap();
        assert_eq!(reply.status, 400);
        handle.shutdown();
    }
}

/// An SSE stream over HTTP/3 arrives event by event: the second event is sent only after the
/// client has received the first, so a response held back until its end never completes.
#[tokio::test]
async fn sse_events_arrive_one_by_one_over_http3() {
    use bytes::Buf;
    use peregrine::sse::{Event, Sse};
    use std::sync::Arc;
    use std::time::Duration;

    // Set by the test once it has read the first event.
    let seen = Arc::new(tokio::sync::Notify::new());
    let seen_by_handler = seen.clone();
    let events = move |_req: Request| {
        let seen = seen_by_handler.clone();
        async move {
            let (tx, sse) = Sse::channel(1);
            tokio::task::spawn_local(async move {
                let _ = tx.send(Event::data("one")).await;
                seen.notified().await;
                let _ = tx.send(Event::data("two")).await;
            });
            sse.keep_alive(None)
        }
    };
    let app = App::new().route("/events", get(events));
    let (handle, client, _ca) = serve_h3(app, "h3sse", Http3Config::default()).await;
    let req = http::Request::get("https://localhost/events")
        .body(())
        .unwrap();
    let mut stream = client.send.clone().send_request(req).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    // Reads until `want` has arrived (bounded: a server that holds the event back fails here).
    let mut text = String::new();
    let mut read_until = async |want: &str| {
        while !text.contains(want) {
            let next = tokio::time::timeout(Duration::from_secs(10), stream.recv_data()).await;
            let mut data = next
                .expect("the event arrived")
                .unwrap()
                .expect("more data");
            let bytes = data.copy_to_bytes(data.remaining());
            text.push_str(std::str::from_utf8(&bytes).unwrap());
        }
    };
    read_until("data: one\n\n").await;
    seen.notify_one();
    read_until("data: two\n\n").await;
    assert_eq!(text, "data: one\n\ndata: two\n\n");
    // Then the stream ends.
    assert!(stream.recv_data().await.unwrap().is_none());
    handle.shutdown();
}

/// The framework's `StreamBody::trailers` over HTTP/3: the trailers, known once the body was
/// sent, follow the DATA; the request's own trailers reach the handler through the body.
#[tokio::test]
async fn stream_body_trailers_follow_the_body_over_http3() {
    use bytes::{Buf, Bytes};
    use peregrine::{StreamBody, Trailers};

    async fn echo(mut req: Request) -> Result<StreamBody, Error> {
        let body = req.bytes().await?;
        let sum = req
            .body_mut()
            .trailers()
            .and_then(|t| t.get("x-sum"))
            .map(<[u8]>::to_vec);
        let (tx, stream) = StreamBody::channel(1);
        tokio::task::spawn_local(async move {
            let _ = tx.send(body).await;
        });
        Ok(stream.trailers(async move {
            Trailers::new()
                .with("x-sum-seen", sum.unwrap_or_default())
                .unwrap()
        }))
    }

    let app = App::new().route("/echo", post(echo));
    let (handle, client, _ca) = serve_h3(app, "h3trailers", Http3Config::default()).await;
    let req = http::Request::post("https://localhost/echo")
        .body(())
        .unwrap();
    let mut stream = client.send.clone().send_request(req).await.unwrap();
    stream.send_data(Bytes::from_static(b"abc")).await.unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", "7".parse().unwrap());
    stream.send_trailers(trailers).await.unwrap();
    stream.finish().await.unwrap();
    assert_eq!(stream.recv_response().await.unwrap().status(), 200);
    let mut body = Vec::new();
    while let Some(mut data) = stream.recv_data().await.unwrap() {
        body.extend_from_slice(&data.copy_to_bytes(data.remaining()));
    }
    assert_eq!(body, b"abc");
    let trailers = stream.recv_trailers().await.unwrap().expect("trailers");
    assert_eq!(trailers["x-sum-seen"], "7");
    handle.shutdown();
}
