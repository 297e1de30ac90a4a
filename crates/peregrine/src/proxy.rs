//! The client behind reverse proxies: `Forwarded` (RFC 7239), `X-Forwarded-For` and
//! `X-Forwarded-Proto`, believed only when the connection comes from a proxy the application
//! trusts.
//!
//! Any client can send these headers, so they are read only when the connection's peer is in
//! the configured networks, and then only back to the first address that is not: each trusted
//! proxy appends the address it received the request from, so the rightmost untrusted entry is
//! the client, and whatever the client itself wrote further left is ignored.
//!
//! ```
//! use peregrine::proxy::TrustedProxies;
//! use peregrine::{get, App, Request};
//!
//! let app = App::new()
//!     .route("/", get(|req: Request| async move { req.client_addr().to_string() }))
//!     .with_state(TrustedProxies::new(["10.0.0.0/8", "fd00::/8", "127.0.0.1"]).unwrap());
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // The test client's requests come from 127.0.0.1: a trusted proxy here.
//! let res = app.test().get("/").header("forwarded", "for=198.51.100.17;proto=https").send().await;
//! assert_eq!(res.text(), "198.51.100.17");
//! # });
//! ```
//!
//! Without a [`TrustedProxies`] state, [`Request::client_addr`] is the peer's address.

use crate::request::Request;
use ipnet::IpNet;
use std::net::IpAddr;

/// The networks whose connections may tell who the client is. Add it to the application with
/// [`App::with_state`](crate::App::with_state).
///
/// ```
/// use peregrine::proxy::TrustedProxies;
/// use peregrine::{get, App, Request};
///
/// let app = || App::new()
///     .route("/ip", get(|req: Request| async move { req.client_addr().to_string() }))
///     .with_state(TrustedProxies::new(["10.0.0.0/8"]).unwrap());
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // From the load balancer (10.0.0.5): its X-Forwarded-For is believed.
/// let via_lb = app().test().with_peer("10.0.0.5:51000".parse().unwrap());
/// let res = via_lb.get("/ip").header("x-forwarded-for", "203.0.113.7").send().await;
/// assert_eq!(res.text(), "203.0.113.7");
///
/// // Straight from the internet: the header is the client's own claim, ignored.
/// let direct = app().test().with_peer("192.0.2.44:40000".parse().unwrap());
/// let res = direct.get("/ip").header("x-forwarded-for", "203.0.113.7").send().await;
/// assert_eq!(res.text(), "192.0.2.44");
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

/// The scheme the client used, as forwarded by a trusted proxy.
///
/// ```
/// use peregrine::proxy::{client_info, Scheme, TrustedProxies};
/// use peregrine::{get, App, IntoResponse, Redirect, Request, Response};
///
/// /// Sends plain-HTTP visitors (as the TLS-terminating proxy reports) to HTTPS.
/// async fn home(req: Request) -> Response {
///     match client_info(&req).scheme {
///         Some(Scheme::Https) => Response::text("secure"),
///         _ => Redirect::permanent("https://example.com/").into_response(),
///     }
/// }
///
/// let client = App::new().route("/", get(home)).with_state(TrustedProxies::new(["127.0.0.1"]).unwrap()).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // What the proxy adds: the client's address and the scheme it used.
/// let via = |proto: &'static str| client.get("/").header("x-forwarded-for", "203.0.113.7").header("x-forwarded-proto", proto);
/// assert_eq!(via("https").send().await.text(), "secure");
/// assert_eq!(via("http").send().await.status(), 308);
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http`
    Http,
    /// `https`
    Https,
}

/// Who sent the request, after trusted proxies are accounted for.
///
/// ```
/// use peregrine::proxy::{client_info, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// async fn audit(req: Request) -> String {
///     let who = client_info(&req);
///     let how = if who.forwarded { "via proxy" } else { "direct" };
///     format!("{} ({how})", who.addr)
/// }
///
/// let client = App::new().route("/audit", get(audit)).with_state(TrustedProxies::new(["127.0.0.1"]).unwrap()).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/audit").send().await.text(), "127.0.0.1 (direct)");
/// let res = client.get("/audit").header("x-forwarded-for", "2001:db8::7").send().await;
/// assert_eq!(res.text(), "2001:db8::7 (via proxy)");
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's address.
    pub addr: IpAddr,
    /// The scheme the client used, when a trusted proxy said so (`None`: the connection's own,
    /// plain HTTP here).
    pub scheme: Option<Scheme>,
    /// Whether the answer came from forwarding headers rather than the socket.
    pub forwarded: bool,
}

