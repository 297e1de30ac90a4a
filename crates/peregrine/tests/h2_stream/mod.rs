//! The client's side of an HTTP/2 stream as a byte stream, for running a WebSocket client
//! (tokio-tungstenite) on an RFC 8441 extended CONNECT stream (tests `ws_h2`,
//! `scenarios_protocols`, `ws_shutdown`), the client connection that carries it, and the
//! extended CONNECT that opens one.

use bytes::{Buf, Bytes};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

/// The client's side of an HTTP/2 stream as a byte stream (what tungstenite runs on).
pub struct ClientStream {
    pub recv: h2::RecvStream,
    pub send: h2::SendStream<Bytes>,
    pub pending: Bytes,
}

impl AsyncRead for ClientStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(out.remaining());
                out.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            match ready!(self.recv.poll_data(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.pending = data;
                }
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
            }
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.send.reserve_capacity(buf.len());
        match ready!(self.send.poll_capacity(cx)) {
            Some(Ok(n)) => {
                let n = n.min(buf.len());
                self.send
                    .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                    .map_err(io::Error::other)?;
                Poll::Ready(Ok(n))
            }
            Some(Err(e)) => Poll::Ready(Err(io::Error::other(e))),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = self.send.send_data(Bytes::new(), true);
        Poll::Ready(Ok(()))
    }
}

/// An HTTP/2 client connection over `io` whose server announced extended CONNECT
/// (`SETTINGS_ENABLE_CONNECT_PROTOCOL`); the connection runs in a task of its own.
pub async fn h2_client<IO>(io: IO) -> h2::client::SendRequest<Bytes>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.unwrap();
    // The server's SETTINGS are applied by the connection task, shortly after the handshake.
    for _ in 0..100 {
        if send.is_extended_connect_protocol_enabled() {
            return send;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        send = send.ready().await.unwrap();
    }
    panic!("the server did not announce SETTINGS_ENABLE_CONNECT_PROTOCOL");
}

/// Sends `CONNECT` with `:protocol` (and `Sec-WebSocket-Version: 13`) to `path`: the
/// response's status, and the stream if it was accepted.
// Used by the ws tests, not by every test that includes this module.
#[allow(dead_code)]
pub async fn extended_connect(
    send: &mut h2::client::SendRequest<Bytes>,
    addr: std::net::SocketAddr,
    path: &str,
    protocol: &'static str,
) -> (u16, Option<ClientStream>) {
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://{addr}{path}"))
        .header("sec-websocket-version", "13")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static(protocol));
    let (resp, stream) = send.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .unwrap()
        .unwrap();
    let status = resp.status().as_u16();
    assert!(
        !resp.headers().contains_key("sec-websocket-accept"),
        "no key exchange over HTTP/2"
    );
    if status != 200 {
        return (status, None);
    }
    let recv = resp.into_body();
    (
        status,
        Some(ClientStream {
            recv,
            send: stream,
            pending: Bytes::new(),
        }),
    )
}

/// A WebSocket session (tokio-tungstenite's client) on an accepted extended CONNECT to `path`.
#[allow(dead_code)]
pub async fn open_ws(
    send: &mut h2::client::SendRequest<Bytes>,
    addr: std::net::SocketAddr,
    path: &str,
) -> WebSocketStream<ClientStream> {
    let (status, stream) = extended_connect(send, addr, path, "websocket").await;
    assert_eq!(status, 200);
    WebSocketStream::from_raw_socket(stream.unwrap(), Role::Client, None).await
}
