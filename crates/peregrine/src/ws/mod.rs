//! WebSocket (RFC 6455) over an HTTP/1.1 `Upgrade`, or an HTTP/2 stream (RFC 8441 extended
//! CONNECT) with the same handler.
//!
//! ```no_run
//! use peregrine::ws::{Message, WebSocketUpgrade};
//! use peregrine::{get, App, Error, Request, Response};
//!
//! async fn echo(req: Request) -> Result<Response, Error> {
//!     let upgrade = WebSocketUpgrade::from_request(&req)?; // 400/426 if not a valid handshake
//!     Ok(upgrade.on_upgrade(|mut ws| async move {
//!         while let Some(Ok(msg)) = ws.recv().await {
//!             if let Message::Text(text) = msg {
//!                 if ws.send(Message::Text(text)).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         }
//!     }))
//! }
//! # let _ = App::new().route("/ws", get(echo));
//! ```
//!
//! Framing, masking, UTF-8 validation (also across fragments), control frames and the close
//! handshake are tokio-tungstenite's: it passes the Autobahn suite and validates text messages
//! incrementally, while fastwebsockets leaves fragment reassembly and UTF-8 checks of
//! fragmented messages to a separate wrapper and is tied to hyper's upgrade types. Errors are
//! answered with the close codes of RFC 6455 §7.4.1: 1007 for invalid UTF-8, 1009 for a message
//! or frame over the limit, 1002 for protocol violations.
//!
//! At graceful shutdown (SIGTERM, [`crate::ServerHandle::shutdown`], the end of
//! `run_until`), once the listeners close, every session waiting in [`WebSocket::recv`] is
//! closed with 1001 Going Away ([`GOING_AWAY`], [`GOING_AWAY_REASON`]), over HTTP/1.1 and over
//! HTTP/2 alike: `recv` sends the Close, waits for the client's (at most a second), returns the
//! 1001 frame as `Message::Close`, then `None`, so the handler ends and the process does not
//! wait out `shutdown_timeout`. A handler that has a last message to send waits for
//! [`WebSocket::shutdown_started`] next to `recv`, and closes the session itself.
//!
//! The opening handshake is in `handshake.rs` ([`WebSocketUpgrade`]), the limits a connection
//! gets in `config.rs` ([`WsConfig`]); the open connection, its messages and close frames in
//! `socket.rs`
//! ([`WebSocket`], [`Message`], [`CloseFrame`], [`WsError`]).

mod config;
mod handshake;
mod socket;

pub use config::WsConfig;
pub use handshake::WebSocketUpgrade;
pub use socket::{CloseFrame, Message, WebSocket, WsError, GOING_AWAY, GOING_AWAY_REASON};
