//! 0-RTT from the real quinn client resuming a session: refused by default (the server's
//! tickets allow no early data); with `Http3Config::zero_rtt`, an early GET is served and
//! marked `early-data: 1`, an early POST is answered 425 without reaching the handler, and
//! resumption works whichever worker issued the ticket.
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;

use h3_support::{client_endpoint, connect, connect_with, over, serve, serve_with, Client, Reply};
use peregrine_server::h3::Http3Config;
use peregrine_server::{service_fn, Request, Response, ServerConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tls_support::{client_config, Ca};

/// A guard against hanging, never a timing assertion.
const WAIT: Duration = Duration::from_secs(10);

/// A server whose handler counts its calls and answers with the request's `early-data` field
/// ("-" without one).
fn start(zero_rtt: bool, workers: usize) -> (h3_support::Running, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let config = ServerConfig::builder()
        .workers(workers)
        .http3(Http3Config {
            zero_rtt,
            ..Http3Config::default()
        })
        .build();
    let service = service_fn(move |req: Request| {
        counted.fetch_add(1, Ordering::SeqCst);
        let early = req.header("early-data").unwrap_or(b"-").to_vec();
        async move { Response::text(early) }
    });
    (serve(config, service), calls)
}

/// A client configuration that offers early data; its clones share one session cache, so a
/// connection resumes the session of an earlier one.
fn resuming(ca: &Ca) -> rustls::ClientConfig {
    let mut tls = (*client_config(ca, &[], &[&rustls::version::TLS13], None)).clone();
    tls.enable_early_data = true;
    tls
}

/// A full handshake and one request, which leaves the server's session tickets in `tls`'s cache.
async fn first_visit(addr: SocketAddr, tls: &rustls::ClientConfig) {
    let mut client = connect_with(addr, tls.clone()).await.unwrap();
    let reply = client.request("GET", "/", &[], b"").await.unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"-"[..]));
    client.quic.close(0u32.into(), b"");
    client.endpoint.wait_idle().await;
}

/// A resumed connection in 0-RTT, with HTTP/3 on it before the handshake completes, and the
/// future that says whether the server accepted the early data; `None` when the client may
/// not send early data (its ticket does not allow it).
async fn early(
    addr: SocketAddr,
    tls: &rustls::ClientConfig,
) -> Option<(Client, quinn::ZeroRttAccepted)> {
    let endpoint = client_endpoint(tls.clone());
    let connecting = endpoint.connect(addr, "localhost").unwrap();
    let (quic, accepted) = connecting.into_0rtt().ok()?;
    Some((over(quic, endpoint).await.unwrap(), accepted))
}

/// Sends both requests before reading either answer, so both go out in early data.
async fn together(client: &mut Client, a: (&str, &[u8]), b: (&str, &[u8])) -> (Reply, Reply) {
    let mut other = Client {
        send: client.send.clone(),
        quic: client.quic.clone(),
        endpoint: client.endpoint.clone(),
    };
    let (x, y) = tokio::join!(
        client.request(a.0, "/", &[], a.1),
        other.request(b.0, "/", &[], b.1)
    );
    (x.unwrap(), y.unwrap())
}

#[tokio::test]
async fn zero_rtt_is_refused_by_default() {
    let (server, _) = start(false, 1);
    let addr = server.handle.local_addr();
    let tls = resuming(&server.ca);
    first_visit(addr, &tls).await;
    // The session resumes, but its ticket allows no early data: the client must wait for the
    // handshake before sending anything.
    let endpoint = client_endpoint(tls.clone());
    let connecting = endpoint.connect(addr, "localhost").unwrap();
    let Err(connecting) = connecting.into_0rtt() else {
        panic!("the server's ticket allowed early data with 0-RTT off");
    };
    let quic = tokio::time::timeout(WAIT, connecting)
        .await
        .unwrap()
        .unwrap();
    let mut client = over(quic, endpoint).await.unwrap();
    let reply = client.request("POST", "/", &[], b"x").await.unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"-"[..]));
}

