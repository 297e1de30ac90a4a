//! The opening handshake (RFC 6455 §4.2.1, or the extended CONNECT of HTTP/2 and HTTP/3): its
//! checks, the subprotocol choice, the limits a connection gets, and the `101` that switches.

use super::config::WsConfig;
use super::WebSocket;
use crate::{Error, Request};
use peregrine_server::upgrade::Upgraded;
use peregrine_server::{Method, Response, Version};
use std::borrow::Cow;
use tokio_tungstenite::tungstenite;

/// The WebSocket protocol version this server speaks (RFC 6455).
const VERSION: &str = "13";

/// A validated WebSocket opening handshake (RFC 6455 §4.2.1), ready to be accepted.
///
/// The test client shows the handshake's answer (it has no connection to switch, so the
/// WebSocket itself does not run there):
///
/// ```
/// use peregrine::ws::{Message, WebSocketUpgrade};
/// use peregrine::{get, App, Error, Request, Response};
///
/// async fn chat(req: Request) -> Result<Response, Error> {
///     Ok(WebSocketUpgrade::from_request(&req)?.on_upgrade(|mut ws| async move {
///         let _ = ws.send(Message::Text("hello".into())).await;
///     }))
/// }
///
/// let client = App::new().route("/chat", get(chat)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client
///     .get("/chat")
///     .header("upgrade", "websocket")
///     .header("connection", "Upgrade")
///     .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==") // RFC 6455's sample key
///     .header("sec-websocket-version", "13")
///     .send()
///     .await;
/// assert_eq!(res.status(), 101);
/// assert_eq!(res.header("sec-websocket-accept"), Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
/// // A plain GET is not a handshake: 426 Upgrade Required.
/// assert_eq!(client.get("/chat").send().await.status(), 426);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct WebSocketUpgrade {
    /// `Sec-WebSocket-Accept` (HTTP/1.1 only: RFC 8441 has no key exchange).
    accept: Option<String>,
    offered_protocols: Vec<String>,
    protocol: Option<String>,
    config: WsConfig,
}

/// Whether the comma-separated list in `value` contains `token` (ASCII case-insensitive).
fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A `Sec-WebSocket-Key` must be the base64 encoding of 16 bytes: 22 characters of the base64
/// alphabet (the last one carrying only 2 bits, so one of `AQgw`) and `==`.
fn valid_key(key: &[u8]) -> bool {
    let b64 = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    key.len() == 24
        && key[..22].iter().all(b64)
        && matches!(key[21], b'A' | b'Q' | b'g' | b'w')
        && &key[22..] == b"=="
}

impl WebSocketUpgrade {
    /// Validates the client's opening handshake: `GET` over HTTP/1.1, `Upgrade: websocket`,
    /// `Connection: upgrade`, a well-formed `Sec-WebSocket-Key`, and
    /// `Sec-WebSocket-Version: 13` (otherwise 426 with the version this server speaks).
    ///
    /// Over HTTP/2 the handshake is RFC 8441's extended CONNECT with `:protocol = websocket`,
    /// which the engine hands over as a `GET` with `Upgrade: websocket`: the same route and
    /// handler serve both; there is no key (nor `Connection`), `Sec-WebSocket-Version: 13` is
    /// still required, and the engine answers `200` and runs the WebSocket on the stream. Over
    /// HTTP/3 (RFC 9220) the same, where the engine serves it (`Http3Config::extended_connect`,
    /// feature `http3`; not yet for `websocket`, see docs/protocols.md).
    ///
    /// ```
    /// use peregrine::ws::WebSocketUpgrade;
    /// use peregrine::{get, App, Error, Request, Response};
    ///
    /// async fn ws(req: Request) -> Result<Response, Error> {
    ///     Ok(WebSocketUpgrade::from_request(&req)?.on_upgrade(|_ws| async {}))
    /// }
    ///
    /// let client = App::new().route("/ws", get(ws)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let old = client
    ///     .get("/ws")
    ///     .header("upgrade", "websocket")
    ///     .header("connection", "Upgrade")
    ///     .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    ///     .header("sec-websocket-version", "8")
    ///     .send()
    ///     .await;
    /// assert_eq!(old.status(), 426);
    /// assert_eq!(old.header("sec-websocket-version"), Some("13"));
    /// let bad_key = client
    ///     .get("/ws")
    ///     .header("upgrade", "websocket")
    ///     .header("connection", "Upgrade")
    ///     .header("sec-websocket-key", "not-a-key")
    ///     .header("sec-websocket-version", "13")
    ///     .send()
    ///     .await;
    /// assert_eq!(bad_key.status(), 400);
    /// # });
    /// ```
    pub fn from_request(req: &Request) -> Result<WebSocketUpgrade, Error> {
        Self::from_server_request(req.as_server_request())
    }

