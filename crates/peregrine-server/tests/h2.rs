//! HTTP/2 over loopback: the h2 crate's client for normal traffic, raw frames for the limits
//! and floods. Each flood test ends with the documented error and another client served.
#![cfg(feature = "http2")]

mod common;
mod h2_support;

use bytes::Bytes;
use h2_support::*;
use peregrine_server::h2::{detect_preface, Closed, Http2Config, PREFACE};
use peregrine_server::ServerConfig;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn server() -> (TestServer, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    (
        start(
            app(counters.clone()),
            ServerConfig::default(),
            Http2Config::default(),
        ),
        counters,
    )
}

/// A fresh client gets `/hello` answered: the server still serves others.
async fn still_serving(srv: &TestServer) {
    let mut c = client(srv.addr).await;
    let (status, _, body) = fetch(&mut c, get("/hello"), None).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, "hello Http2 GET localhost");
}

#[test]
fn preface_detection() {
    assert_eq!(detect_preface(PREFACE), Some(true));
    assert_eq!(detect_preface(&PREFACE[..10]), None);
    assert_eq!(detect_preface(b""), None);
    assert_eq!(detect_preface(b"GET / HTTP/1.1\r\n"), Some(false));
    assert_eq!(detect_preface(b"PRI * HTTP/1.1\r\n"), Some(false));
    let mut more = PREFACE.to_vec();
    more.extend_from_slice(&frame(SETTINGS, 0, 0, &[]));
    assert_eq!(detect_preface(&more), Some(true));
}

#[tokio::test]
async fn requests_reach_the_same_service_and_see_http2() {
    let (srv, _) = server();
    let mut c = client(srv.addr).await;
    let (status, headers, body) = fetch(&mut c, get("/hello"), None).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, "hello Http2 GET localhost");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["content-length"], "25");
    assert_eq!(headers["server"], "peregrine");
    assert!(headers.contains_key("date"));

    // Fields, split cookies joined (RFC 9113 §8.2.3), query; connection-specific response
    // fields dropped.
    let req = http::Request::get("http://localhost/headers?a=1&b=2")
        .header("x-test", "value")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .body(())
        .unwrap();
    let (status, headers, body) = fetch(&mut c, req, None).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, "value|a=1; b=2|a=1&b=2");
    assert_eq!(headers["x-reply"], "yes");
    assert!(!headers.contains_key("connection"));

    let (status, _, _) = fetch(&mut c, get("/nope"), None).await.unwrap();
    assert_eq!(status, 404);
    srv.shutdown().await;
}

/// An RFC 8441 extended CONNECT reaches the service with its split cookie fields joined, as any
/// other request (RFC 9113 §8.2.3).
#[tokio::test]
async fn extended_connect_joins_split_cookies() {
    let (srv, _) = server();
    let mut c = client(srv.addr).await.ready().await.unwrap();
    // The server's SETTINGS (extended CONNECT enabled) are applied shortly after the handshake.
    for _ in 0..100 {
        if c.is_extended_connect_protocol_enabled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        c = c.ready().await.unwrap();
    }
    assert!(c.is_extended_connect_protocol_enabled());
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri("http://localhost/tunnel-headers")
        .header("cookie", "a=1")
        .header("x-between", "1")
        .header("cookie", "b=2")
        .header("cookie", "c=3")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, _send) = c.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut recv = resp.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = recv.data().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(String::from_utf8(got).unwrap(), "a=1; b=2; c=3|websocket");
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn bodies_both_ways_respect_flow_control() {
    let config = ServerConfig::builder()
        .max_body_size(8 * 1024 * 1024)
        .build();
    let srv = start(
        app(Arc::new(Counters::default())),
        config,
        Http2Config::default(),
    );
    let mut c = client(srv.addr).await;
    // 3 MiB: many times the 256 KiB stream window and the 64 KiB client window.
    let big: Bytes = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let req = http::Request::post("http://localhost/echo")
        .body(())
        .unwrap();
    let (status, headers, body) = fetch(&mut c, req, Some(big.clone())).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(headers["content-length"], big.len().to_string());
    assert_eq!(body, big);

    let (status, headers, body) = fetch(&mut c, get("/stream"), None).await.unwrap();
    assert_eq!(status, 200);
    assert!(!headers.contains_key("content-length"));
    assert_eq!(body, "one two three");

    let head = http::Request::head("http://localhost/hello")
        .body(())
        .unwrap();
    let (status, headers, body) = fetch(&mut c, head, None).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(headers["content-length"], "26");
    assert!(body.is_empty());
    srv.shutdown().await;
}

