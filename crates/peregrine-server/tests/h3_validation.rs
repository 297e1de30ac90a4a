//! QUIC's defences before a client is known, from the real quinn client: Retry (address
//! validation) under a flood of Initial packets from addresses that never answer, the
//! amplification limit towards an address that never answers, a handshake under way that
//! does not hold the shutdown, and a stateless reset from a worker that does not hold the
//! connection, which the client accepts because every worker signs resets with the same key.
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;

use h3_support::{connect, serve_with};
use peregrine_server::h3::Http3Config;
use peregrine_server::{service_fn, Request, Response, ServerConfig};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longer than any wait below: a connection that takes a slot keeps it for the whole test.
const HANDSHAKE: Duration = Duration::from_secs(30);

/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(5);

async fn ok(_req: Request) -> Response {
    Response::text("ok")
}

fn config(workers: usize, max_connections: usize, max_unvalidated: usize) -> ServerConfig {
    ServerConfig::builder()
        .workers(workers)
        .max_connections(max_connections)
        // Shutdown waits for the flood's handshakes to time out or for this.
        .shutdown_timeout(Duration::from_millis(500))
        .http3(Http3Config {
            max_unvalidated_handshakes: max_unvalidated,
            ..Http3Config::default()
        })
        .build()
}

fn start(config: ServerConfig) -> h3_support::Running {
    serve_with(
        config,
        |tls| tls.handshake_timeout = HANDSHAKE,
        service_fn(ok),
    )
}

/// `n` first flights (Initial packets) of real quinn client handshakes, caught on a socket
/// that never answers: each opens a distinct connection (its own connection ID).
async fn initials(n: usize) -> Vec<Vec<u8>> {
    let sink = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let target = sink.local_addr().unwrap();
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    // The server refuses a handshake without ALPN `h3` at once: these must be ones it carries.
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    client.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let mut caught = Vec::new();
    // Kept until the Initials are caught: a dropped attempt may never send its first flight.
    let mut pending = Vec::new();
    for _ in 0..n {
        pending.push(client.connect(target, "localhost").unwrap());
        let mut buf = vec![0; 2048];
        let len = tokio::time::timeout(WAIT, sink.recv(&mut buf))
            .await
            .unwrap()
            .unwrap();
        buf.truncate(len);
        caught.push(buf);
    }
    caught
}

/// Sends each Initial to `server` from a socket of its own that never reads (a spoofed
/// address, as far as the server can tell); the sockets are kept open so that no ICMP error
/// tells the server the addresses are gone.
async fn flood(server: SocketAddr, n: usize) -> Vec<UdpSocket> {
    let mut sockets = Vec::new();
    for initial in initials(n).await {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(&initial, server).unwrap();
        sockets.push(socket);
    }
    sockets
}

/// A handshake under way from an address that never completes it: one Initial sent from a
/// socket of its own, returned once the server has answered it, with the bytes sent and the
/// first answer's size.
async fn handshake_under_way(server: SocketAddr) -> (tokio::net::UdpSocket, usize, usize) {
    let initial = initials(1).await.remove(0);
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&initial, server).await.unwrap();
    let mut buf = vec![0; 65536];
    let first = tokio::time::timeout(WAIT, socket.recv(&mut buf))
        .await
        .expect("the server answers an Initial")
        .unwrap();
    (socket, initial.len(), first)
}

#[tokio::test]
async fn amplification_to_an_unanswered_address_stops_within_a_datagram_of_three_times() {
    // RFC 9000 §8.1: before the address is validated the server may send no more than three
    // times what it received from it, however often its handshake flight is lost. quinn
    // starts one more datagram while any of that budget is left, so it can pass 3x by less
    // than one datagram (1200 bytes before path MTU discovery): the bound held here.
    let server = start(config(1, 16, 64));
    let (socket, sent, mut received) = handshake_under_way(server.handle.local_addr()).await;
    // The server probes about 1 s and 3 s after its first flight (the probe timeout doubles):
    // the first probe spends the budget, and without the limit the second would pass it by a
    // whole flight.
    let until = tokio::time::Instant::now() + Duration::from_millis(4500);
    let mut buf = vec![0; 65536];
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, socket.recv(&mut buf)).await {
        received += n;
    }
    assert!(
        (3 * sent..3 * sent + 1200).contains(&received),
        "{received} bytes sent to an unvalidated address that sent {sent}"
    );
    server.handle.shutdown();
}

