//! The client side of a cell: a connection of the cell's transport (plain or TLS, HTTP/1.1 or
//! HTTP/2) and one exchange on it, read into a [`Reply`] that keeps the framing the server
//! chose (`Content-Length`, chunked) next to the bytes.

use super::table::Transport;
use crate::h2_stream::h2_client;
use crate::tls_support::{client_config, Ca};
use bytes::Bytes;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

/// How long one read may wait before the cell fails (a hang is a failure, not a stuck test).
pub const WAIT: Duration = Duration::from_secs(5);

/// A byte stream to the server: TCP, or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
pub type BoxIo = Pin<Box<dyn Io>>;

/// Where a cell connects: the server's address, and the CA its certificate chains to.
pub struct Target<'a> {
    pub transport: Transport,
    pub addr: SocketAddr,
    pub ca: &'a Ca,
}

/// One response as received.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// HTTP/1.1 `Transfer-Encoding: chunked` (never on HTTP/2).
    pub chunked: bool,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }
}

/// A request: method, path, extra fields, body.
pub struct Req<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Bytes,
}

impl Req<'_> {
    pub fn get(path: &str) -> Req<'_> {
        Req {
            method: "GET",
            path,
            headers: &[],
            body: Bytes::new(),
        }
    }
}

pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A byte stream of the target's transport: TLS offers `h2` for the HTTP/2 transport and only
/// `http/1.1` for the HTTP/1.1 one, and the protocol the server picked must be that one.
pub async fn connect(t: &Target<'_>) -> Result<BoxIo, String> {
    let tcp = TcpStream::connect(t.addr).await.map_err(err)?;
    if !t.transport.tls() {
        return Ok(Box::pin(tcp));
    }
    let alpn: &[&[u8]] = if t.transport.h2() {
        &[b"h2"]
    } else {
        &[b"http/1.1"]
    };
    let config = client_config(t.ca, alpn, &[&rustls::version::TLS13], None);
    let tls = tokio::time::timeout(
        WAIT,
        TlsConnector::from(config).connect(ServerName::try_from("localhost").unwrap(), tcp),
    )
    .await
    .map_err(|_| "TLS handshake timed out".to_string())?
    .map_err(|e| format!("TLS handshake: {e}"))?;
    let picked = tls.get_ref().1.alpn_protocol().unwrap_or_default().to_vec();
    if picked != alpn[0] {
        return Err(format!(
            "ALPN picked {:?}, wanted {:?}",
            String::from_utf8_lossy(&picked),
            String::from_utf8_lossy(alpn[0])
        ));
    }
    Ok(Box::pin(tls))
}

/// An HTTP/2 connection (h2c with prior knowledge, or TLS with ALPN `h2`).
pub async fn h2_connect(t: &Target<'_>) -> Result<h2::client::SendRequest<Bytes>, String> {
    let io = connect(t).await?;
    tokio::time::timeout(WAIT, h2_client(io))
        .await
        .map_err(|_| "HTTP/2 handshake timed out".to_string())
}

/// One exchange on a fresh connection of the target's transport.
pub async fn exchange(t: &Target<'_>, req: &Req<'_>) -> Result<Reply, String> {
    if t.transport.h2() {
        let mut send = h2_connect(t).await?;
        let (resp, _stream) = h2_send(&mut send, req).await?;
        h2_collect(resp, req.method == "HEAD", |_| false).await
    } else {
        let mut io = connect(t).await?;
        h1_send(&mut io, req).await?;
        h1_read(&mut io, req.method == "HEAD", |_| false).await
    }
}

/// Sends `req` on an HTTP/2 connection: the response head and the request's stream.
pub async fn h2_send(
    send: &mut h2::client::SendRequest<Bytes>,
    req: &Req<'_>,
) -> Result<(http::Response<h2::RecvStream>, h2::SendStream<Bytes>), String> {
    let mut b = http::Request::builder()
        .method(req.method)
        .uri(format!("https://localhost{}", req.path));
    for (n, v) in req.headers {
        b = b.header(*n, *v);
    }
    let request = b.body(()).map_err(err)?;
    let end = req.body.is_empty();
    let (resp, mut stream) = send.send_request(request, end).map_err(err)?;
    if !end {
        // h2 queues what the window does not yet allow and sends it as WINDOW_UPDATEs come.
        stream.send_data(req.body.clone(), true).map_err(err)?;
    }
    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .map_err(|_| "no HTTP/2 response head".to_string())?
        .map_err(|e| format!("HTTP/2 response: {e}"))?;
    Ok((resp, stream))
}