#[tokio::test]
async fn declared_body_over_the_limit_is_answered_413_before_any_data_is_read() {
    let counters = Arc::new(Counters::default());
    let config = ServerConfig::builder().max_body_size(1000).build();
    let srv = start(app(counters), config, Http2Config::default());
    let mut c = client(srv.addr).await;
    let req = http::Request::post("http://localhost/echo")
        .header("content-length", "5000")
        .body(())
        .unwrap();
    let (status, _, _) = fetch(&mut c, req, Some(Bytes::from(vec![b'x'; 5000])))
        .await
        .unwrap();
    assert_eq!(status, 413);
    // Without a declared length, the body read fails once past the limit.
    let req = http::Request::post("http://localhost/echo")
        .body(())
        .unwrap();
    let (status, _, body) = fetch(&mut c, req, Some(Bytes::from(vec![b'x'; 5000])))
        .await
        .unwrap();
    assert_eq!(status, 413);
    assert_eq!(body, "request body too large");
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn a_panicking_handler_gets_500_and_the_connection_goes_on() {
    let (srv, _) = server();
    let mut c = client(srv.addr).await;
    let (status, _, _) = fetch(&mut c, get("/panic"), None).await.unwrap();
    assert_eq!(status, 500);
    let (status, _, _) = fetch(&mut c, get("/hello"), None).await.unwrap();
    assert_eq!(status, 200);
    srv.shutdown().await;
}

#[tokio::test]
async fn too_many_concurrent_streams_are_refused() {
    let (srv, _) = server();
    let mut tcp = raw_connect(srv.addr).await;
    // 129 slow streams: the 129th is over SETTINGS_MAX_CONCURRENT_STREAMS (128).
    let mut out = Vec::new();
    for i in 0..129u32 {
        out.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            2 * i + 1,
            &get_block("/slow"),
        ));
    }
    tcp.write_all(&out).await.unwrap();
    let f = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let f = read_frame(&mut tcp).await.expect("a frame");
            if f.kind == RST_STREAM || f.kind == GOAWAY {
                return f;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(f.kind, RST_STREAM);
    assert_eq!(f.stream, 257);
    assert_eq!(f.payload, 0x7u32.to_be_bytes()); // REFUSED_STREAM
    still_serving(&srv).await;
    drop(tcp);
    srv.shutdown().await;
}

#[tokio::test]
async fn oversize_header_list_is_answered_431() {
    let (srv, _) = server();
    let mut c = client(srv.addr).await;
    let req = http::Request::get("http://localhost/hello")
        .header("x-big", "a".repeat(20 * 1024))
        .body(())
        .unwrap();
    let (status, _, _) = fetch(&mut c, req, None).await.unwrap();
    assert_eq!(status, 431);
    // The same connection goes on.
    let (status, _, _) = fetch(&mut c, get("/hello"), None).await.unwrap();
    assert_eq!(status, 200);
    srv.shutdown().await;
}