#[tokio::test]
async fn a_handshake_under_way_does_not_hold_the_shutdown() {
    // The handshake could take its whole 30 s timeout; the shutdown allows 10 s, yet there is
    // nothing to finish: a connection that completed its handshake now would get GOAWAY first.
    let config = ServerConfig::builder()
        .workers(1)
        .shutdown_timeout(Duration::from_secs(10))
        .build();
    let server = start(config);
    let (_socket, _, _) = handshake_under_way(server.handle.local_addr()).await;
    let began = Instant::now();
    server.handle.shutdown();
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "shutdown waited {took:?} for a handshake"
    );
}

#[tokio::test]
async fn an_initial_flood_holds_no_more_slots_than_the_unvalidated_limit() {
    // Three slots, two of them at most for unvalidated handshakes: the flood's first two take
    // theirs (for the whole 30 s handshake timeout), every later one is sent a Retry and holds
    // nothing, so the third slot is still there for a client that answers the Retry.
    let server = start(config(1, 3, 2));
    let addr = server.handle.local_addr();
    let _spoofed = flood(addr, 40).await;
    let mut client = tokio::time::timeout(WAIT, connect(addr, &server.ca))
        .await
        .expect("a validated client gets the slot the flood did not take");
    let reply = client.request("GET", "/", &[], b"").await.unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"ok"[..]));
    server.handle.shutdown();
}

#[tokio::test]
async fn with_no_unvalidated_handshakes_allowed_every_client_is_retried_and_served() {
    // The flood holds nothing at all now: one slot is enough for the clients, one at a time.
    let server = start(config(1, 1, 0));
    let addr = server.handle.local_addr();
    let _spoofed = flood(addr, 8).await;
    for _ in 0..2 {
        let mut client = tokio::time::timeout(WAIT, connect(addr, &server.ca))
            .await
            .expect("a client that answers the Retry is served");
        let reply = client.request("GET", "/", &[], b"").await.unwrap();
        assert_eq!(reply.status, 200);
        client.quic.close(0u32.into(), b"");
        client.endpoint.wait_idle().await;
    }
    server.handle.shutdown();
}

#[tokio::test]
async fn a_worker_without_the_connection_resets_it_with_a_reset_the_client_accepts() {
    // Two workers share the port and, without connection-ID steering, a client that moves to
    // a new local port is steered by the kernel's hash to either. The one holding the
    // connection serves it (migration); the other knows nothing of it and answers with a
    // stateless reset, which the client only accepts when it was signed with the key the first
    // worker gave out.
    let mut config = config(2, 1024, 64);
    config.http3.steer_by_connection_id = false;
    let server = start(config);
    let addr = server.handle.local_addr();
    let (mut migrated, mut reset) = (0, 0);
    for _ in 0..32 {
        let mut client = connect(addr, &server.ca).await;
        assert_eq!(
            client.request("GET", "/", &[], b"").await.unwrap().status,
            200
        );
        client
            .endpoint
            .rebind(UdpSocket::bind("127.0.0.1:0").unwrap())
            .unwrap();
        let after = tokio::time::timeout(WAIT, client.request("GET", "/", &[], b""))
            .await
            .expect("the client is either served or reset, not left waiting");
        match after {
            Ok(reply) => {
                assert_eq!(reply.status, 200);
                migrated += 1;
            }
            Err(e) => {
                assert_eq!(
                    client.quic.close_reason(),
                    Some(quinn::ConnectionError::Reset),
                    "{e}"
                );
                reset += 1;
            }
        }
        if migrated > 0 && reset > 0 {
            break;
        }
    }
    assert!(
        reset > 0,
        "no rebinding reached the other worker ({migrated} migrated)"
    );
    server.handle.shutdown();
}