    /// [`WebSocketUpgrade::from_request`] on the engine's request type.
    pub fn from_server_request(req: &peregrine_server::Request) -> Result<WebSocketUpgrade, Error> {
        let bad = |detail: &'static str| Error::bad_request().with_detail(detail);
        if req.method_kind() != Method::Get {
            return Err(Error::new(405)
                .with_header("Allow", b"GET".as_slice())
                .with_detail("a WebSocket handshake is a GET request"));
        }
        // Over HTTP/2 and HTTP/3 the handshake is an extended CONNECT (RFC 8441, RFC 9220),
        // which the engine hands over as this GET with `Upgrade`, without key or `Connection`.
        let connect = matches!(req.version(), Version::Http2 | Version::Http3);
        if req.version() != Version::Http11 && !connect {
            return Err(bad(
                "a WebSocket handshake needs HTTP/1.1, HTTP/2 or HTTP/3",
            ));
        }
        if !req
            .header("upgrade")
            .is_some_and(|v| has_token(v, "websocket"))
        {
            return Err(Error::new(426)
                .with_header("Upgrade", b"websocket".as_slice())
                .with_detail("this resource needs a WebSocket upgrade"));
        }
        if !connect
            && !req
                .header("connection")
                .is_some_and(|v| has_token(v, "upgrade"))
        {
            return Err(bad("Connection must contain the upgrade token"));
        }
        if req.header("sec-websocket-version") != Some(VERSION.as_bytes()) {
            return Err(Error::new(426)
                .with_header("Sec-WebSocket-Version", VERSION.as_bytes())
                .with_detail("unsupported WebSocket version; this server speaks 13"));
        }
        let accept = if connect {
            None
        } else {
            let key = req
                .header("sec-websocket-key")
                .filter(|k| valid_key(k))
                .ok_or_else(|| bad("Sec-WebSocket-Key must be 16 bytes in base64"))?;
            // Only the first Sec-WebSocket-Key may be present (RFC 6455 §4.2.1 point 5).
            if req
                .headers()
                .filter(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-key"))
                .count()
                > 1
            {
                return Err(bad("more than one Sec-WebSocket-Key"));
            }
            Some(tungstenite::handshake::derive_accept_key(key))
        };
        let offered_protocols = req
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-protocol"))
            .flat_map(|(_, v)| v.split(|&b| b == b','))
            .filter_map(|p| std::str::from_utf8(p.trim_ascii()).ok())
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        Ok(WebSocketUpgrade {
            accept,
            offered_protocols,
            protocol: None,
            config: WsConfig::default(),
        })
    }

    /// Picks the first of the client's subprotocols (`Sec-WebSocket-Protocol`) that is in
    /// `supported`; none picked (and none sent back) if there is no match.
    ///
    /// ```
    /// use peregrine::ws::{Message, WebSocketUpgrade};
    /// use peregrine::{Error, Request, Response};
    ///
    /// async fn feed(req: Request) -> Result<Response, Error> {
    ///     let upgrade = WebSocketUpgrade::from_request(&req)?
    ///         .protocols(["feed.v2", "feed.v1"])
    ///         .max_message_size(16 * 1024);
    ///     Ok(upgrade.on_upgrade(|mut ws| async move {
    ///         // What the 101 (or the HTTP/2 200) told the client, if it offered one we speak.
    ///         let hello = match ws.protocol() {
    ///             Some("feed.v2") => r#"{"v":2}"#,
    ///             _ => "v1",
    ///         };
    ///         let _ = ws.send(Message::Text(hello.into())).await;
    ///     }))
    /// }
    /// # let _ = peregrine::App::new().route("/feed", peregrine::get(feed));
    /// ```
    pub fn protocols<I, P>(mut self, supported: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: AsRef<str>,
    {
        let supported: Vec<P> = supported.into_iter().collect();
        self.protocol = self
            .offered_protocols
            .iter()
            .find(|o| supported.iter().any(|s| s.as_ref() == o.as_str()))
            .cloned();
        self
    }

    /// The subprotocol chosen by [`WebSocketUpgrade::protocols`].
    ///
    /// ```
    /// use peregrine::ws::WebSocketUpgrade;
    /// use peregrine::{get, App, Error, Request, Response};
    ///
    /// // Refuse clients that speak none of our subprotocols.
    /// async fn rpc(req: Request) -> Result<Response, Error> {
    ///     let upgrade = WebSocketUpgrade::from_request(&req)?.protocols(["jsonrpc.v2"]);
    ///     if upgrade.protocol().is_none() {
    ///         return Err(Error::bad_request().with_detail("speak jsonrpc.v2"));
    ///     }
    ///     Ok(upgrade.on_upgrade(|_ws| async {}))
    /// }
    ///
    /// # fn handshake<'a>(client: &'a peregrine::TestClient, path: &'a str) -> peregrine::TestRequest<'a> {
    /// #     client.get(path).header("upgrade", "websocket").header("connection", "Upgrade")
    /// #         .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==").header("sec-websocket-version", "13")
    /// # }
    /// let client = App::new().route("/rpc", get(rpc)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let ok = handshake(&client, "/rpc").header("sec-websocket-protocol", "mqtt, jsonrpc.v2").send().await;
    /// assert_eq!((ok.status(), ok.header("sec-websocket-protocol")), (101, Some("jsonrpc.v2")));
    /// assert_eq!(handshake(&client, "/rpc").header("sec-websocket-protocol", "mqtt").send().await.status(), 400);
    /// # });
    /// ```
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Largest message accepted (default 1 MiB); larger → close 1009.
    ///
    /// ```
    /// use peregrine::ws::WebSocketUpgrade;
    /// use peregrine::{get, App, Error, Request, Response};
    ///
    /// async fn telemetry(req: Request) -> Result<Response, Error> {
    ///     let upgrade = WebSocketUpgrade::from_request(&req)?.max_message_size(64 * 1024).max_frame_size(16 * 1024);
    ///     let limits = upgrade.config();
    ///     assert_eq!((limits.max_message_size, limits.max_frame_size), (65_536, 16_384));
    ///     Ok(upgrade.on_upgrade(|_ws| async {}))
    /// }
    ///
    /// # fn handshake<'a>(client: &'a peregrine::TestClient, path: &'a str) -> peregrine::TestRequest<'a> {
    /// #     client.get(path).header("upgrade", "websocket").header("connection", "Upgrade")
    /// #         .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==").header("sec-websocket-version", "13")
    /// # }
    /// let client = App::new().route("/telemetry", get(telemetry)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(handshake(&client, "/telemetry").send().await.status(), 101);
    /// # });
    /// ```
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.config.max_message_size = bytes;
        self
    }

    /// Largest frame accepted (default 1 MiB); larger → close 1009.
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.config.max_frame_size = bytes;
        self
    }