/// Reads an HTTP/2 response's DATA to its end, or until `enough(body so far)`.
pub async fn h2_collect(
    resp: http::Response<h2::RecvStream>,
    head_only: bool,
    enough: impl Fn(&[u8]) -> bool,
) -> Result<Reply, String> {
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("?").to_owned()))
        .collect();
    let mut recv = resp.into_body();
    let mut body = Vec::new();
    if head_only && !recv.is_end_stream() {
        return Err("HEAD response has DATA".into());
    }
    while !enough(&body) {
        match tokio::time::timeout(WAIT, recv.data()).await {
            Err(_) => return Err(format!("body stalled after {} bytes", body.len())),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(format!("body after {} bytes: {e}", body.len())),
            Ok(Some(Ok(chunk))) => {
                let _ = recv.flow_control().release_capacity(chunk.len());
                body.extend_from_slice(&chunk);
            }
        }
    }
    Ok(Reply {
        status,
        headers,
        body,
        chunked: false,
    })
}

/// Writes `req` as HTTP/1.1 (`Content-Length` when it has a body).
pub async fn h1_send(io: &mut BoxIo, req: &Req<'_>) -> Result<(), String> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nhost: localhost\r\n",
        req.method, req.path
    );
    for (n, v) in req.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if !req.body.is_empty() {
        head.push_str(&format!("content-length: {}\r\n", req.body.len()));
    }
    head.push_str("\r\n");
    io.write_all(head.as_bytes()).await.map_err(err)?;
    io.write_all(&req.body).await.map_err(err)?;
    io.flush().await.map_err(err)
}

/// Reads one HTTP/1.1 response: the head, then the body as framed (none for HEAD, 1xx, 204,
/// 304; `Content-Length`; chunked; else to the close), or until `enough(body so far)`.
pub async fn h1_read(
    io: &mut BoxIo,
    head_only: bool,
    enough: impl Fn(&[u8]) -> bool,
) -> Result<Reply, String> {
    let mut raw = Vec::new();
    let end = loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if read_more(io, &mut raw).await? == 0 {
            return Err(format!(
                "closed before a response head: {:?}",
                String::from_utf8_lossy(&raw)
            ));
        }
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
        chunked: false,
    };
    reply.chunked = reply
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut rest = raw[end + 4..].to_vec();
    if head_only || status < 200 || status == 204 || status == 304 {
        return Ok(reply);
    }
    if reply.chunked {
        loop {
            let (body, done) = dechunk(&rest)?;
            if done || enough(&body) {
                reply.body = body;
                return Ok(reply);
            }
            if read_more(io, &mut rest).await? == 0 {
                return Err(format!(
                    "closed inside a chunked body ({} bytes)",
                    body.len()
                ));
            }
        }
    }
    let want = reply.content_length();
    loop {
        if want.is_some_and(|n| rest.len() >= n) || enough(&rest) {
            break;
        }
        if read_more(io, &mut rest).await? == 0 {
            if want.is_some() {
                return Err(format!("closed after {} of {want:?} bytes", rest.len()));
            }
            break;
        }
    }
    if let Some(n) = want {
        rest.truncate(n);
    }
    reply.body = rest;
    Ok(reply)
}

async fn read_more(io: &mut BoxIo, buf: &mut Vec<u8>) -> Result<usize, String> {
    buf.reserve(64 * 1024);
    let before = buf.len();
    tokio::time::timeout(WAIT, io.read_buf(buf))
        .await
        .map_err(|_| format!("read stalled after {before} bytes"))?
        .map_err(err)
}

/// The data of the complete chunks received so far, and whether the last chunk came.
fn dechunk(mut raw: &[u8]) -> Result<(Vec<u8>, bool), String> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size line {line:?}"))?;
        let start = eol + 2;
        if size == 0 {
            return Ok((out, true));
        }
        if raw.len() < start + size + 2 {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = &raw[start + size + 2..];
    }
    Ok((out, false))
}