impl TrustedProxies {
    /// Trusts these networks (`"10.0.0.0/8"`, `"2001:db8::/32"`) or single addresses
    /// (`"127.0.0.1"`).
    ///
    /// ```
    /// use peregrine::proxy::TrustedProxies;
    /// let t = TrustedProxies::new(["10.0.0.0/8", "::1"]).unwrap();
    /// assert!(t.contains("10.1.2.3".parse().unwrap()));
    /// assert!(!t.contains("192.0.2.1".parse().unwrap()));
    /// assert!(TrustedProxies::new(["10.0.0.0/33"]).is_err());
    /// ```
    pub fn new<I, S>(networks: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut nets = Vec::new();
        for n in networks {
            let n = n.as_ref().trim();
            let net = match n.parse::<IpNet>() {
                Ok(net) => net,
                Err(_) => n
                    .parse::<IpAddr>()
                    .map(IpNet::from)
                    .map_err(|_| format!("not a network or address: {n:?}"))?,
            };
            nets.push(net.trunc());
        }
        Ok(TrustedProxies { nets })
    }

    /// Whether `ip` is in a trusted network (IPv4-mapped IPv6 addresses count as IPv4).
    ///
    /// ```
    /// use peregrine::proxy::TrustedProxies;
    /// let t = TrustedProxies::new(["10.0.0.0/8", "fd00::/8"]).unwrap();
    /// assert!(t.contains("::ffff:10.9.8.7".parse().unwrap())); // a dual-stack socket's view of 10.9.8.7
    /// assert!(t.contains("fd00::1".parse().unwrap()));
    /// assert!(!t.contains("11.0.0.1".parse().unwrap()));
    /// ```
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The client of `req` (see the module documentation for the rules). For an application
    /// that holds its trust elsewhere than in its state (otherwise use [`client_info`]).
    ///
    /// ```
    /// use peregrine::proxy::TrustedProxies;
    /// use peregrine::{get, App, Request};
    /// use std::sync::Arc;
    ///
    /// let internal_lb = Arc::new(TrustedProxies::new(["127.0.0.0/8"]).unwrap());
    /// let trust = internal_lb.clone();
    /// let client = App::new()
    ///     .route("/admin/whoami", get(move |req: Request| {
    ///         let info = trust.resolve(&req);
    ///         async move { info.addr.to_string() }
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/admin/whoami").header("x-forwarded-for", "10.20.30.40").send().await;
    /// assert_eq!(res.text(), "10.20.30.40");
    /// # });
    /// ```
    pub fn resolve(&self, req: &Request) -> ClientInfo {
        let peer = req.peer_addr().ip().to_canonical();
        let direct = ClientInfo {
            addr: peer,
            scheme: None,
            forwarded: false,
        };
        if !self.contains(peer) {
            return direct;
        }
        if let Some(hops) = forwarded_hops(req) {
            return self.walk(peer, &hops).unwrap_or(direct);
        }
        let Some(xff) = joined(req, "x-forwarded-for") else {
            return direct;
        };
        let mut hops: Vec<Hop> = Vec::new();
        for item in xff.split(',') {
            hops.push(Hop {
                addr: parse_node(item.trim()),
                scheme: None,
            });
        }
        // X-Forwarded-Proto lists one scheme per hop when every proxy appends; otherwise the
        // first value is the one the client-facing proxy saw.
        if let Some(xfp) = joined(req, "x-forwarded-proto") {
            let schemes: Vec<Option<Scheme>> = xfp.split(',').map(parse_scheme).collect();
            if schemes.len() == hops.len() {
                for (h, s) in hops.iter_mut().zip(schemes) {
                    h.scheme = s;
                }
            } else if let Some(first) = schemes.first() {
                for h in &mut hops {
                    h.scheme = *first;
                }
            }
        }
        self.walk(peer, &hops).unwrap_or(direct)
    }

    /// From the peer leftwards through the hops, to the first address that is not trusted.
    /// `None` when the chain is unusable (empty).
    fn walk(&self, peer: IpAddr, hops: &[Hop]) -> Option<ClientInfo> {
        let mut last_trusted = peer;
        for (i, hop) in hops.iter().enumerate().rev() {
            let Some(addr) = hop.addr else {
                // "unknown", an obfuscated name or garbage: the proxy that wrote it is the
                // last address we can vouch for.
                return Some(ClientInfo {
                    addr: last_trusted,
                    scheme: hops.get(i + 1).and_then(|h| h.scheme),
                    forwarded: last_trusted != peer,
                });
            };
            if !self.contains(addr) || i == 0 {
                return Some(ClientInfo {
                    addr,
                    scheme: hop.scheme,
                    forwarded: true,
                });
            }
            last_trusted = addr;
        }
        None
    }
}