#[tokio::test]
async fn continuation_flood_gets_goaway_enhance_your_calm() {
    let (srv, _) = server();
    let mut tcp = raw_connect(srv.addr).await;
    // A HEADERS frame that never ends, then CONTINUATION frames of small literal fields.
    tcp.write_all(&frame(HEADERS, END_STREAM, 1, &get_block("/hello")))
        .await
        .unwrap();
    let field = [0x00, 0x01, b'x', 0x01, b'y']; // literal without indexing, new name "x: y"
    let mut out = Vec::new();
    for _ in 0..1000 {
        out.extend(frame(CONTINUATION, 0, 1, &field));
    }
    let _ = tcp.write_all(&out).await; // the server may close before reading it all
    let mut resets = Vec::new();
    assert_eq!(until_goaway(&mut tcp, &mut resets).await, Some(0xb)); // ENHANCE_YOUR_CALM
    assert_eq!(
        srv.next_closed(),
        Closed::Error(Some(h2::Reason::ENHANCE_YOUR_CALM))
    );
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn rapid_reset_of_started_requests_gets_goaway_enhance_your_calm_and_cancels_handlers() {
    let (srv, counters) = server();
    let mut tcp = raw_connect(srv.addr).await;
    // Rounds of 100 requests whose handlers start (and would run 30 s), then are all reset:
    // past 200 resets within 10 s the connection is closed.
    let mut next_id = 1u32;
    for _round in 0..3 {
        let ids: Vec<u32> = (0..100).map(|i| next_id + 2 * i).collect();
        next_id += 200;
        let mut out = Vec::new();
        for &id in &ids {
            out.extend(frame(
                HEADERS,
                END_STREAM | END_HEADERS,
                id,
                &get_block("/slow"),
            ));
        }
        if tcp.write_all(&out).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut out = Vec::new();
        for &id in &ids {
            out.extend(frame(RST_STREAM, 0, id, &0x8u32.to_be_bytes())); // CANCEL
        }
        if tcp.write_all(&out).await.is_err() {
            break;
        }
    }
    let mut resets = Vec::new();
    assert_eq!(until_goaway(&mut tcp, &mut resets).await, Some(0xb)); // ENHANCE_YOUR_CALM
    assert_eq!(srv.next_closed(), Closed::RapidReset);
    // The handlers were dropped (cancelled), not left running for 30 s.
    assert!(counters.cancelled.load(Ordering::SeqCst) >= 200);
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn rapid_reset_before_accept_gets_goaway_enhance_your_calm() {
    let (srv, _) = server();
    let mut tcp = raw_connect(srv.addr).await;
    // HEADERS and RST_STREAM(CANCEL) together, stream after stream: the resets reach h2 before
    // the streams are accepted, and h2's pending-accept reset limit (20) closes the connection.
    let mut out = Vec::new();
    for i in 0..1000u32 {
        let id = 2 * i + 1;
        out.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            id,
            &get_block("/slow"),
        ));
        out.extend(frame(RST_STREAM, 0, id, &0x8u32.to_be_bytes()));
    }
    let _ = tcp.write_all(&out).await;
    let mut resets = Vec::new();
    assert_eq!(until_goaway(&mut tcp, &mut resets).await, Some(0xb));
    let closed = srv.next_closed();
    // Depending on how the bytes were split into reads, some streams may have been accepted
    // first; then our own counter may fire instead. Either way: ENHANCE_YOUR_CALM.
    assert!(
        closed == Closed::Error(Some(h2::Reason::ENHANCE_YOUR_CALM))
            || closed == Closed::RapidReset,
        "{closed:?}"
    );
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn ping_and_settings_floods_from_a_client_that_never_reads_stall_only_that_client() {
    let (srv, _) = server();
    let mut tcp = raw_connect(srv.addr).await;
    let mut out = Vec::new();
    for i in 0..20_000u64 {
        out.extend(frame(PING, 0, 0, &i.to_be_bytes()));
        out.extend(frame(SETTINGS, 0, 0, &[0x0, 0x3, 0, 0, 0, 100]));
    }
    // Written from a task, never read: the server stops reading once its PONG/ACK cannot be
    // written, so the write stalls rather than a queue growing in the server.
    let writer = tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(3), tcp.write_all(&out)).await;
        tcp
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    still_serving(&srv).await;
    drop(writer.await.unwrap());
    srv.shutdown().await;
}

