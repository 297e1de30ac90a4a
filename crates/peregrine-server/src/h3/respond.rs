//! Sending an engine [`Response`] on an HTTP/3 stream: HEADERS (the fields HTTP/2 would send),
//! then DATA as QUIC's flow control lets it go, each wait for the client bounded by the
//! engine's `write` timeout.

use crate::h2::{response_head, Over};
use crate::response::ResponseBody;
use crate::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use h3::error::Code;
use h3::server::RequestStream;
use peregrine_codec::response::sends_body;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// File bytes read per DATA frame, at most: a file body holds no more than this in memory.
const FILE_CHUNK: u64 = 64 * 1024;

/// The sending half of a request stream.
pub(super) type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// Why a response was not sent completely.
#[derive(Debug)]
pub(super) enum SendError {
    /// The client stopped the stream, or the connection went away.
    Gone,
    /// The handler's streamed body failed or did not match its length: the stream was reset
    /// with `H3_INTERNAL_ERROR`.
    Body,
    /// The client took nothing within the write timeout: the stream was reset with
    /// `H3_REQUEST_CANCELLED`.
    Stalled,
}

/// What a send operation run under the write timeout came to; past the timeout the stream is
/// reset (the operation's future is gone by then, so `send` is free to take the reset).
pub(super) fn settle<T>(
    send: &mut SendHalf,
    outcome: Result<Result<T, h3::error::StreamError>, tokio::time::error::Elapsed>,
) -> Result<T, SendError> {
    match outcome {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(SendError::Gone),
        Err(_) => {
            send.stop_stream(Code::H3_REQUEST_CANCELLED);
            Err(SendError::Stalled)
        }
    }
}

/// Sends `res` (its body left out for HEAD requests and bodiless statuses) and ends the stream.
/// A response HTTP/3 cannot carry (a 1xx final status, a field no field may have) is answered
/// 500, with the cause logged, as over HTTP/2.
pub(super) async fn send(
    send: &mut SendHalf,
    mut res: Response,
    head_request: bool,
    server_name: Option<&'static str>,
    write_timeout: Duration,
) -> Result<(), SendError> {
    let head = match response_head(&mut res, server_name) {
        Ok(head) => head,
        Err(why) => {
            why.log(res.status, Over::Http3);
            res = Response::new(500);
            response_head(&mut res, server_name).expect("a valid head")
        }
    };
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    // Detached before the head goes out: the head waits for the client's window too, and the
    // body waits with it (see `detach_small`).
    if let ResponseBody::Full(body) = &mut res.body {
        *body = crate::response::detach_small(std::mem::take(body));
    }
    let head_sent = tokio::time::timeout(write_timeout, send.send_response(head)).await;
    settle(send, head_sent)?;
    let body = std::mem::replace(&mut res.body, ResponseBody::Empty);
    if sends_body(res.status, head_request) {
        send_body(send, body, write_timeout).await?;
        // Dropped with the body where there is none (HEAD, 204, 304).
        if let Some(pending) = res.take_trailers() {
            send_trailers(send, *pending, write_timeout).await?;
        }
    }
    let finished = tokio::time::timeout(write_timeout, send.finish()).await;
    settle(send, finished)
}

/// Sends the trailers as a HEADERS frame after the body, once they are known. A trailers
/// future that panicked resets the stream: the response must not look complete.
async fn send_trailers(
    send: &mut SendHalf,
    pending: crate::trailers::PendingTrailers,
    timeout: Duration,
) -> Result<(), SendError> {
    let Some(trailers) = pending.resolve().await else {
        send.stop_stream(Code::H3_INTERNAL_ERROR);
        return Err(SendError::Body);
    };
    let sent = tokio::time::timeout(timeout, send.send_trailers(trailers.to_header_map())).await;
    settle(send, sent)
}

/// Sends one piece of the body.
async fn data(send: &mut SendHalf, data: Bytes, timeout: Duration) -> Result<(), SendError> {
    if data.is_empty() {
        return Ok(());
    }
    let sent = tokio::time::timeout(timeout, send.send_data(data)).await;
    settle(send, sent)
}

/// The body as DATA frames: in memory, streamed by the handler (a sized stream must yield
/// exactly its length), or read from a file a piece at a time.
async fn send_body(
    send: &mut SendHalf,
    body: ResponseBody,
    timeout: Duration,
) -> Result<(), SendError> {
    match body {
        ResponseBody::Empty | ResponseBody::Upgrade(_) => Ok(()),
        // Detached in `send` already.
        ResponseBody::Full(bytes) => data(send, bytes, timeout).await,
        ResponseBody::Static(bytes) => data(send, Bytes::from_static(bytes), timeout).await,
        ResponseBody::Stream(stream) => stream_body(send, stream, None, timeout).await,
        ResponseBody::SizedStream { len, stream } => {
            stream_body(send, stream, Some(len), timeout).await
        }
        ResponseBody::File { file, offset, len } => {
            let mut at = 0;
            while at < len {
                let n = FILE_CHUNK.min(len - at) as usize;
                let mut buf = vec![0; n];
                if file.read_exact_at(&mut buf, offset + at).is_err() {
                    // The file shrank or failed under us: the client must not take a short
                    // body for a whole one.
                    send.stop_stream(Code::H3_INTERNAL_ERROR);
                    return Err(SendError::Body);
                }
                data(send, Bytes::from(buf), timeout).await?;
                at += n as u64;
            }
            Ok(())
        }
    }
}

/// A streamed body, pulled from the handler only as the client takes what was sent.
async fn stream_body(
    send: &mut SendHalf,
    mut stream: crate::response::BodyStream,
    len: Option<u64>,
    timeout: Duration,
) -> Result<(), SendError> {
    let mut sent: u64 = 0;
    while let Some(piece) = stream.next().await {
        let Ok(piece) = piece else {
            tracing::debug!("streamed response body failed; resetting the HTTP/3 stream");
            send.stop_stream(Code::H3_INTERNAL_ERROR);
            return Err(SendError::Body);
        };
        sent = sent.saturating_add(piece.len() as u64);
        if len.is_some_and(|len| sent > len) {
            break;
        }
        data(send, crate::response::detach_small(piece), timeout).await?;
    }
    if len.is_some_and(|len| sent != len) {
        tracing::error!(?len, sent, "sized response stream did not match its length");
        send.stop_stream(Code::H3_INTERNAL_ERROR);
        return Err(SendError::Body);
    }
    Ok(())
}
