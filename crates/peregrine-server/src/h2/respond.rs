//! Sending an engine [`Response`] on an HTTP/2 stream: HEADERS, then DATA within the flow-control
//! windows the client grants.

use super::tunnel::Tunnel;
use crate::response::ResponseBody;
use crate::Response;
use bytes::Bytes;
use futures_core::Stream;
use h2::server::SendResponse;
use h2::SendStream;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, DATE, SERVER};
use std::cell::RefCell;
use std::future::poll_fn;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a response could not be sent completely.
pub(crate) enum SendError {
    /// The client reset the stream (or the connection went away).
    Reset,
    /// The handler's streamed body failed: the stream was reset with `INTERNAL_ERROR`.
    Body,
}

/// Connection-specific fields have no meaning in HTTP/2 and make a message malformed
/// (RFC 9113 §8.2.2): a handler's `Connection: close` or `Transfer-Encoding` is dropped.
fn is_connection_specific(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

fn forbids_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

thread_local! {
    /// The `Date` value, formatted at most once per second per thread.
    static DATE_VALUE: RefCell<(u64, HeaderValue)> =
        const { RefCell::new((0, HeaderValue::from_static(""))) };
}

fn date_value() -> HeaderValue {
    let now = SystemTime::now();
    let secs = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    DATE_VALUE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let text = httpdate::fmt_http_date(now);
            d.1 = HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""));
            d.0 = secs;
        }
        d.1.clone()
    })
}

/// Why a handler's response cannot be sent as HTTP/2 fields (the stream is answered 500
/// instead, as the HTTP/1.1 driver does).
#[derive(Debug)]
enum Unsendable {
    /// A 1xx as the final status: HTTP/2 has no 1xx final responses and no 101 at all.
    Informational,
    /// A status outside 100–999.
    Status,
    /// A field name that is not a token (RFC 9110 §5.1).
    FieldName(String),
    /// A field value with a byte no field value may hold (CR, LF, NUL, other controls).
    FieldValue(String),
}

impl Unsendable {
    /// Logs the cause (at ERROR: the handler's response is a bug the client cannot fix).
    fn log(&self, status: u16) {
        match self {
            Unsendable::Informational if status == 101 => tracing::error!(
                status,
                "the handler answered 101 Switching Protocols on HTTP/2, which has no protocol \
                 switch (RFC 9113 §8.6); a WebSocket over HTTP/2 is the client's extended \
                 CONNECT (RFC 8441), which this request is not; answering 500"
            ),
            Unsendable::Informational => tracing::error!(
                status,
                "the handler answered a 1xx status as its final response, which HTTP/2 cannot \
                 send (RFC 9113 §8.1); answering 500"
            ),
            Unsendable::Status => tracing::error!(
                status,
                "the handler answered a status outside 100-999; answering 500"
            ),
            Unsendable::FieldName(name) => tracing::error!(
                status,
                field = %name,
                "the handler set a response field name that is not an HTTP token \
                 (RFC 9110 §5.1); answering 500"
            ),
            Unsendable::FieldValue(name) => tracing::error!(
                status,
                field = %name,
                "the handler set a response field value with a CR, LF, NUL or other control \
                 byte (RFC 9110 §5.5); answering 500"
            ),
        }
    }
}

/// The response head as HTTP/2 fields, or why it cannot be sent.
fn head(
    res: &mut Response,
    server_name: Option<&'static str>,
) -> Result<http::Response<()>, Unsendable> {
    if res.status < 200 {
        return Err(Unsendable::Informational);
    }
    let mut out = http::Response::new(());
    *out.status_mut() = http::StatusCode::from_u16(res.status).map_err(|_| Unsendable::Status)?;
    let fields = out.headers_mut();
    for (given, value) in res.headers.drain(..) {
        let Ok(name) = HeaderName::from_bytes(given.as_bytes()) else {
            return Err(Unsendable::FieldName(given.into_owned()));
        };
        if is_connection_specific(&name) || name == CONTENT_LENGTH {
            continue;
        }
        let value = match value {
            std::borrow::Cow::Borrowed(v) => HeaderValue::from_bytes(v),
            std::borrow::Cow::Owned(v) => HeaderValue::from_maybe_shared(Bytes::from(v)),
        };
        let Ok(value) = value else {
            return Err(Unsendable::FieldValue(given.into_owned()));
        };
        fields.append(name, value);
    }
    fields.insert(DATE, date_value());
    if let Some(name) = server_name {
        fields.insert(SERVER, HeaderValue::from_static(name));
    }
    if !forbids_body(res.status) {
        let len = match &res.body {
            ResponseBody::Empty => Some(0),
            ResponseBody::Full(b) => Some(b.len()),
            ResponseBody::Static(b) => Some(b.len()),
            _ => None,
        };
        if let Some(len) = len {
            fields.insert(CONTENT_LENGTH, HeaderValue::from(len));
        }
    }
    Ok(out)
}

