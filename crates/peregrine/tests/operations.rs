//! Running behind a balancer, over real sockets: forwarding headers believed only from trusted
//! proxies, readiness turning false before the listener closes during a drain, the per-client
//! rate limit (429 + Retry-After), and a Prometheus scrape of real traffic.

mod common;
use common::{request, TestServer};
use peregrine::health::Health;
use peregrine::metrics::{self, Metrics};
use peregrine::middleware::RateLimit;
use peregrine::proxy::{client_info, ForwardedHeader, ProtoHeader, Scheme, TrustedProxies};
use peregrine::server::ServerConfig;
use peregrine::{get, App, Request};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Trusts `nets`, reading the address from `ip` and the scheme from `proto`.
fn trust(nets: &[&str], ip: ForwardedHeader, proto: ProtoHeader) -> TrustedProxies {
    TrustedProxies::new(nets)
        .unwrap()
        .client_ip_from(ip)
        .proto_from(proto)
}

fn whoami(req: Request) -> std::future::Ready<String> {
    let info = client_info(&req);
    let scheme = match info.scheme {
        Some(Scheme::Https) => "https",
        Some(Scheme::Http) => "http",
        None => "-",
    };
    std::future::ready(format!("{} {scheme}", info.addr))
}

#[test]
fn forwarding_headers_from_an_untrusted_peer_are_ignored() {
    // The test client connects from 127.0.0.1, which this application does not trust.
    let app = App::new().route("/", get(whoami)).with_state(trust(
        &["10.0.0.0/8"],
        ForwardedHeader::XForwardedFor,
        ProtoHeader::XForwardedProto,
    ));
    let s = TestServer::start(app);
    for spoof in [
        "X-Forwarded-For: 203.0.113.66",
        "Forwarded: for=203.0.113.66;proto=https",
        "X-Real-IP: 203.0.113.66",
    ] {
        let r = s.get("/", &[spoof, "X-Forwarded-Proto: https"]);
        assert_eq!(r.text(), "127.0.0.1 -", "{spoof}");
    }
}