struct Hop {
    addr: Option<IpAddr>,
    scheme: Option<Scheme>,
}

/// The client of `req`: resolved through the application's [`TrustedProxies`] if it has one.
///
/// ```
/// use peregrine::proxy::{client_info, Scheme, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// async fn who(req: Request) -> String {
///     let client = client_info(&req);
///     let https = client.scheme == Some(Scheme::Https);
///     format!("{} https={https} forwarded={}", client.addr, client.forwarded)
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let app = App::new()
///     .route("/who", get(who))
///     .with_state(TrustedProxies::new(["127.0.0.1"]).unwrap());
/// let client = app.test(); // its requests come from 127.0.0.1, the trusted proxy here
/// let res = client
///     .get("/who")
///     .header("x-forwarded-for", "198.51.100.9, 203.0.113.7")
///     .header("x-forwarded-proto", "https")
///     .send()
///     .await;
/// // The rightmost untrusted address is the client; the one left of it, the client's own claim.
/// assert_eq!(res.text(), "203.0.113.7 https=true forwarded=true");
/// # });
/// ```
pub fn client_info(req: &Request) -> ClientInfo {
    match req.shared.state::<TrustedProxies>() {
        Some(t) => t.resolve(req),
        None => ClientInfo {
            addr: req.peer_addr().ip().to_canonical(),
            scheme: None,
            forwarded: false,
        },
    }
}

/// Every field line named `name`, joined with `,` (a list split over lines is one list).
fn joined(req: &Request, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case(name) {
            let v = String::from_utf8_lossy(v);
            match &mut out {
                Some(s) => {
                    s.push(',');
                    s.push_str(&v);
                }
                None => out = Some(v.into_owned()),
            }
        }
    }
    out
}

fn parse_scheme(s: &str) -> Option<Scheme> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("https") {
        Some(Scheme::Https)
    } else if s.eq_ignore_ascii_case("http") {
        Some(Scheme::Http)
    } else {
        None
    }
}

/// A node as `for=` or `X-Forwarded-For` carries it: `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]`,
/// `[2001:db8::1]:80`, a bare `2001:db8::1` (X-Forwarded-For). `None` for `unknown`, obfuscated
/// identifiers and anything else.
fn parse_node(s: &str) -> Option<IpAddr> {
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(valid_port)) {
            return None;
        }
        return ip.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let (ip, port) = s.rsplit_once(':')?;
    if !valid_port(port) {
        return None;
    }
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn valid_port(p: &str) -> bool {
    // RFC 7239 allows obfuscated ports (`_abc`) too; the port is not used, only checked.
    (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
        || (p.starts_with('_') && p.len() > 1)
}

/// The hops of every `Forwarded` line, in order; `None` when there is no such header or it is
/// malformed (then it is ignored whole rather than half-believed).
fn forwarded_hops(req: &Request) -> Option<Vec<Hop>> {
    let value = joined(req, "forwarded")?;
    let mut hops = Vec::new();
    for element in split_outside_quotes(&value, b',') {
        let mut hop = Hop {
            addr: None,
            scheme: None,
        };
        let mut seen_for = false;
        for pair in split_outside_quotes(element, b';') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=')?;
            let v = unquote(v.trim())?;
            if k.trim().eq_ignore_ascii_case("for") {
                if seen_for {
                    return None;
                }
                seen_for = true;
                hop.addr = parse_node(&v);
            } else if k.trim().eq_ignore_ascii_case("proto") {
                hop.scheme = parse_scheme(&v);
            }
        }
        hops.push(hop);
    }
    (!hops.is_empty()).then_some(hops)
}