/// Answers an extended CONNECT (RFC 8441). A handler's upgrade with status 101, as over
/// HTTP/1.1, opens the tunnel: `200` is sent without `END_STREAM`, then the upgrade function runs
/// on the stream ([`Tunnel`]) until it returns. Any other answer is sent as it is (an upgrade
/// function with another status is dropped, as over HTTP/1.1), except a 2xx: the client would
/// take it for an open tunnel, so it becomes 501.
pub(crate) async fn open_tunnel(
    respond: &mut SendResponse<Bytes>,
    mut res: Response,
    recv: h2::RecvStream,
    server_name: Option<&'static str>,
) -> Result<(), SendError> {
    let upgrade = match std::mem::replace(&mut res.body, ResponseBody::Empty) {
        ResponseBody::Upgrade(f) if res.status == 101 => f,
        body => {
            // An upgrade function with another status is dropped (no body), as over HTTP/1.1.
            if !matches!(body, ResponseBody::Upgrade(_)) {
                res.body = body;
            }
            if (200..300).contains(&res.status) {
                tracing::warn!(
                    status = res.status,
                    "extended CONNECT answered 2xx without switching protocols (101); answering 501"
                );
                res = Response::new(501);
            }
            return send(respond, res, false, server_name).await;
        }
    };
    res.status = 200;
    let mut head = match head(&mut res, server_name) {
        Ok(head) => head,
        Err(why) => {
            // Only a field can fail here (the status is 200 now); the handler's was 101.
            why.log(101);
            return send(respond, Response::new(500), false, server_name).await;
        }
    };
    // The tunnel's DATA is not a body of known length (RFC 8441 §5: a 2xx opens the tunnel).
    head.headers_mut().remove(CONTENT_LENGTH);
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    let stream = respond
        .send_response(head, false)
        .map_err(|_| SendError::Reset)?;
    let io = crate::upgrade::Upgraded::new(Tunnel::new(recv, stream), Bytes::new());
    let mut run = upgrade(io);
    // A panicking upgrade ends its stream only, as a panicking handler does.
    let finished = poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => {
                tracing::error!("upgraded stream's function panicked");
                std::task::Poll::Ready(())
            }
        }
    });
    finished.await;
    Ok(())
}

/// Sends `res` (its body left out for HEAD requests and bodiless statuses).
pub(crate) async fn send(
    respond: &mut SendResponse<Bytes>,
    mut res: Response,
    head_request: bool,
    server_name: Option<&'static str>,
) -> Result<(), SendError> {
    let head = match head(&mut res, server_name) {
        Ok(head) => head,
        Err(why) => {
            why.log(res.status);
            let mut fallback = Response::new(500);
            let head = self::head(&mut fallback, server_name).expect("a valid head");
            return respond
                .send_response(head, true)
                .map(|_| ())
                .map_err(|_| SendError::Reset);
        }
    };
    let body = match std::mem::replace(&mut res.body, ResponseBody::Empty) {
        ResponseBody::Static(b) => ResponseBody::Full(Bytes::from_static(b)),
        body => body,
    };
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    let no_body = head_request || forbids_body(res.status);
    match body {
        ResponseBody::Full(data) if !no_body && !data.is_empty() => {
            let mut stream = respond
                .send_response(head, false)
                .map_err(|_| SendError::Reset)?;
            send_data(&mut stream, data, true).await
        }
        ResponseBody::Stream(s) if !no_body => {
            let mut stream = respond
                .send_response(head, false)
                .map_err(|_| SendError::Reset)?;
            send_stream(&mut stream, s).await
        }
        _ => respond
            .send_response(head, true)
            .map(|_| ())
            .map_err(|_| SendError::Reset),
    }
}

/// Sends `data` as DATA frames, waiting for window capacity (bounded buffering per stream).
async fn send_data(
    stream: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), SendError> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(n)) => n,
            _ => return Err(SendError::Reset),
        };
        if granted == 0 {
            continue;
        }
        let piece = data.split_to(granted.min(data.len()));
        stream
            .send_data(piece, end && data.is_empty())
            .map_err(|_| SendError::Reset)?;
    }
    Ok(())
}

async fn send_stream(
    stream: &mut SendStream<Bytes>,
    mut body: crate::response::BodyStream,
) -> Result<(), SendError> {
    loop {
        // A panicking stream is treated like a failing one (the HTTP/1.1 driver does the same).
        let next = poll_fn(|cx| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Pin::new(&mut body).poll_next(cx)
            })) {
                Ok(p) => p,
                Err(_) => std::task::Poll::Ready(Some(Err(std::io::Error::other("panic")))),
            }
        });
        // Waits for the next chunk, or for the client to reset the stream meanwhile.
        let next = tokio::select! {
            next = next => next,
            _ = poll_fn(|cx| stream.poll_reset(cx)) => return Err(SendError::Reset),
        };
        match next {
            None => {
                return stream
                    .send_data(Bytes::new(), true)
                    .map_err(|_| SendError::Reset)
            }
            Some(Ok(chunk)) => send_data(stream, chunk, false).await?,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "response body stream failed; resetting the stream");
                stream.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(SendError::Body);
            }
        }
    }
}