/// Within its control-frame budget (raised here above the 10 000 frames sent; the default's
/// GOAWAY is tested in `h2_control_flood.rs`), a client that reads gets every PONG and ACK, at
/// the cost of its own traffic (like requests), while others are served meanwhile.
#[tokio::test]
async fn ping_and_settings_floods_from_a_client_that_reads_are_answered_and_others_served() {
    let h2 = Http2Config {
        max_control_frames: 20_000,
        ..Http2Config::default()
    };
    let srv = start(app(Arc::default()), ServerConfig::default(), h2);
    let tcp = raw_connect(srv.addr).await;
    let (mut rd, mut wr) = tcp.into_split();
    const N: u64 = 5_000;
    let writer = tokio::spawn(async move {
        let mut out = Vec::new();
        for i in 0..N {
            out.extend(frame(PING, 0, 0, &i.to_be_bytes()));
            out.extend(frame(SETTINGS, 0, 0, &[0x0, 0x3, 0, 0, 0, 100]));
        }
        wr.write_all(&out).await.unwrap();
        wr
    });
    let reader = tokio::spawn(async move {
        let (mut pongs, mut acks, mut next_ping) = (0u64, 0u64, 0u64);
        while pongs < N || acks < N {
            let f = read_frame(&mut rd)
                .await
                .expect("the connection stays open");
            match (f.kind, f.flags & ACK) {
                (PING, ACK) => {
                    // PONGs come back in order, with the PING's payload.
                    assert_eq!(f.payload, next_ping.to_be_bytes());
                    next_ping += 1;
                    pongs += 1;
                }
                (SETTINGS, ACK) => acks += 1,
                _ => {}
            }
        }
        (pongs, acks)
    });
    still_serving(&srv).await;
    let (pongs, acks) = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .expect("every PONG and ACK within 30 s")
        .unwrap();
    // The initial SETTINGS is acknowledged too.
    assert_eq!(pongs, N);
    assert!(acks >= N);
    drop(writer.await.unwrap());
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_sends_goaway_and_lets_open_streams_finish() {
    let counters = Arc::new(Counters::default());
    let service = peregrine_server::service_fn(|_req: peregrine_server::Request| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        peregrine_server::Response::text("finished")
    });
    let _ = counters;
    let srv = start(service, ServerConfig::default(), Http2Config::default());
    let mut c = client(srv.addr).await;
    let mut c2 = c.clone();
    let inflight = tokio::spawn(async move { fetch(&mut c2, get("/slow"), None).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(srv.shutdown());
    let (status, _, body) = inflight.await.unwrap().unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, "finished");
    stopping.await.unwrap();
    // After the GOAWAY, the connection accepts no new stream.
    assert!(fetch(&mut c, get("/hello"), None).await.is_err());
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let config = ServerConfig::builder()
        .idle_timeout(Duration::from_millis(200))
        .build();
    let srv = start(
        app(Arc::new(Counters::default())),
        config,
        Http2Config::default(),
    );
    let mut tcp = raw_connect(srv.addr).await;
    let mut resets = Vec::new();
    assert_eq!(until_goaway(&mut tcp, &mut resets).await, Some(0)); // NO_ERROR
    assert_eq!(srv.next_closed(), Closed::Normally);
    srv.shutdown().await;
}

#[tokio::test]
async fn a_client_that_sends_no_preface_is_dropped_after_the_header_timeout() {
    let config = ServerConfig::builder()
        .header_timeout(Duration::from_millis(200))
        .build();
    let srv = start(
        app(Arc::new(Counters::default())),
        config,
        Http2Config::default(),
    );
    let _tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    assert_eq!(srv.next_closed(), Closed::Handshake);
    still_serving(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn a_connection_without_the_preface_gets_goaway_protocol_error_and_a_clean_close() {
    let (srv, _) = server();
    let mut tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut resets = Vec::new();
    assert_eq!(until_goaway(&mut tcp, &mut resets).await, Some(0x1)); // PROTOCOL_ERROR
                                                                      // Then end of stream (a FIN, not a reset).
    let mut rest = Vec::new();
    use tokio::io::AsyncReadExt;
    assert_eq!(tcp.read_to_end(&mut rest).await.unwrap(), 0);
    assert_eq!(srv.next_closed(), Closed::Handshake);
    still_serving(&srv).await;
    srv.shutdown().await;
}

/// The engine hands over a cleartext connection after reading some of its bytes (sniffing the
/// preface): those bytes are given back to HTTP/2 and the connection works as if unread.
#[tokio::test]
async fn bytes_already_read_by_the_engine_are_replayed() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let local = tokio::task::LocalSet::new();
    let server = local.spawn_local(async move {
        let (mut tcp, peer) = listener.accept().await.unwrap();
        // Read the first 30 bytes (the preface and part of the client's SETTINGS frame).
        let mut first = vec![0u8; 30];
        tcp.read_exact(&mut first).await.unwrap();
        let counters = Arc::new(Counters::default());
        peregrine_server::h2::serve_connection(
            tcp,
            Bytes::from(first),
            peer,
            app(counters),
            &ServerConfig::default(),
            &Http2Config::default(),
            std::future::pending(),
        )
        .await
    });
    local
        .run_until(async move {
            let mut c = client(addr).await;
            let (status, _, body) = fetch(&mut c, get("/hello"), None).await.unwrap();
            assert_eq!(status, 200);
            assert_eq!(body, "hello Http2 GET localhost");
            drop(c);
            assert_eq!(server.await.unwrap(), Closed::Normally);
        })
        .await;
}

/// Counts the server's writes to its connection (every `poll_write` that wrote something).
struct CountingIo(tokio::net::TcpStream, Arc<std::sync::atomic::AtomicUsize>);

impl tokio::io::AsyncRead for CountingIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for CountingIo {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        // Counted before the bytes reach the socket (and taken back if none did): counted
        // after, the client could read the responses before the server thread added the write.
        self.1.fetch_add(1, Ordering::SeqCst);
        let r = std::pin::Pin::new(&mut self.0).poll_write(cx, buf);
        if !matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.1.fetch_sub(1, Ordering::SeqCst);
        }
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
    // Not vectored: every frame batch goes through `poll_write`, where it is counted.
}

/// Requests that arrive together are all accepted before any runs, so their responses leave
/// in one write (over TLS: one record and one `writev`), not one write per response: the
/// difference with actix-web's CPU per request under `h2load -m 10` (docs/performance.md).
#[tokio::test]
async fn responses_to_requests_that_arrive_together_leave_in_one_write() {
    let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = writes.clone();
    let srv = start_with(
        app(Arc::new(Counters::default())),
        ServerConfig::default(),
        Http2Config::default(),
        move |tcp| {
            let counted = counted.clone();
            async move { Some(CountingIo(tcp, counted)) }
        },
    );
    let mut tcp = raw_connect(srv.addr).await;
    // A PING answered means the server has written everything of the handshake.
    tcp.write_all(&frame(PING, 0, 0, &[7; 8])).await.unwrap();
    while read_frame(&mut tcp).await.expect("PING ACK").kind != PING {}
    let before = writes.load(Ordering::SeqCst);

    const N: u32 = 10;
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1 + 2 * i,
            &get_block("/hello"),
        ));
    }
    tcp.write_all(&batch).await.unwrap();
    let mut ended = 0;
    while ended < N {
        let f = read_frame(&mut tcp).await.expect("a response frame");
        if (f.kind == DATA || f.kind == HEADERS) && f.flags & END_STREAM != 0 {
            ended += 1;
        }
    }
    let used = writes.load(Ordering::SeqCst) - before;
    // One write when the ten HEADERS are read at once (one segment on loopback); two if the
    // server's read happened to split them.
    assert!(
        (1..=2).contains(&used),
        "{N} responses took {used} writes (one per response is the regression)"
    );
    drop(tcp);
    srv.shutdown().await;
}