/// Splits on `sep` where it is not inside a quoted string.
fn split_outside_quotes(s: &str, sep: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if b == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A token or quoted-string value; `None` if a quote is unbalanced.
fn unquote(v: &str) -> Option<String> {
    let Some(inner) = v.strip_prefix('"') else {
        return (!v.contains('"')).then(|| v.to_owned());
    };
    let inner = inner.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{App, Request as FwRequest};
    use peregrine_server::Service;

    /// The client a request from `peer` with these header lines resolves to, through a real
    /// application with the given trust.
    fn resolve(trusted: &[&str], peer: &str, headers: &[&str]) -> ClientInfo {
        let mut raw = String::from("GET / HTTP/1.1\r\nHost: t\r\n");
        for h in headers {
            raw.push_str(h);
            raw.push_str("\r\n");
        }
        raw.push_str("\r\n");
        let req =
            peregrine_server::Request::from_bytes(raw.as_bytes(), peer.parse().unwrap()).unwrap();
        let out = std::sync::Arc::new(std::sync::Mutex::new(None));
        let sink = out.clone();
        let svc = App::new()
            .route(
                "/",
                crate::get(move |req: FwRequest| {
                    *sink.lock().unwrap() = Some(client_info(&req));
                    async { "" }
                }),
            )
            .with_state(TrustedProxies::new(trusted).unwrap())
            .into_service();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(svc.call(req));
        let info = out.lock().unwrap().take().unwrap();
        info
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_peers_cannot_spoof() {
        let c = resolve(
            &["10.0.0.0/8"],
            "192.0.2.9:5000",
            &[
                "X-Forwarded-For: 1.2.3.4",
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

    #[test]
    fn x_forwarded_for_is_walked_to_the_first_untrusted_hop() {
        // The client wrote "1.1.1.1" itself; the trusted edge proxy 10.0.0.2 appended the real
        // 203.0.113.5, and the inner proxy 10.0.0.3 appended 10.0.0.2.
        let c = resolve(
            &["10.0.0.0/8"],
            "10.0.0.3:1",
            &[
                "X-Forwarded-For: 1.1.1.1, 203.0.113.5",
                "X-Forwarded-For: 10.0.0.2",
                "X-Forwarded-Proto: http, https, http",
            ],
        );
        assert_eq!(c.addr, ip("203.0.113.5"));
        assert_eq!(c.scheme, Some(Scheme::Https));
        assert!(c.forwarded);
        // Every hop trusted: the leftmost is the client.
        let c = resolve(
            &["10.0.0.0/8"],
            "10.0.0.3:1",
            &["X-Forwarded-For: 10.9.9.9"],
        );
        assert_eq!(c.addr, ip("10.9.9.9"));
        // IPv6 forms, and one X-Forwarded-Proto for the chain.
        let c = resolve(
            &["::1"],
            "[::1]:1",
            &[
                "X-Forwarded-For: [2001:db8::5]:443",
                "X-Forwarded-Proto: https",
            ],
        );
        assert_eq!((c.addr, c.scheme), (ip("2001:db8::5"), Some(Scheme::Https)));
        let c = resolve(&["::1"], "[::1]:1", &["X-Forwarded-For: 2001:db8::6"]);
        assert_eq!(c.addr, ip("2001:db8::6"));
    }

    #[test]
    fn forwarded_wins_over_x_forwarded_for_and_stops_at_unknown() {
        let c = resolve(
            &["127.0.0.1"],
            "127.0.0.1:1",
            &[
                r#"Forwarded: for="[2001:db8:cafe::17]:4711";proto=https, for=127.0.0.1"#,
                "X-Forwarded-For: 9.9.9.9",
            ],
        );
        assert_eq!(c.addr, ip("2001:db8:cafe::17"));
        assert_eq!(c.scheme, Some(Scheme::Https));
        // An obfuscated hop: the trusted proxy that reported it is as far as we can see.
        let c = resolve(
            &["127.0.0.0/8"],
            "127.0.0.1:1",
            &["Forwarded: for=_hidden, for=127.0.0.2;proto=https"],
        );
        assert_eq!(c.addr, ip("127.0.0.2"));
        // Malformed: ignored whole (the socket's peer, not half a header).
        let c = resolve(
            &["127.0.0.1"],
            "127.0.0.1:1",
            &[r#"Forwarded: for="1.2.3.4"#],
        );
        assert_eq!((c.addr, c.forwarded), (ip("127.0.0.1"), false));
        let c = resolve(
            &["127.0.0.1"],
            "127.0.0.1:1",
            &["Forwarded: for=1.2.3.4;for=5.6.7.8"],
        );
        assert!(!c.forwarded);
    }

    #[test]
    fn nodes_parse_strictly() {
        assert_eq!(parse_node("192.0.2.1:80"), Some(ip("192.0.2.1")));
        assert_eq!(
            parse_node("[::ffff:192.0.2.1]"),
            Some(ip("::ffff:192.0.2.1"))
        );
        assert_eq!(parse_node("::ffff:192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("unknown"), None);
        assert_eq!(parse_node("192.0.2.1:"), None);
        assert_eq!(parse_node("192.0.2.1:8x"), None);
        assert_eq!(parse_node("[::1"), None);
        assert_eq!(parse_node("example.com"), None);
        assert!(TrustedProxies::new(["nonsense"]).is_err());
    }
}
