use super::*;
use crate::{App, Request as FwRequest};
use peregrine_server::Service;

/// The client (and forwarded host) of a request from `peer` with these header lines, through
/// a real application with the given trust.
fn resolve_full(
    trust: TrustedProxies,
    peer: &str,
    headers: &[&str],
) -> (ClientInfo, Option<String>) {
    let mut raw = String::from("GET / HTTP/1.1\r\nHost: t\r\n");
    for h in headers {
        raw.push_str(h);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    let req = peregrine_server::Request::from_bytes(raw.as_bytes(), peer.parse().unwrap()).unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(None));
    let sink = out.clone();
    let svc = App::new()
        .route(
            "/",
            crate::get(move |req: FwRequest| {
                *sink.lock().unwrap() = Some((client_info(&req), client_host(&req)));
                async { "" }
            }),
        )
        .with_state(trust)
        .into_service();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(svc.call(req));
    let info = out.lock().unwrap().take().unwrap();
    info
}

fn resolve(trust: TrustedProxies, peer: &str, headers: &[&str]) -> ClientInfo {
    resolve_full(trust, peer, headers).0
}

fn trust(nets: &[&str], ip: ForwardedHeader) -> TrustedProxies {
    TrustedProxies::new(nets).unwrap().client_ip_from(ip)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;

#[test]
fn untrusted_peers_cannot_spoof() {
    for h in [XFF, ForwardedHeader::Forwarded, ForwardedHeader::XRealIp] {
        let t = trust(&["10.0.0.0/8"], h).proto_from(ProtoHeader::XForwardedProto);
        let c = resolve(
            t,
            "192.0.2.9:5000",
            &[
                "X-Forwarded-For: 1.2.3.4",
                "X-Real-IP: 1.2.3.4",
                "Forwarded: for=5.6.7.8;proto=https",
                "X-Forwarded-Proto: https",
            ],
        );
        assert_eq!(
            c,
            ClientInfo {
                addr: ip("192.0.2.9"),
                scheme: None,
                forwarded: false
            }
        );
    }
}

#[test]
fn no_header_is_believed_unless_named_and_none_falls_back() {
    let spoofs = [
        "Forwarded: for=6.6.6.6;proto=https;host=evil",
        "X-Real-IP: 6.6.6.6",
        "X-Forwarded-Proto: https",
        "X-Forwarded-Host: evil",
    ];
    // Trusted peer, nothing named: the peer.
    let (c, host) = resolve_full(
        TrustedProxies::new(["127.0.0.1"]).unwrap(),
        "127.0.0.1:1",
        &spoofs,
    );
    assert_eq!(
        (c.addr, c.scheme, c.forwarded, host),
        (ip("127.0.0.1"), None, false, None)
    );
    // X-Forwarded-For named: a client's Forwarded / X-Real-IP are not read, even when the
    // proxy sent no X-Forwarded-For at all.
    let c = resolve(trust(&["127.0.0.1"], XFF), "127.0.0.1:1", &spoofs);
    assert_eq!(
        (c.addr, c.forwarded, c.scheme),
        (ip("127.0.0.1"), false, None)
    );
    // Forwarded named: X-Forwarded-For is not read.
    let c = resolve(
        trust(&["127.0.0.1"], ForwardedHeader::Forwarded),
        "127.0.0.1:1",
        &["X-Forwarded-For: 6.6.6.6"],
    );
    assert_eq!(c.addr, ip("127.0.0.1"));
    // The named proto header only: Forwarded's proto= is not X-Forwarded-Proto.
    let t = trust(&["127.0.0.1"], XFF).proto_from(ProtoHeader::XForwardedProto);
    let c = resolve(
        t,
        "127.0.0.1:1",
        &["X-Forwarded-For: 203.0.113.5", "Forwarded: proto=https"],
    );
    assert_eq!((c.addr, c.scheme), (ip("203.0.113.5"), None));
}

#[test]
fn x_forwarded_for_is_walked_to_the_rightmost_untrusted_hop() {
    // The client wrote "1.1.1.1" itself; the trusted edge proxy 10.0.0.2 appended the real
    // 203.0.113.5, and the inner proxy 10.0.0.3 appended 10.0.0.2.
    let t = || trust(&["10.0.0.0/8"], XFF).proto_from(ProtoHeader::XForwardedProto);
    let c = resolve(
        t(),
        "10.0.0.3:1",
        &[
            "X-Forwarded-For: 1.1.1.1, 203.0.113.5",
            "X-Forwarded-For: 10.0.0.2",
            "X-Forwarded-Proto: http, https, http",
        ],
    );
    assert_eq!(
        (c.addr, c.scheme, c.forwarded),
        (ip("203.0.113.5"), Some(Scheme::Https), true)
    );
    // One X-Forwarded-Proto set by the proxy (nginx `$scheme`): the right-most value, never
    // the client's copy on the left.
    let c = resolve(
        t(),
        "10.0.0.3:1",
        &[
            "X-Forwarded-For: 6.6.6.6, 203.0.113.5",
            "X-Forwarded-Proto: https, http",
        ],
    );
    assert_eq!((c.addr, c.scheme), (ip("203.0.113.5"), Some(Scheme::Http)));
    // Every hop trusted: the leftmost is the client.
    let c = resolve(t(), "10.0.0.3:1", &["X-Forwarded-For: 10.9.9.9, 10.0.0.2"]);
    assert_eq!(c.addr, ip("10.9.9.9"));
    // Garbage left of the client is never read; garbage on the walk voids the header.
    let c = resolve(
        t(),
        "10.0.0.3:1",
        &["X-Forwarded-For: <script>, ,203.0.113.5"],
    );
    assert_eq!(c.addr, ip("203.0.113.5"));
    for bad in [
        "203.0.113.5, unknown",
        "203.0.113.5, 10.0.0.2,",
        "203.0.113.5 10.0.0.2",
    ] {
        let c = resolve(t(), "10.0.0.3:1", &[&format!("X-Forwarded-For: {bad}")]);
        assert_eq!((c.addr, c.forwarded), (ip("10.0.0.3"), false), "{bad}");
    }
    // IPv6 forms.
    let t6 = || trust(&["::1"], XFF).proto_from(ProtoHeader::XForwardedProto);
    let c = resolve(
        t6(),
        "[::1]:1",
        &[
            "X-Forwarded-For: [2001:db8::5]:443",
            "X-Forwarded-Proto: https",
        ],
    );
    assert_eq!((c.addr, c.scheme), (ip("2001:db8::5"), Some(Scheme::Https)));
    let c = resolve(t6(), "[::1]:1", &["X-Forwarded-For: 2001:db8::6"]);
    assert_eq!(c.addr, ip("2001:db8::6"));
}

#[test]
fn forwarded_is_walked_and_ignored_whole_when_malformed() {
    let t =
        || trust(&["127.0.0.0/8"], ForwardedHeader::Forwarded).proto_from(ProtoHeader::Forwarded);
    let c = resolve(
        t(),
        "127.0.0.1:1",
        &[
            r#"Forwarded: for=6.6.6.6;proto=http, for="[2001:db8:cafe::17]:4711";proto=https, for=127.0.0.2"#,
        ],
    );
    assert_eq!(
        (c.addr, c.scheme),
        (ip("2001:db8:cafe::17"), Some(Scheme::Https))
    );
    for bad in [
        r#"for="1.2.3.4"#,                        // a quote left open
        "for=1.2.3.4;for=5.6.7.8",                // a parameter twice
        "for=_hidden, for=127.0.0.2;proto=https", // an obfuscated hop on the walk
        "for=unknown",
        "proto=https", // no address at all
        "for",
    ] {
        let c = resolve(t(), "127.0.0.1:1", &[&format!("Forwarded: {bad}")]);
        assert_eq!((c.addr, c.forwarded), (ip("127.0.0.1"), false), "{bad}");
    }
}

#[test]
fn x_real_ip_is_one_address() {
    let t = || trust(&["10.0.0.0/8"], ForwardedHeader::XRealIp);
    let c = resolve(t(), "10.0.0.3:1", &["X-Real-IP: 203.0.113.8"]);
    assert_eq!((c.addr, c.forwarded), (ip("203.0.113.8"), true));
    for bad in [
        &["X-Real-IP: 203.0.113.8, 6.6.6.6"][..],
        &["X-Real-IP: 6.6.6.6", "X-Real-IP: 203.0.113.8"],
        &["X-Real-IP: unknown"],
    ] {
        let c = resolve(t(), "10.0.0.3:1", bad);
        assert_eq!((c.addr, c.forwarded), (ip("10.0.0.3"), false), "{bad:?}");
    }
}

#[test]
fn forwarded_host_follows_the_named_header() {
    let t = || trust(&["10.0.0.0/8"], XFF).host_from(HostHeader::XForwardedHost);
    let host = |peer: &str, headers: &[&str]| resolve_full(t(), peer, headers).1;
    assert_eq!(
        host("10.0.0.1:1", &["X-Forwarded-Host: Shop.Example"]).as_deref(),
        Some("shop.example")
    );
    // Appended by the proxy after the client's copy: the proxy's.
    assert_eq!(
        host(
            "10.0.0.1:1",
            &[
                "X-Forwarded-For: 203.0.113.5",
                "X-Forwarded-Host: evil.example, shop.example"
            ]
        )
        .as_deref(),
        Some("shop.example")
    );
    assert_eq!(
        host("10.0.0.1:1", &["X-Forwarded-Host: shop.example/x"]),
        None
    );
    assert_eq!(host("10.0.0.1:1", &["Forwarded: host=shop.example"]), None);
    assert_eq!(
        host("192.0.2.1:1", &["X-Forwarded-Host: shop.example"]),
        None
    );
    let t = TrustedProxies::new(["10.0.0.0/8"])
        .unwrap()
        .host_from(HostHeader::Forwarded);
    let (_, h) = resolve_full(
        t,
        "10.0.0.1:1",
        &["Forwarded: host=shop.example;proto=https"],
    );
    assert_eq!(h.as_deref(), Some("shop.example"));
}

#[test]
fn networks_parse_strictly() {
    assert!(TrustedProxies::new(["nonsense"]).is_err());
    assert!(TrustedProxies::new(["10.0.0.0/8", " ::1 "]).is_ok());
}
