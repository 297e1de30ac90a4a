//! An open WebSocket: messages both ways through tokio-tungstenite, close frames, and the errors
//! a connection can end with (a broken rule is answered with its RFC 6455 close code).

use super::config::WsConfig;
use bytes::Bytes;
use futures_util::future::{select, Either};
use futures_util::{SinkExt, StreamExt};
use peregrine_server::upgrade::{ShutdownSignal, Upgraded};
use std::future::Future;
use std::time::Duration;
use tokio_tungstenite::tungstenite::{
    self,
    protocol::{frame::coding::CloseCode, CloseFrame as TCloseFrame, Role},
};
use tokio_tungstenite::WebSocketStream;

/// A close frame: code (RFC 6455 §7.4) and reason.
///
/// ```
/// use peregrine::ws::{CloseFrame, Message};
///
/// /// Why the peer left, for the log.
/// fn describe(msg: &Message) -> String {
///     match msg {
///         Message::Close(Some(CloseFrame { code: 1001, .. })) => "going away".into(),
///         Message::Close(Some(CloseFrame { code, reason })) => format!("closed {code}: {reason}"),
///         Message::Close(None) => "closed without a code".into(),
///         _ => "still open".into(),
///     }
/// }
/// let frame = CloseFrame { code: 1008, reason: "spam".into() };
/// assert_eq!(describe(&Message::Close(Some(frame))), "closed 1008: spam");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseFrame {
    /// Status code, e.g. 1000 (normal), 1001 (going away), 1008 (policy).
    pub code: u16,
    /// Reason, at most 123 bytes of UTF-8.
    pub reason: String,
}

/// A WebSocket message.
///
/// ```
/// use bytes::Bytes;
/// use peregrine::ws::Message;
///
/// /// The payload size of a data message (control frames count as none).
/// fn payload_len(m: &Message) -> usize {
///     match m {
///         Message::Text(t) => t.len(),
///         Message::Binary(b) => b.len(),
///         Message::Ping(_) | Message::Pong(_) | Message::Close(_) => 0,
///     }
/// }
/// assert_eq!(payload_len(&Message::Text("héllo".into())), 6);
/// assert_eq!(payload_len(&Message::Binary(Bytes::from_static(&[1, 2, 3]))), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A text message (valid UTF-8).
    Text(String),
    /// A binary message.
    Binary(Bytes),
    /// A ping; the pong is sent automatically.
    Ping(Bytes),
    /// A pong.
    Pong(Bytes),
    /// The peer's close frame; the reply is sent automatically.
    Close(Option<CloseFrame>),
}

/// Why a WebSocket operation failed.
///
/// ```
/// use peregrine::ws::WsError;
///
/// /// The close code the server sent for an error `recv` returned.
/// fn close_code(e: &WsError) -> Option<u16> {
///     match e {
///         WsError::TooLarge => Some(1009),
///         WsError::InvalidUtf8 => Some(1007),
///         WsError::Protocol(_) => Some(1002),
///         WsError::Closed | WsError::Io(_) => None,
///     }
/// }
/// assert_eq!(close_code(&WsError::TooLarge), Some(1009));
/// assert_eq!(WsError::InvalidUtf8.to_string(), "WebSocket text is not UTF-8");
/// ```
#[derive(Debug)]
pub enum WsError {
    /// The connection is closed (after the close handshake, or the peer went away).
    Closed,
    /// A message or frame over the limit: closed with 1009.
    TooLarge,
    /// A text message or close reason that is not UTF-8: closed with 1007.
    InvalidUtf8,
    /// The peer broke the protocol: closed with 1002.
    Protocol(String),
    /// The transport failed.
    Io(std::io::Error),
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WsError::Closed => f.write_str("WebSocket closed"),
            WsError::TooLarge => f.write_str("WebSocket message too large"),
            WsError::InvalidUtf8 => f.write_str("WebSocket text is not UTF-8"),
            WsError::Protocol(p) => write!(f, "WebSocket protocol error: {p}"),
            WsError::Io(e) => write!(f, "WebSocket I/O error: {e}"),
        }
    }
}

impl std::error::Error for WsError {}