    /// The limits in force.
    pub fn config(&self) -> WsConfig {
        self.config
    }

    /// Accepts the handshake: the `101 Switching Protocols` response, after which the engine
    /// runs `handler` with the open [`WebSocket`] on the connection's worker. The connection
    /// closes when `handler` returns.
    ///
    /// To refuse a handshake, answer something else instead (an [`Error`], say). The status of
    /// the accepting response must stay 101: any other (a `with_status(403)` by a middleware,
    /// say) refuses it too, and a refusal is an ordinary response: sent without a body and
    /// without the fields that accept the switch (`Upgrade`, `Connection: upgrade`,
    /// `Sec-WebSocket-Accept`, the chosen `Sec-WebSocket-Protocol`); `handler` never runs (see
    /// [`ResponseBody::Upgrade`](peregrine_server::ResponseBody::Upgrade)).
    ///
    /// ```
    /// use peregrine::ws::{Message, WebSocketUpgrade};
    /// use peregrine::{Error, Request, Response};
    ///
    /// async fn members_only(req: Request) -> Result<Response, Error> {
    ///     let upgrade = WebSocketUpgrade::from_request(&req)?;
    ///     if req.cookie("member").is_none() {
    ///         return Err(Error::new(403).with_detail("members only"));
    ///     }
    ///     Ok(upgrade.on_upgrade(|mut ws| async move {
    ///         let _ = ws.send(Message::Text("welcome".into())).await;
    ///     }))
    /// }
    /// # let _ = peregrine::App::new().route("/ws", peregrine::get(members_only));
    /// ```
    pub fn on_upgrade<F, Fut>(self, handler: F) -> Response
    where
        F: FnOnce(WebSocket) -> Fut + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let config = self.config;
        let protocol = self.protocol.clone();
        let run: peregrine_server::upgrade::OnUpgrade = Box::new(move |io: Upgraded| {
            Box::pin(async move {
                let ws = WebSocket::from_upgraded(io, config, protocol).await;
                handler(ws).await;
            })
        });
        self.response()
            .with_body(peregrine_server::ResponseBody::Upgrade(run))
    }

    /// The `101 Switching Protocols` response accepting this handshake (without the callback
    /// that runs the connection; see [`WebSocketUpgrade::on_upgrade`]).
    ///
    /// ```
    /// use peregrine::ws::WebSocketUpgrade;
    /// use peregrine::{get, App, Error, Request, Response};
    ///
    /// async fn inspect(req: Request) -> Result<Response, Error> {
    ///     let upgrade = WebSocketUpgrade::from_request(&req)?;
    ///     let head = upgrade.response();
    ///     assert_eq!(head.status, 101);
    ///     assert!(head.headers.iter().any(|(n, v)| n == "Sec-WebSocket-Accept" && &v[..] == b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
    ///     Ok(upgrade.on_upgrade(|_ws| async {}))
    /// }
    ///
    /// # fn handshake<'a>(client: &'a peregrine::TestClient, path: &'a str) -> peregrine::TestRequest<'a> {
    /// #     client.get(path).header("upgrade", "websocket").header("connection", "Upgrade")
    /// #         .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==").header("sec-websocket-version", "13")
    /// # }
    /// let client = App::new().route("/ws", get(inspect)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(handshake(&client, "/ws").send().await.status(), 101);
    /// # });
    /// ```
    pub fn response(&self) -> Response {
        // Over HTTP/2 the engine sends this as `200` without the connection-specific fields.
        let mut res = Response::new(101)
            .with_header("Upgrade", b"websocket".as_slice())
            .with_header("Connection", b"Upgrade".as_slice());
        if let Some(accept) = &self.accept {
            res = res.with_header(
                "Sec-WebSocket-Accept",
                Cow::Owned(accept.clone().into_bytes()),
            );
        }
        if let Some(p) = &self.protocol {
            res = res.with_header("Sec-WebSocket-Protocol", Cow::Owned(p.clone().into_bytes()));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(extra: &str) -> peregrine_server::Request {
        let raw = format!("GET /ws HTTP/1.1\r\nHost: a\r\n{extra}\r\n");
        peregrine_server::Request::from_bytes(raw.as_bytes(), "127.0.0.1:1".parse().unwrap())
            .unwrap()
    }

    const GOOD: &str = "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

    #[test]
    fn the_rfc_example_key_gives_the_rfc_accept_value() {
        let up = WebSocketUpgrade::from_server_request(&req(GOOD)).unwrap();
        let res = up.response();
        assert_eq!(res.status, 101);
        let accept = res
            .headers
            .iter()
            .find(|(n, _)| n == "Sec-WebSocket-Accept")
            .unwrap();
        // RFC 6455 §1.3.
        assert_eq!(&*accept.1, b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn invalid_handshakes_get_the_rfc_answers() {
        let status = |extra: &str| {
            WebSocketUpgrade::from_server_request(&req(extra))
                .unwrap_err()
                .status()
        };
        assert_eq!(status("Connection: Upgrade\r\n"), 426); // no Upgrade header
        assert_eq!(status(&GOOD.replace("websocket", "h2c")), 426);
        assert_eq!(
            status(&GOOD.replace("keep-alive, Upgrade", "keep-alive")),
            400
        );
        let v8 = GOOD.replace("Version: 13", "Version: 8");
        let err = WebSocketUpgrade::from_server_request(&req(&v8)).unwrap_err();
        assert_eq!(err.status(), 426);
        for bad_key in [
            "short==",
            "dGhlIHNhbXBsZSBub25jZR==",
            "dGhlIHNhbXBsZSBub25jZQ=A",
        ] {
            let r = GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", bad_key);
            assert_eq!(status(&r), 400, "{bad_key}");
        }
        let twice = format!("{GOOD}Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n");
        assert_eq!(status(&twice), 400);
        let post = peregrine_server::Request::from_bytes(
            format!("POST /ws HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n{GOOD}\r\n").as_bytes(),
            "127.0.0.1:1".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(
            WebSocketUpgrade::from_server_request(&post)
                .unwrap_err()
                .status(),
            405
        );
    }

    #[test]
    fn subprotocols_pick_the_clients_first_supported_one() {
        let r = req(&format!(
            "{GOOD}Sec-WebSocket-Protocol: chat.v2, chat.v1\r\nSec-WebSocket-Protocol: json\r\n"
        ));
        let up = WebSocketUpgrade::from_server_request(&r)
            .unwrap()
            .protocols(["json", "chat.v1"]);
        assert_eq!(up.protocol(), Some("chat.v1"));
        let res = up.response();
        assert!(res
            .headers
            .iter()
            .any(|(n, v)| n == "Sec-WebSocket-Protocol" && &**v == b"chat.v1"));
        let none = WebSocketUpgrade::from_server_request(&r)
            .unwrap()
            .protocols(["mqtt"]);
        assert_eq!(none.protocol(), None);
        assert!(!none
            .response()
            .headers
            .iter()
            .any(|(n, _)| n == "Sec-WebSocket-Protocol"));
    }
}
