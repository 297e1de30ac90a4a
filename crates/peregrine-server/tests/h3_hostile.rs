//! HTTP/3 clients that stall, trickle or move, from the real quinn client: responses held by a
//! connection window the client never opens, a request body slower than the body timeout, and
//! a client behind a NAT that gives it a new source port mid-connection (a UDP relay in the
//! test that replaces its upstream socket; the client does not know), with one worker, with
//! two steered by connection ID, and with two spread by the kernel's address hash.
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;

use bytes::Bytes;
use h3_support::{connect, connect_over, serve, trusting, Client};
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(5);

/// `/peer`: the client's address as the server sees it; `/worker`: the worker thread's name;
/// `/big`: 8 MiB the handler makes a piece at a time; otherwise reads the whole body and answers `ok`, or the body error's status.
async fn app(mut req: Request) -> Response {
    match req.path() {
        "/peer" => return Response::text(req.peer_addr().to_string()),
        "/worker" => {
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            return Response::text(name);
        }
        "/big" => {
            let pieces = (0..128).map(|_| Ok(Bytes::from(vec![7u8; 64 * 1024])));
            let stream = Box::pin(futures_util::stream::iter(pieces));
            return Response::new(200).with_body(ResponseBody::Stream(stream));
        }
        _ => {}
    }
    loop {
        match req.body_mut().chunk().await {
            Ok(Some(_)) => {}
            Ok(None) => return Response::text("ok"),
            Err(e) => return Response::text(e.to_string()).with_status(e.status()),
        }
    }
}

fn config(workers: usize) -> ServerConfig {
    ServerConfig::builder()
        .workers(workers)
        .body_timeout(Duration::from_millis(300))
        .write_timeout(Duration::from_millis(500))
        .shutdown_timeout(Duration::from_millis(500))
        .build()
}

#[tokio::test]
async fn a_body_slower_than_the_body_timeout_is_answered_408_and_the_connection_goes_on() {
    let server = serve(config(1), service_fn(app));
    let mut client = connect(server.handle.local_addr(), &server.ca).await;
    let head = http::Request::post("https://localhost/upload")
        .header("content-length", "1000")
        .body(())
        .unwrap();
    let mut slow = client.send.send_request(head).await.unwrap();
    slow.send_data(Bytes::from_static(b"a")).await.unwrap();
    // The rest never comes: the handler's read gives up at the body timeout.
    let response = tokio::time::timeout(WAIT, slow.recv_response())
        .await
        .expect("answered before the client finished its body")
        .unwrap();
    assert_eq!(response.status(), 408);
    // The slow stream ended alone: the same connection serves the next request.
    let reply = tokio::time::timeout(WAIT, client.request("POST", "/", &[], b"whole"))
        .await
        .expect("the connection still serves")
        .unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"ok"[..]));
    server.handle.shutdown();
}

#[tokio::test]
async fn streams_held_by_a_closed_connection_window_are_reset_and_the_connection_goes_on() {
    // The client's connection window (64 KiB) is smaller than one response: the streams wait
    // for connection credit, not their own, until the write timeout resets them.
    let server = serve(config(1), service_fn(app));
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_idle_timeout(None)
        .receive_window(quinn::VarInt::from_u32(64 * 1024));
    let addr = server.handle.local_addr();
    let mut client = connect_over(addr, trusting(&server.ca), transport)
        .await
        .unwrap();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let head = http::Request::get("https://localhost/big")
            .body(())
            .unwrap();
        let mut stream = client.send.send_request(head).await.unwrap();
        stream.finish().await.unwrap();
        stalled.push(stream);
    }
    let start = std::time::Instant::now();
    while client.quic.stats().frame_rx.reset_stream < 4 {
        assert!(start.elapsed() < WAIT, "stalled streams not reset");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The client lets them go; the same connection serves the next request.
    drop(stalled);
    let reply = tokio::time::timeout(WAIT, client.request("GET", "/peer", &[], b""))
        .await
        .expect("the connection still serves")
        .unwrap();
    assert_eq!(reply.status, 200);
    server.handle.shutdown();
}

/// A UDP relay between one client and the server, as a NAT: the server sees the relay's
/// upstream socket, which [`Relay::rebind`] replaces with a new one (a new source port).
struct Relay {
    /// Where the client sends.
    front: SocketAddr,
    /// The upstream address the server sees now.
    upstream: SocketAddr,
    rebinds: mpsc::UnboundedSender<oneshot::Sender<SocketAddr>>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut up = upstream(server).await;
        let (front_addr, upstream_addr) = (front.local_addr().unwrap(), up.local_addr().unwrap());
        let (rebinds, mut asked) = mpsc::unbounded_channel::<oneshot::Sender<SocketAddr>>();
        let task = tokio::spawn(async move {
            let (mut from_client, mut from_server) = (vec![0; 65536], vec![0; 65536]);
            let mut client = None;
            loop {
                tokio::select! {
                    Ok((n, from)) = front.recv_from(&mut from_client) => {
                        client = Some(from);
                        let _ = up.send(&from_client[..n]).await;
                    }
                    Ok(n) = up.recv(&mut from_server) => {
                        if let Some(client) = client {
                            let _ = front.send_to(&from_server[..n], client).await;
                        }
                    }
                    Some(reply) = asked.recv() => {
                        // The old port is gone, as a NAT's expired mapping: what the server
                        // sends there is lost.
                        up = upstream(server).await;
                        let _ = reply.send(up.local_addr().unwrap());
                    }
                }
            }
        });
        Relay {
            front: front_addr,
            upstream: upstream_addr,
            rebinds,
            task,
        }
    }

    /// Moves the relay's traffic to a new upstream socket.
    async fn rebind(&mut self) {
        let (reply, new) = oneshot::channel();
        self.rebinds.send(reply).unwrap();
        self.upstream = new.await.unwrap();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn upstream(server: SocketAddr) -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.connect(server).await.unwrap();
    socket
}