#[tokio::test]
async fn early_get_is_served_and_marked_early_post_is_too_early() {
    let (server, calls) = start(true, 1);
    let addr = server.handle.local_addr();
    let tls = resuming(&server.ca);
    first_visit(addr, &tls).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let (mut client, accepted) = early(addr, &tls).await.expect("a ticket allowing 0-RTT");
    let (get, post) = together(&mut client, ("GET", b""), ("POST", b"order=1")).await;
    assert!(
        tokio::time::timeout(WAIT, accepted).await.unwrap(),
        "the server refused the early data"
    );
    assert_eq!((get.status, &get.body[..]), (200, &b"1"[..]), "early GET");
    assert_eq!(post.status, 425, "early POST");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the early POST reached the handler"
    );

    // After the handshake the client repeats the POST, and it is served as any request.
    let reply = client.request("POST", "/", &[], b"order=1").await.unwrap();
    assert_eq!((reply.status, &reply.body[..]), (200, &b"-"[..]));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn early_put_and_delete_are_too_early_too() {
    let (server, calls) = start(true, 1);
    let addr = server.handle.local_addr();
    let tls = resuming(&server.ca);
    first_visit(addr, &tls).await;
    let (mut client, accepted) = early(addr, &tls).await.expect("a ticket allowing 0-RTT");
    let (put, delete) = together(&mut client, ("PUT", b"v=2"), ("DELETE", b"")).await;
    assert!(tokio::time::timeout(WAIT, accepted).await.unwrap());
    assert_eq!((put.status, delete.status), (425, 425));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn resumption_and_early_data_work_across_workers() {
    // Each connection comes from a new client port, so the kernel spreads them over the two
    // workers' sockets: a ticket issued by one worker is redeemed at the other in most of them,
    // which works only because the session cache is shared.
    let (server, _) = start(true, 2);
    let addr = server.handle.local_addr();
    let tls = resuming(&server.ca);
    first_visit(addr, &tls).await;
    for round in 0..8 {
        let (mut client, accepted) = early(addr, &tls)
            .await
            .unwrap_or_else(|| panic!("round {round}: no ticket allowing 0-RTT"));
        let reply = client.request("GET", "/", &[], b"").await.unwrap();
        assert!(
            tokio::time::timeout(WAIT, accepted).await.unwrap(),
            "round {round}: early data refused"
        );
        assert_eq!(reply.status, 200, "round {round}");
        // The next round's ticket comes after the handshake: one more round trip receives it.
        let reply = client.request("GET", "/", &[], b"").await.unwrap();
        assert_eq!(
            (reply.status, &reply.body[..]),
            (200, &b"-"[..]),
            "round {round}"
        );
        client.quic.close(0u32.into(), b"");
        client.endpoint.wait_idle().await;
    }
}

/// Relays a client's first datagram to `server` and drops the rest it sends (so its handshake
/// never completes), while the server's datagrams go back to it; the relay's address.
async fn first_datagram_only(server: SocketAddr) -> SocketAddr {
    let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let back = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    back.connect(server).await.unwrap();
    let addr = front.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut up, mut down) = ([0u8; 2048], [0u8; 2048]);
        let mut client = None;
        loop {
            tokio::select! {
                Ok((n, from)) = front.recv_from(&mut up) => {
                    if client.replace(from).is_none() {
                        let _ = back.send(&up[..n]).await;
                    }
                }
                Ok(n) = back.recv(&mut down) => {
                    if let Some(to) = client {
                        let _ = front.send_to(&down[..n], to).await;
                    }
                }
            }
        }
    });
    addr
}

#[tokio::test]
async fn with_zero_rtt_a_handshake_that_never_completes_is_closed_at_the_handshake_timeout() {
    // Serving begins before the handshake completes, so the handshake timeout is kept by a
    // watch of its own: without it, the stalled connection would hold the only slot until
    // QUIC's idle timeout (60 s), and the second client would wait for it.
    let config = ServerConfig::builder()
        .workers(1)
        .max_connections(1)
        .http3(Http3Config {
            zero_rtt: true,
            ..Http3Config::default()
        })
        .build();
    let ok = service_fn(|_r: Request| async { Response::text("ok") });
    let server = serve_with(
        config,
        |tls| tls.handshake_timeout = Duration::from_millis(300),
        ok,
    );
    let addr = server.handle.local_addr();
    let relay = first_datagram_only(addr).await;
    let stalled = client_endpoint(resuming(&server.ca));
    let _connecting = stalled.connect(relay, "localhost").unwrap();
    // Time for the relayed Initial to take the slot before the next client comes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut client = tokio::time::timeout(WAIT, connect(addr, &server.ca))
        .await
        .expect("the stalled handshake still holds the only connection slot");
    let reply = client.request("GET", "/", &[], b"").await.unwrap();
    assert_eq!(reply.status, 200);
}