#[test]
fn forwarding_headers_from_a_trusted_proxy_are_followed_to_the_first_untrusted_hop() {
    let app = App::new().route("/", get(whoami)).with_state(trust(
        &["127.0.0.0/8", "10.0.0.0/8"],
        ForwardedHeader::XForwardedFor,
        ProtoHeader::XForwardedProto,
    ));
    let s = TestServer::start(app);
    // The client itself sent "1.1.1.1"; the trusted edge appended the real address.
    let r = s.get(
        "/",
        &[
            "X-Forwarded-For: 1.1.1.1, 198.51.100.4, 10.0.0.7",
            "X-Forwarded-Proto: https",
        ],
    );
    assert_eq!(r.text(), "198.51.100.4 https");
    // Not the header named: a `Forwarded` passed through is not read.
    let r = s.get("/", &[r#"Forwarded: for="[2001:db8::9]:1234";proto=https"#]);
    assert_eq!(r.text(), "127.0.0.1 -");
    let r = s.get("/", &[]);
    assert_eq!(r.text(), "127.0.0.1 -");

    // A proxy that appends RFC 7239 `Forwarded` (HAProxy `option forwarded`).
    let app = App::new().route("/", get(whoami)).with_state(trust(
        &["127.0.0.0/8"],
        ForwardedHeader::Forwarded,
        ProtoHeader::Forwarded,
    ));
    let s = TestServer::start(app);
    let r = s.get("/", &[r#"Forwarded: for="[2001:db8::9]:1234";proto=https"#]);
    assert_eq!(r.text(), "2001:db8::9 https");
    let r = s.get("/", &["X-Forwarded-For: 198.51.100.4"]);
    assert_eq!(r.text(), "127.0.0.1 -");
}

#[test]
fn readiness_turns_false_before_the_listener_closes() {
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .shutdown_timeout(Duration::from_secs(2))
        .drain_delay(Duration::from_millis(1500))
        .backlog(16)
        .build();
    let config = peregrine::config::Config::from(config);
    let health = Health::new(&config.drain_signal);
    let app = App::new()
        .route("/readyz", health.readiness())
        .route("/livez", health.liveness())
        .route("/", get(|_r: Request| async { "hi" }))
        .hook(health.close_when_draining());
    let handle = app.serve(config).unwrap();
    let addr = handle.local_addr();
    let get = |path: &str| {
        let s = TestServer::attach(addr);
        s.send(&request("GET", path, &[], ""))
    };
    assert_eq!(get("/readyz").status, 200);
    assert_eq!(get("/").header("connection"), None);

    let started = Instant::now();
    let stopper = std::thread::spawn(move || handle.shutdown());
    // Readiness goes 503 while new connections are still accepted and served.
    let mut saw_draining = false;
    while started.elapsed() < Duration::from_millis(1000) {
        let r = get("/readyz");
        if r.status == 503 {
            assert_eq!(r.text(), "draining\n");
            saw_draining = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(saw_draining, "readiness never turned false");
    // Still accepting: alive, serving, and telling keep-alive clients to go elsewhere.
    assert_eq!(get("/livez").status, 200);
    let r = get("/");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    stopper.join().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "the listener stayed open for the drain delay"
    );
    assert!(TcpStream::connect(addr).is_err(), "closed after the drain");
}

#[test]
fn the_rate_limit_answers_429_with_retry_after_per_client() {
    let app = App::new()
        .route("/", get(|_r: Request| async { "hi" }))
        .hook(RateLimit::every(Duration::from_secs(30)).burst(2))
        .with_state(trust(
            &["127.0.0.1"],
            ForwardedHeader::XForwardedFor,
            ProtoHeader::XForwardedProto,
        ));
    let s = TestServer::start(app);
    let from = |ip: &str| format!("X-Forwarded-For: {ip}");
    assert_eq!(s.get("/", &[&from("192.0.2.1")]).status, 200);
    assert_eq!(s.get("/", &[&from("192.0.2.1")]).status, 200);
    let r = s.get("/", &[&from("192.0.2.1")]);
    r.assert_problem(429, "Too Many Requests");
    let secs: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&secs), "{secs}");
    // Another client (keyed by client address, not the proxy's) is not affected.
    assert_eq!(s.get("/", &[&from("192.0.2.2")]).status, 200);
}

#[test]
fn prometheus_scrape_of_real_traffic() {
    let prometheus = metrics::install().unwrap();
    let app = App::new()
        .route("/users/{id}", get(|_r: Request| async { "user" }))
        .route(
            "/boom",
            get(|_r: Request| async { peregrine::Response::new(101) }),
        )
        .route("/metrics", prometheus.endpoint())
        .layer(Metrics::new());
    let s = TestServer::start(app);
    for id in 1..=3 {
        assert_eq!(s.get(&format!("/users/{id}"), &[]).status, 200);
    }
    assert_eq!(s.get("/nope", &[]).status, 404);
    assert_eq!(s.get("/boom", &[]).status, 500);
    let r = s.get("/metrics", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = r.text();
    let has = |needle: &str| assert!(text.contains(needle), "{needle}\n{text}");
    has(r#"peregrine_http_requests_total{method="GET",route="/users/{id}",status="2xx"} 3"#);
    has(r#"peregrine_http_requests_total{method="GET",route="-",status="4xx"} 1"#);
    // The wire's status: the engine sent 500 for the handler's 101.
    has(r#"peregrine_http_requests_total{method="GET",route="/boom",status="5xx"} 1"#);
    has(
        r#"peregrine_http_request_duration_seconds_bucket{method="GET",route="/users/{id}",status="2xx",le="10"} 3"#,
    );
    has(
        r#"peregrine_http_request_duration_seconds_count{method="GET",route="/users/{id}",status="2xx"} 3"#,
    );
    has(r#"peregrine_http_response_body_bytes_total{route="/users/{id}"} 12"#);
}
