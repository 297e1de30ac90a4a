//! A listener behind a PROXY-protocol balancer, over real sockets: the header's source becomes
//! the request's peer (v1 and v2, several requests on one connection), a LOCAL header keeps the
//! socket's address, and a connection with a missing or malformed header is closed without an
//! answer while the server goes on serving others.

use peregrine_server::proxy_protocol::{encode_v2, ProxyProtocolAcceptor};
use peregrine_server::transport::PlainAcceptor;
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn exchange(addr: std::net::SocketAddr, raw: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_proxy_header_names_the_peer_and_bad_headers_close() {
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .shutdown_timeout(Duration::from_secs(2))
        .build();
    let handle = Server::new(config)
        .with_acceptor(
            ProxyProtocolAcceptor::new(PlainAcceptor).timeout(Duration::from_millis(500)),
        )
        .serve(service_fn(|req: Request| async move {
            Response::text(format!("peer={}", req.peer_addr()))
        }))
        .unwrap();
    let addr = handle.local_addr();
    let two =
        "GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

    let out = exchange(
        addr,
        format!("PROXY TCP4 203.0.113.7 10.0.0.1 51234 80\r\n{two}").as_bytes(),
    );
    assert_eq!(out.matches("peer=203.0.113.7:51234").count(), 2, "{out}");

    let mut v2 = encode_v2(
        "[2001:db8::5]:4000".parse().unwrap(),
        "[2001:db8::1]:80".parse().unwrap(),
    );
    v2.extend_from_slice(two.as_bytes());
    let out = exchange(addr, &v2);
    assert_eq!(out.matches("peer=[2001:db8::5]:4000").count(), 2, "{out}");

    // LOCAL (a balancer's health check): the socket's own address.
    let out = exchange(addr, format!("PROXY UNKNOWN\r\n{two}").as_bytes());
    assert!(out.contains("peer=127.0.0.1:"), "{out}");

    // No header, a malformed one, one cut short: closed, nothing answered.
    for bad in [
        two.as_bytes().to_vec(),
        format!("PROXY TCP4 203.0.113.7 10.0.0.1 51234 99999\r\n{two}").into_bytes(),
        b"PROXY TCP4 203.0.113.7".to_vec(),
    ] {
        assert_eq!(
            exchange(addr, &bad),
            "",
            "{}",
            String::from_utf8_lossy(&bad)
        );
    }
    // The worker still serves.
    let out = exchange(
        addr,
        format!("PROXY TCP4 198.51.100.1 10.0.0.1 1 80\r\n{two}").as_bytes(),
    );
    assert!(out.contains("peer=198.51.100.1:1"), "{out}");
    handle.shutdown();
}