/// An open WebSocket connection.
///
/// ```
/// use peregrine::ws::{Message, WebSocket, WsError};
///
/// /// Answers each text message in upper case; a protocol error has already closed the
/// /// connection with its code (1002, 1007, 1009) when `recv` returns it.
/// async fn shout(mut ws: WebSocket) {
///     while let Some(msg) = ws.recv().await {
///         match msg {
///             Ok(Message::Text(t)) if t == "bye" => {
///                 let _ = ws.close(1000, "bye").await; // the close handshake
///                 return;
///             }
///             Ok(Message::Text(t)) => {
///                 if ws.send(Message::Text(t.to_uppercase())).await.is_err() {
///                     return; // the client went away
///                 }
///             }
///             Ok(_) => {} // binary, and pings (already answered)
///             Err(WsError::TooLarge) => return, // closed with 1009
///             Err(e) => {
///                 tracing::debug!(error = %e, "websocket ended");
///                 return;
///             }
///         }
///     }
/// }
/// # async fn route(req: peregrine::Request) -> Result<peregrine::Response, peregrine::Error> {
/// #     Ok(peregrine::ws::WebSocketUpgrade::from_request(&req)?.on_upgrade(shout))
/// # }
/// # let _ = peregrine::App::new().route("/shout", peregrine::get(route));
/// ```
pub struct WebSocket {
    inner: WebSocketStream<Upgraded>,
    protocol: Option<String>,
    shutdown: ShutdownSignal,
    /// The session was closed with 1001 at shutdown: `recv` has nothing more to give.
    gone_away: bool,
}

/// The code of the Close frame sent to open sessions at graceful shutdown (RFC 6455 §7.4.1).
pub const GOING_AWAY: u16 = 1001;

/// The reason sent with [`GOING_AWAY`].
pub const GOING_AWAY_REASON: &str = "server shutting down";

/// How long a closing session waits for the peer's Close once shutdown has started: a peer
/// that never answers must not hold the process until `shutdown_timeout`.
const CLOSE_REPLY_WAIT: Duration = Duration::from_secs(1);

impl WebSocket {
    /// Runs the server side of the WebSocket protocol on an upgraded connection (after the 101).
    pub async fn from_upgraded(io: Upgraded, config: WsConfig, protocol: Option<String>) -> Self {
        let shutdown = io.shutdown_signal();
        WebSocket {
            inner: WebSocketStream::from_raw_socket(io, Role::Server, Some(config.tungstenite()))
                .await,
            protocol,
            shutdown,
            gone_away: false,
        }
    }

