//! The client behind reverse proxies: the address, scheme and host a proxy the application
//! trusts forwarded, from the one header the operator names for each.
//!
//! Any client can send forwarding headers, and most proxies pass the ones they do not set
//! through untouched (nginx forwards a client's `Forwarded` as it is; one that only sets
//! `X-Forwarded-Proto` leaves `X-Forwarded-Host` to the client). So the rules are explicit:
//!
//! - Headers are read only when the connection's peer is in the trusted networks.
//! - Only the header named with [`TrustedProxies::client_ip_from`] gives the address, only the
//!   one named with [`TrustedProxies::proto_from`] the scheme, only the one named with
//!   [`TrustedProxies::host_from`] the host. Nothing falls back from one header to another;
//!   with none named, the peer is the client.
//! - A list (`X-Forwarded-For`, `Forwarded`) is walked from the right: each trusted proxy
//!   appends the address it received the request from, so the right-most address that is not
//!   a trusted proxy is the client; whatever the client wrote further left is never read. If
//!   every address is trusted, the left-most is the client.
//! - A malformed header (an entry on the walk that is not an address, `Forwarded` syntax
//!   errors, two `X-Real-IP` lines) is ignored whole: the peer is the client, and
//!   [`ClientInfo::forwarded`] is `false`.
//!
//! ```
//! use peregrine::proxy::{ForwardedHeader, ProtoHeader, TrustedProxies};
//! use peregrine::{get, App, Request};
//!
//! // nginx with `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;`
//! // and `proxy_set_header X-Forwarded-Proto $scheme;`, on 127.0.0.1.
//! let trust = TrustedProxies::new(["127.0.0.1"])
//!     .unwrap()
//!     .client_ip_from(ForwardedHeader::XForwardedFor)
//!     .proto_from(ProtoHeader::XForwardedProto);
//! let client = App::new()
//!     .route("/", get(|req: Request| async move { req.client_addr().to_string() }))
//!     .with_state(trust)
//!     .test();
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // The test client's requests come from 127.0.0.1: the proxy here. The client wrote
//! // "6.6.6.6" itself; nginx appended the address it saw.
//! let res = client.get("/").header("x-forwarded-for", "6.6.6.6, 198.51.100.17").send().await;
//! assert_eq!(res.text(), "198.51.100.17");
//! // `Forwarded` is not the header this proxy sets: a client's copy of it is not read.
//! let res = client.get("/").header("forwarded", "for=6.6.6.6").send().await;
//! assert_eq!(res.text(), "127.0.0.1");
//! # });
//! ```
//!
//! Without a [`TrustedProxies`] state, [`Request::client_addr`] is the peer's address.
//! `docs/operations.md` has the settings for nginx, HAProxy and Envoy.

mod parse;
mod scheme;

use crate::request::Request;
use ipnet::IpNet;
use parse::{forwarded_elements, items, joined, parse_host, parse_node, parse_scheme, single};
pub use scheme::Scheme;
use std::net::IpAddr;

/// The header a trusted proxy puts the client's address in.
///
/// ```
/// use peregrine::proxy::{ForwardedHeader, TrustedProxies};
/// // nginx: `proxy_set_header X-Real-IP $remote_addr;`
/// let trust = TrustedProxies::new(["10.0.0.0/8"]).unwrap().client_ip_from(ForwardedHeader::XRealIp);
/// # let _ = trust;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`, appended to by each proxy (nginx
    /// `$proxy_add_x_forwarded_for`, HAProxy `option forwardfor`, Envoy, cloud balancers).
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for=proxy1`, appended to by each proxy
    /// (HAProxy `option forwarded`; nginx only with a hand-written `proxy_set_header`).
    Forwarded,
    /// `X-Real-IP: client`, one address set by the proxy (nginx
    /// `proxy_set_header X-Real-IP $remote_addr;`); two lines are malformed.
    XRealIp,
}

/// The header a trusted proxy puts the client's scheme in.
///
/// ```
/// use peregrine::proxy::{ProtoHeader, TrustedProxies};
/// // nginx: `proxy_set_header X-Forwarded-Proto $scheme;`
/// let trust = TrustedProxies::new(["10.0.0.0/8"]).unwrap().proto_from(ProtoHeader::XForwardedProto);
/// # let _ = trust;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoHeader {
    /// `X-Forwarded-Proto: https`. A proxy that sets it replaces the client's value; in a
    /// list, the entry that lines up with the client's hop of the address header when both
    /// lists are as long, else the right-most (the nearest proxy's).
    XForwardedProto,
    /// The `proto=` parameter of `Forwarded`, from the same element as the client's `for=`
    /// (when the address comes from `Forwarded` too), else from the right-most element.
    Forwarded,
}