/// The address the server sees for `client`'s next request, or the request's error.
async fn peer_seen(client: &mut Client) -> Result<String, h3::error::StreamError> {
    let reply = tokio::time::timeout(WAIT, client.request("GET", "/peer", &[], b""))
        .await
        .expect("the client is either served or reset, not left waiting")?;
    assert_eq!(reply.status, 200);
    Ok(String::from_utf8(reply.body).unwrap())
}

#[tokio::test]
async fn a_client_whose_nat_rebinds_keeps_its_connection_and_is_seen_at_its_new_address() {
    // One worker: every port the relay takes reaches the worker that holds the connection.
    let server = serve(config(1), service_fn(app));
    let mut relay = Relay::start(server.handle.local_addr()).await;
    let mut client = connect(relay.front, &server.ca).await;
    assert_eq!(
        peer_seen(&mut client).await.unwrap(),
        relay.upstream.to_string()
    );
    for _ in 0..2 {
        relay.rebind().await;
        // quinn validates the new path and moves the connection there.
        let seen = peer_seen(&mut client)
            .await
            .expect("the connection survives");
        assert_eq!(seen, relay.upstream.to_string());
        assert!(client.quic.close_reason().is_none());
    }
    server.handle.shutdown();
}

#[tokio::test]
async fn across_workers_a_rebound_client_keeps_its_connection_every_time() {
    // Two workers share the port and datagrams are steered by connection ID: whatever worker
    // the kernel's address hash would pick for the new port, the connection's datagrams reach
    // the worker that holds it. Without steering, each rebinding lands on the other worker
    // half the time (the test below), so 32 clients rebinding twice each all keep their
    // connection by chance once in 2^64.
    let server = serve(config(2), service_fn(app));
    let mut workers = std::collections::HashSet::new();
    for _ in 0..32 {
        let mut relay = Relay::start(server.handle.local_addr()).await;
        let mut client = connect(relay.front, &server.ca).await;
        let reply = client.request("GET", "/worker", &[], b"").await.unwrap();
        let worker = String::from_utf8(reply.body).unwrap();
        for _ in 0..2 {
            relay.rebind().await;
            let seen = peer_seen(&mut client)
                .await
                .expect("the connection survives the new address");
            assert_eq!(seen, relay.upstream.to_string());
            let reply = client.request("GET", "/worker", &[], b"").await.unwrap();
            assert_eq!(String::from_utf8(reply.body).unwrap(), worker);
        }
        assert!(client.quic.close_reason().is_none());
        workers.insert(worker);
    }
    // New connections still spread over both workers (by the client's random first ID).
    assert_eq!(workers.len(), 2, "32 connections served by {workers:?}");
    server.handle.shutdown();
}

#[tokio::test]
async fn without_steering_a_rebound_client_is_served_or_reset_and_then_reconnects() {
    // Two workers share the port and the kernel hashes each source port to one of them: a new
    // port on the worker holding the connection migrates it; one on the other worker gets a
    // stateless reset, after which a new connection from that port is served.
    let mut config = config(2);
    config.http3.steer_by_connection_id = false;
    let server = serve(config, service_fn(app));
    let (mut migrated, mut reset) = (0, 0);
    for _ in 0..32 {
        let mut relay = Relay::start(server.handle.local_addr()).await;
        let mut client = connect(relay.front, &server.ca).await;
        peer_seen(&mut client).await.unwrap();
        relay.rebind().await;
        match peer_seen(&mut client).await {
            Ok(seen) => {
                assert_eq!(seen, relay.upstream.to_string());
                migrated += 1;
            }
            Err(e) => {
                assert_eq!(
                    client.quic.close_reason(),
                    Some(quinn::ConnectionError::Reset),
                    "{e}"
                );
                let mut again = connect(relay.front, &server.ca).await;
                let seen = peer_seen(&mut again)
                    .await
                    .expect("a new connection is served");
                assert_eq!(seen, relay.upstream.to_string());
                reset += 1;
            }
        }
        if migrated > 0 && reset > 0 {
            break;
        }
    }
    assert!(
        migrated > 0 && reset > 0,
        "32 rebindings: {migrated} migrated, {reset} reset"
    );
    server.handle.shutdown();
}