    /// Resolves when the server's graceful shutdown starts (never for a socket no worker
    /// serves). It does not borrow the socket, so a handler that wants to send a last message
    /// before the session closes waits for it next to [`WebSocket::recv`], first:
    ///
    /// ```
    /// use peregrine::ws::{Message, WebSocket, GOING_AWAY, GOING_AWAY_REASON};
    ///
    /// async fn ticker(mut ws: WebSocket) {
    ///     let shutdown = ws.shutdown_started();
    ///     tokio::pin!(shutdown);
    ///     loop {
    ///         tokio::select! {
    ///             biased; // before `recv`, which would close the session with 1001 itself
    ///             () = &mut shutdown => {
    ///                 let _ = ws.send(Message::Text("reconnect elsewhere".into())).await;
    ///                 let _ = ws.close(GOING_AWAY, GOING_AWAY_REASON).await;
    ///                 return;
    ///             }
    ///             msg = ws.recv() => match msg {
    ///                 Some(Ok(Message::Text(t))) => {
    ///                     let _ = ws.send(Message::Text(t)).await;
    ///                 }
    ///                 Some(Ok(_)) => {}
    ///                 Some(Err(_)) | None => return,
    ///             },
    ///         }
    ///     }
    /// }
    /// # async fn route(req: peregrine::Request) -> Result<peregrine::Response, peregrine::Error> {
    /// #     Ok(peregrine::ws::WebSocketUpgrade::from_request(&req)?.on_upgrade(ticker))
    /// # }
    /// # let _ = peregrine::App::new().route("/ticker", peregrine::get(route));
    /// ```
    pub fn shutdown_started(&self) -> impl Future<Output = ()> + 'static {
        let signal = self.shutdown.clone();
        async move { signal.started().await }
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// The next message; `None` once the connection is closed. Pings are answered and close
    /// frames replied to automatically (both are still returned). A broken rule closes the
    /// connection with its close code and returns the error once.
    ///
    /// When the server's graceful shutdown starts (SIGTERM, [`crate::ServerHandle::shutdown`],
    /// the end of `run_until`), a waiting `recv` sends Close [`GOING_AWAY`] (1001) with
    /// [`GOING_AWAY_REASON`], waits for the peer's Close (at most a second), and returns that
    /// 1001 frame as `Message::Close`; `None` after it. The session is closed by then: to send
    /// a last message first, see [`WebSocket::shutdown_started`].
    pub async fn recv(&mut self) -> Option<Result<Message, WsError>> {
        if self.gone_away {
            return None;
        }
        let shutdown = self.shutdown.clone();
        let started = std::pin::pin!(shutdown.started());
        // Messages already received are delivered before the session is closed.
        let next = match select(self.inner.next(), started).await {
            Either::Left((next, _)) => next?,
            Either::Right(((), _)) => return self.go_away().await,
        };
        match next {
            Ok(msg) => Some(Ok(from_tungstenite(msg)?)),
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => None,
            Err(e) => {
                let (code, err) = match e {
                    tungstenite::Error::Capacity(_) => (1009, WsError::TooLarge),
                    tungstenite::Error::Utf8(_) => (1007, WsError::InvalidUtf8),
                    tungstenite::Error::Protocol(p) => (1002, WsError::Protocol(p.to_string())),
                    tungstenite::Error::Io(io) => return Some(Err(WsError::Io(io))),
                    other => (1011, WsError::Protocol(other.to_string())),
                };
                let _ = self
                    .inner
                    .close(Some(TCloseFrame {
                        code: CloseCode::from(code),
                        reason: "".into(),
                    }))
                    .await;
                Some(Err(err))
            }
        }
    }