/// The header a trusted proxy puts the host the client asked for in.
///
/// ```
/// use peregrine::proxy::{HostHeader, TrustedProxies};
/// // nginx: `proxy_set_header X-Forwarded-Host $host;`
/// let trust = TrustedProxies::new(["10.0.0.0/8"]).unwrap().host_from(HostHeader::XForwardedHost);
/// # let _ = trust;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostHeader {
    /// `X-Forwarded-Host: example.com` (picked like [`ProtoHeader::XForwardedProto`]).
    XForwardedHost,
    /// The `host=` parameter of `Forwarded` (picked like [`ProtoHeader::Forwarded`]).
    Forwarded,
}

/// The networks whose connections may tell who the client is, and the headers they tell it
/// in. Add it to the application with [`App::with_state`](crate::App::with_state).
///
/// ```
/// use peregrine::proxy::{ForwardedHeader, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// let app = || App::new()
///     .route("/ip", get(|req: Request| async move { req.client_addr().to_string() }))
///     .with_state(TrustedProxies::new(["10.0.0.0/8"]).unwrap().client_ip_from(ForwardedHeader::XForwardedFor));
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
    client_ip: Option<ForwardedHeader>,
    proto: Option<ProtoHeader>,
    host: Option<HostHeader>,
}

/// Who sent the request, after trusted proxies are accounted for.
///
/// ```
/// use peregrine::proxy::{client_info, ForwardedHeader, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// async fn audit(req: Request) -> String {
///     let who = client_info(&req);
///     let how = if who.forwarded { "via proxy" } else { "direct" };
///     format!("{} ({how})", who.addr)
/// }
///
/// let trust = TrustedProxies::new(["127.0.0.1"]).unwrap().client_ip_from(ForwardedHeader::XForwardedFor);
/// let client = App::new().route("/audit", get(audit)).with_state(trust).test();
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
    /// The scheme the client used, when a trusted proxy said so in the header named with
    /// [`TrustedProxies::proto_from`] (`None`: not said, or not believed).
    pub scheme: Option<Scheme>,
    /// Whether the address came from a forwarding header rather than the socket.
    pub forwarded: bool,
}

/// Where the client's hop sits in the address header: index and list length, so that a
/// companion list as long can be read at the same place.
type HopAt = Option<(usize, usize)>;