    /// Sends a message (and flushes it).
    ///
    /// A real server on a loopback port and a tokio-tungstenite client (the test client has no
    /// connection to switch):
    ///
    /// ```
    /// use futures_util::{SinkExt, StreamExt};
    /// use peregrine::ws::{Message, WebSocketUpgrade};
    /// use peregrine::{get, App, Error, Request, Response, ServerConfig};
    /// use tokio_tungstenite::tungstenite::Message as ClientMessage;
    ///
    /// async fn shout(req: Request) -> Result<Response, Error> {
    ///     Ok(WebSocketUpgrade::from_request(&req)?.on_upgrade(|mut ws| async move {
    ///         while let Some(Ok(Message::Text(t))) = ws.recv().await {
    ///             if ws.send(Message::Text(t.to_uppercase())).await.is_err() {
    ///                 break;
    ///             }
    ///         }
    ///     }))
    /// }
    ///
    /// let config = ServerConfig::builder().addr("127.0.0.1:0".parse().unwrap()).workers(1).build();
    /// let server = App::new().route("/shout", get(shout)).serve(config)?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let tcp = tokio::net::TcpStream::connect(server.local_addr()).await.unwrap();
    /// let (mut client, _) = tokio_tungstenite::client_async("ws://localhost/shout", tcp).await.unwrap();
    /// client.send(ClientMessage::text("hello")).await.unwrap();
    /// assert_eq!(client.next().await.unwrap().unwrap(), ClientMessage::text("HELLO"));
    /// client.close(None).await.unwrap();
    /// # });
    /// server.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send(&mut self, msg: Message) -> Result<(), WsError> {
        let msg = match msg {
            Message::Text(t) => tungstenite::Message::Text(t.into()),
            Message::Binary(b) => tungstenite::Message::Binary(b),
            Message::Ping(b) => tungstenite::Message::Ping(b),
            Message::Pong(b) => tungstenite::Message::Pong(b),
            Message::Close(c) => tungstenite::Message::Close(c.map(|c| TCloseFrame {
                code: CloseCode::from(c.code),
                reason: c.reason.into(),
            })),
        };
        self.inner.send(msg).await.map_err(map_send_error)
    }

    /// Starts the close handshake with `code` and `reason`, then waits (reading and dropping
    /// messages) for the peer's close frame.
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use peregrine::ws::WebSocketUpgrade;
    /// use peregrine::{get, App, Error, Request, Response, ServerConfig};
    /// use tokio_tungstenite::tungstenite::Message as ClientMessage;
    ///
    /// // Full: refuse politely after the handshake, with a code the client can act on.
    /// async fn room(req: Request) -> Result<Response, Error> {
    ///     Ok(WebSocketUpgrade::from_request(&req)?.on_upgrade(|ws| async move {
    ///         let _ = ws.close(1013, "room full, try later").await;
    ///     }))
    /// }
    ///
    /// let config = ServerConfig::builder().addr("127.0.0.1:0".parse().unwrap()).workers(1).build();
    /// let server = App::new().route("/room", get(room)).serve(config)?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let tcp = tokio::net::TcpStream::connect(server.local_addr()).await.unwrap();
    /// let (mut client, _) = tokio_tungstenite::client_async("ws://localhost/room", tcp).await.unwrap();
    /// let Some(Ok(ClientMessage::Close(Some(frame)))) = client.next().await else { panic!("no close frame") };
    /// assert_eq!((u16::from(frame.code), frame.reason.as_str()), (1013, "room full, try later"));
    /// # });
    /// server.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// Once the server's graceful shutdown has started, the wait for the peer's close frame
    /// lasts at most a second.
    pub async fn close(mut self, code: u16, reason: &str) -> Result<(), WsError> {
        self.send_close(code, reason).await?;
        self.await_peer_close().await;
        Ok(())
    }

    async fn send_close(&mut self, code: u16, reason: &str) -> Result<(), WsError> {
        let frame = TCloseFrame {
            code: CloseCode::from(code),
            reason: reason.to_string().into(),
        };
        self.inner.close(Some(frame)).await.map_err(map_send_error)
    }

    /// Reads (and drops) messages until the peer's close frame, or until [`CLOSE_REPLY_WAIT`]
    /// after shutdown started.
    async fn await_peer_close(&mut self) {
        let shutdown = self.shutdown.clone();
        let cutoff = std::pin::pin!(async move {
            shutdown.started().await;
            tokio::time::sleep(CLOSE_REPLY_WAIT).await;
        });
        let inner = &mut self.inner;
        let drained = std::pin::pin!(async move { while let Some(Ok(_)) = inner.next().await {} });
        select(drained, cutoff).await;
    }

    /// Closes the session with 1001 at shutdown; the frame sent, for `recv` to return.
    async fn go_away(&mut self) -> Option<Result<Message, WsError>> {
        self.gone_away = true;
        match self.send_close(GOING_AWAY, GOING_AWAY_REASON).await {
            Ok(()) => {}
            Err(WsError::Closed) => return None,
            Err(e) => return Some(Err(e)),
        }
        self.await_peer_close().await;
        Some(Ok(Message::Close(Some(CloseFrame {
            code: GOING_AWAY,
            reason: GOING_AWAY_REASON.into(),
        }))))
    }
}

fn map_send_error(e: tungstenite::Error) -> WsError {
    match e {
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => WsError::Closed,
        tungstenite::Error::Io(io) => WsError::Io(io),
        tungstenite::Error::Capacity(_) => WsError::TooLarge,
        other => WsError::Protocol(other.to_string()),
    }
}

fn from_tungstenite(msg: tungstenite::Message) -> Option<Message> {
    Some(match msg {
        tungstenite::Message::Text(t) => Message::Text(t.as_str().to_string()),
        tungstenite::Message::Binary(b) => Message::Binary(b),
        tungstenite::Message::Ping(b) => Message::Ping(b),
        tungstenite::Message::Pong(b) => Message::Pong(b),
        tungstenite::Message::Close(c) => Message::Close(c.map(|c| CloseFrame {
            code: u16::from(c.code),
            reason: c.reason.as_str().to_string(),
        })),
        // Raw frames are never produced while reading.
        tungstenite::Message::Frame(_) => return None,
    })
}

impl std::fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket")
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}