impl TrustedProxies {
    /// Trusts these networks (`"10.0.0.0/8"`, `"2001:db8::/32"`) or single addresses
    /// (`"127.0.0.1"`), and **believes no header yet**: name the one your proxy sets with
    /// [`client_ip_from`](Self::client_ip_from) (and [`proto_from`](Self::proto_from),
    /// [`host_from`](Self::host_from)). Until then the peer is the client.
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
        Ok(TrustedProxies {
            nets,
            ..TrustedProxies::default()
        })
    }

    /// Takes the client's address from `header` (and from no other) on connections from the
    /// trusted networks.
    ///
    /// ```
    /// use peregrine::proxy::{ForwardedHeader, TrustedProxies};
    /// use peregrine::{get, App, Request};
    ///
    /// // HAProxy with `option forwarded`, which appends RFC 7239 `Forwarded`.
    /// let trust = TrustedProxies::new(["127.0.0.1"]).unwrap().client_ip_from(ForwardedHeader::Forwarded);
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { req.client_addr().to_string() }))
    ///     .with_state(trust)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("forwarded", r#"for="[2001:db8::17]:4711""#).send().await;
    /// assert_eq!(res.text(), "2001:db8::17");
    /// // Not the named header: not read.
    /// let res = client.get("/").header("x-forwarded-for", "203.0.113.9").send().await;
    /// assert_eq!(res.text(), "127.0.0.1");
    /// # });
    /// ```
    pub fn client_ip_from(mut self, header: ForwardedHeader) -> Self {
        self.client_ip = Some(header);
        self
    }

    /// Takes the client's scheme ([`ClientInfo::scheme`]) from `header` on connections from
    /// the trusted networks. Name it only if the proxy always sets it: one that passes the
    /// client's copy through makes it the client's claim.
    ///
    /// ```
    /// use peregrine::proxy::{client_info, ProtoHeader, Scheme, TrustedProxies};
    /// use peregrine::{get, App, Request};
    ///
    /// let trust = TrustedProxies::new(["127.0.0.1"]).unwrap().proto_from(ProtoHeader::XForwardedProto);
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { format!("{:?}", client_info(&req).scheme) }))
    ///     .with_state(trust)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").header("x-forwarded-proto", "https").send().await.text(), "Some(Https)");
    /// // `proto=` of a `Forwarded` header is not the named header.
    /// assert_eq!(client.get("/").header("forwarded", "proto=https").send().await.text(), "None");
    /// # });
    /// ```
    pub fn proto_from(mut self, header: ProtoHeader) -> Self {
        self.proto = Some(header);
        self
    }

    /// Takes the host the client asked for ([`TrustedProxies::host`], [`client_host`]) from
    /// `header` on connections from the trusted networks.
    ///
    /// ```
    /// use peregrine::proxy::{client_host, HostHeader, TrustedProxies};
    /// use peregrine::{get, App, Request};
    ///
    /// let trust = TrustedProxies::new(["127.0.0.1"]).unwrap().host_from(HostHeader::XForwardedHost);
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { format!("{:?}", client_host(&req)) }))
    ///     .with_state(trust)
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("x-forwarded-host", "shop.example:8443").send().await;
    /// assert_eq!(res.text(), r#"Some("shop.example:8443")"#);
    /// # });
    /// ```
    pub fn host_from(mut self, header: HostHeader) -> Self {
        self.host = Some(header);
        self
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
    /// use peregrine::proxy::{ForwardedHeader, TrustedProxies};
    /// use peregrine::{get, App, Request};
    /// use std::sync::Arc;
    ///
    /// let internal_lb = Arc::new(
    ///     TrustedProxies::new(["127.0.0.0/8"]).unwrap().client_ip_from(ForwardedHeader::XForwardedFor),
    /// );
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
        let mut info = ClientInfo {
            addr: peer,
            scheme: None,
            forwarded: false,
        };
        if !self.contains(peer) {
            return info;
        }
        let mut at: HopAt = None;
        if let Some((addr, hop)) = self.client_ip.and_then(|h| self.walk(req, h)) {
            info.addr = addr;
            info.forwarded = true;
            at = Some(hop);
        }
        info.scheme = match self.proto {
            Some(ProtoHeader::XForwardedProto) => joined(req, "x-forwarded-proto")
                .and_then(|v| pick(&items(&v), at).and_then(|s| parse_scheme(s))),
            Some(ProtoHeader::Forwarded) => forwarded_elements(req).and_then(|els| {
                let protos: Vec<Option<&str>> = els.iter().map(|e| e.proto.as_deref()).collect();
                pick(&protos, at).copied().flatten().and_then(parse_scheme)
            }),
            None => None,
        };
        info
    }

    /// The host the client asked for, as the proxy forwarded it in the header named with
    /// [`host_from`](Self::host_from); `None` when none is named, the peer is not trusted, or
    /// the value is not a plain host (`name`, `name:port`, `[v6]:port`; lower-cased).
    ///
    /// ```
    /// use peregrine::proxy::{HostHeader, TrustedProxies};
    /// use peregrine::{get, App, Request};
    /// use std::sync::Arc;
    ///
    /// let trust = Arc::new(TrustedProxies::new(["127.0.0.1"]).unwrap().host_from(HostHeader::Forwarded));
    /// let client = App::new()
    ///     .route("/", get(move |req: Request| {
    ///         let host = trust.host(&req).unwrap_or_default();
    ///         async move { host }
    ///     }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("forwarded", "host=Shop.Example;proto=https").send().await;
    /// assert_eq!(res.text(), "shop.example");
    /// # });
    /// ```
    pub fn host(&self, req: &Request) -> Option<String> {
        let header = self.host?;
        if !self.contains(req.peer_addr().ip()) {
            return None;
        }
        let at = self
            .client_ip
            .and_then(|h| self.walk(req, h))
            .map(|(_, hop)| hop);
        match header {
            HostHeader::XForwardedHost => {
                let v = joined(req, "x-forwarded-host")?;
                pick(&items(&v), at).and_then(|h| parse_host(h))
            }
            HostHeader::Forwarded => {
                let els = forwarded_elements(req)?;
                let hosts: Vec<Option<&str>> = els.iter().map(|e| e.host.as_deref()).collect();
                pick(&hosts, at).copied().flatten().and_then(parse_host)
            }
        }
    }

    /// The client's address from `header` and where its hop is; `None` when the header is
    /// absent or malformed.
    fn walk(&self, req: &Request, header: ForwardedHeader) -> Option<(IpAddr, (usize, usize))> {
        match header {
            ForwardedHeader::XRealIp => {
                let addr = parse_node(&single(req, "x-real-ip")?)?;
                Some((addr, (0, 1)))
            }
            ForwardedHeader::XForwardedFor => {
                let list = joined(req, "x-forwarded-for")?;
                let hops = items(&list);
                self.rightmost_untrusted(hops.len(), |i| parse_node(hops[i]))
            }
            ForwardedHeader::Forwarded => {
                let els = forwarded_elements(req)?;
                self.rightmost_untrusted(els.len(), |i| els[i].addr)
            }
        }
    }

    /// From the right of a list of `len` hops, the first address not trusted (else the
    /// left-most). Entries left of it are never looked at: they are the client's own words,
    /// and garbage there must not turn the client into its proxy. An entry on the way that
    /// is not an address (`unknown`, obfuscated, garbage) makes the whole header unusable.
    fn rightmost_untrusted(
        &self,
        len: usize,
        addr_at: impl Fn(usize) -> Option<IpAddr>,
    ) -> Option<(IpAddr, (usize, usize))> {
        for i in (0..len).rev() {
            let addr = addr_at(i)?;
            if i == 0 || !self.contains(addr) {
                return Some((addr, (i, len)));
            }
        }
        None
    }
}

/// The companion value for the client's hop: the one at the same place when the companion
/// list is exactly as long as the address list, else the right-most (the nearest proxy's).
fn pick<T>(values: &[T], at: HopAt) -> Option<&T> {
    match at {
        Some((i, len)) if values.len() == len => values.get(i),
        _ => values.last(),
    }
}

/// The client of `req`: resolved through the application's [`TrustedProxies`] if it has one.
///
/// ```
/// use peregrine::proxy::{client_info, ForwardedHeader, ProtoHeader, Scheme, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// async fn who(req: Request) -> String {
///     let client = client_info(&req);
///     let https = client.scheme == Some(Scheme::Https);
///     format!("{} https={https} forwarded={}", client.addr, client.forwarded)
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let trust = TrustedProxies::new(["127.0.0.1"])
///     .unwrap()
///     .client_ip_from(ForwardedHeader::XForwardedFor)
///     .proto_from(ProtoHeader::XForwardedProto);
/// let app = App::new().route("/who", get(who)).with_state(trust);
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
    match req.ctx.states.get::<TrustedProxies>() {
        Some(t) => t.resolve(req),
        None => ClientInfo {
            addr: req.peer_addr().ip().to_canonical(),
            scheme: None,
            forwarded: false,
        },
    }
}

/// The host the client asked for, through the application's [`TrustedProxies`] (see
/// [`TrustedProxies::host`]); `None` without one.
///
/// ```
/// use peregrine::proxy::{client_host, HostHeader, TrustedProxies};
/// use peregrine::{get, App, Request};
///
/// let client = App::new()
///     .route("/", get(|req: Request| async move { client_host(&req).unwrap_or_else(|| "-".into()) }))
///     .with_state(TrustedProxies::new(["10.0.0.0/8"]).unwrap().host_from(HostHeader::XForwardedHost))
///     .test(); // from 127.0.0.1: not a trusted proxy
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/").header("x-forwarded-host", "evil.example").send().await.text(), "-");
/// # });
/// ```
pub fn client_host(req: &Request) -> Option<String> {
    req.ctx.states.get::<TrustedProxies>()?.host(req)
}

#[cfg(test)]
mod tests;
