//! Sending an engine [`Response`] on an HTTP/2 stream: HEADERS, then DATA within the flow-control
//! windows the client grants.

use super::limits::Watch;
use super::send::{SendError, Sender};
use super::tunnel::Tunnel;
use crate::response::ResponseBody;
use crate::Response;
use bytes::Bytes;
use h2::server::SendResponse;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, DATE, SERVER};
use peregrine_codec::response::{
    check_field, sends_body, status_forbids_body, DateCache, FieldError,
};

/// Connection-specific fields have no meaning in HTTP/2 and make a message malformed
/// (RFC 9113 §8.2.2, RFC 9114 §4.2): a handler's `Connection: close` or `Transfer-Encoding` is
/// dropped.
pub(crate) fn is_connection_specific(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// The protocol a response head was refused on, named in the log line (the field rules are
/// shared, so HTTP/3's refusals come through here too).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Over {
    /// The HTTP/2 driver's (and its extended CONNECT tunnels').
    Http2,
    /// The HTTP/3 driver's.
    #[cfg(feature = "http3")]
    Http3,
}

impl Over {
    /// The protocol's name and its RFC's sections on message framing and on `Upgrade`/101.
    fn cites(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Over::Http2 => ("HTTP/2", "RFC 9113 §8.1", "RFC 9113 §8.6"),
            #[cfg(feature = "http3")]
            Over::Http3 => ("HTTP/3", "RFC 9114 §4.1", "RFC 9114 §4.5"),
        }
    }
}

/// Why a handler's response cannot be sent as HTTP/2 or HTTP/3 fields (the stream is answered
/// 500 instead, as the HTTP/1.1 driver does).
#[derive(Debug)]
pub(crate) enum Unsendable {
    /// A 1xx as the final status: HTTP/2 and HTTP/3 have no 1xx final responses and no 101.
    Informational,
    /// A status outside 100–999.
    Status,
    /// A field that fails the codec's [`check_field`] (the rule HTTP/1.1 applies too).
    Field(String, FieldError),
}

impl Unsendable {
    /// Logs the cause, naming the protocol `over` (at ERROR: the handler's response is a bug
    /// the client cannot fix).
    pub(crate) fn log(&self, status: u16, over: Over) {
        let (protocol, framing, upgrade) = over.cites();
        match self {
            Unsendable::Informational if status == 101 => match over {
                Over::Http2 => tracing::error!(
                    status,
                    "the handler answered 101 Switching Protocols on HTTP/2, which has no \
                     protocol switch ({upgrade}); a WebSocket over HTTP/2 is the client's \
                     extended CONNECT (RFC 8441), which this request is not; answering 500"
                ),
                #[cfg(feature = "http3")]
                Over::Http3 => tracing::error!(
                    status,
                    "the handler answered 101 Switching Protocols on HTTP/3, which has no \
                     protocol switch ({upgrade}), and WebSocket over HTTP/3 (RFC 9220) is not \
                     served; answering 500"
                ),
            },
            Unsendable::Informational => tracing::error!(
                status,
                "the handler answered a 1xx status as its final response, which {protocol} \
                 cannot send ({framing}); answering 500"
            ),
            Unsendable::Status => tracing::error!(
                status,
                "the handler answered a status outside 100-999 on {protocol}; answering 500"
            ),
            // The same line as HTTP/1.1's: the field rule is the codec's, not the protocol's.
            Unsendable::Field(name, why) => crate::response::log_refused_field(status, name, *why),
        }
    }
}

/// The response head as HTTP/2 (and HTTP/3) fields, or why it cannot be sent.
pub(crate) fn head(
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
        // The codec's rule first, on every field (dropped ones too), as over HTTP/1.1: the
        // `http` types below then only build what it accepted.
        if let Err(why) = check_field(given.as_bytes(), &value) {
            return Err(Unsendable::Field(given.into_owned(), why));
        }
        // (Past the codec's check, only a name over 64 KiB fails here.)
        let Ok(name) = HeaderName::from_bytes(given.as_bytes()) else {
            return Err(Unsendable::Field(given.into_owned(), FieldError::Name));
        };
        if is_connection_specific(&name) || name == CONTENT_LENGTH {
            continue;
        }
        let value = match value {
            // `'static` bytes are shared, not copied.
            std::borrow::Cow::Borrowed(v) => HeaderValue::from_maybe_shared(Bytes::from_static(v)),
            std::borrow::Cow::Owned(v) => HeaderValue::from_maybe_shared(Bytes::from(v)),
        };
        let Ok(value) = value else {
            return Err(Unsendable::Field(given.into_owned(), FieldError::Value));
        };
        fields.append(name, value);
    }
    // The codec's per-thread `Date` cache, the one HTTP/1.1 heads are built from.
    if let Ok(date) = HeaderValue::from_bytes(&DateCache::date_value()) {
        fields.insert(DATE, date);
    }
    if let Some(name) = server_name {
        fields.insert(SERVER, HeaderValue::from_static(name));
    }
    if !status_forbids_body(res.status) {
        let len = match &res.body {
            ResponseBody::Empty => Some(0),
            ResponseBody::Full(b) => Some(b.len() as u64),
            ResponseBody::Static(b) => Some(b.len() as u64),
            ResponseBody::SizedStream { len, .. } | ResponseBody::File { len, .. } => Some(*len),
            ResponseBody::Stream(_) | ResponseBody::Upgrade(_) => None,
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
    watch: &Watch,
) -> Result<(), SendError> {
    let Some(upgrade) = crate::extended_connect::tunnel_answer(&mut res) else {
        return send(respond, res, false, server_name, watch).await;
    };
    let mut head = match head(&mut res, server_name) {
        Ok(head) => head,
        Err(why) => {
            // Only a field can fail here (the status is 200 now); the handler's was 101.
            why.log(101, Over::Http2);
            return send(respond, Response::new(500), false, server_name, watch).await;
        }
    };
    // The tunnel's DATA is not a body of known length (RFC 8441 §5: a 2xx opens the tunnel).
    head.headers_mut().remove(CONTENT_LENGTH);
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    let stream = respond
        .send_response(head, false)
        .map_err(|_| SendError::Reset)?;
    let tunnel = Tunnel::new(recv, stream, watch.rules);
    let io = crate::upgrade::Upgraded::new(tunnel, Bytes::new());
    crate::extended_connect::run_tunnel(upgrade, io).await;
    Ok(())
}

/// Sends `res` (its body left out for HEAD requests and bodiless statuses).
pub(crate) async fn send(
    respond: &mut SendResponse<Bytes>,
    mut res: Response,
    head_request: bool,
    server_name: Option<&'static str>,
    watch: &Watch,
) -> Result<(), SendError> {
    let head = match head(&mut res, server_name) {
        Ok(head) => head,
        Err(why) => {
            why.log(res.status, Over::Http2);
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
        ResponseBody::Full(b) => ResponseBody::Full(crate::response::detach_small(b)),
        body => body,
    };
    crate::response::recycle_fields(std::mem::take(&mut res.headers));
    let no_body = !sends_body(res.status, head_request);
    // Dropped with the body where there is none (HEAD, 204, 304).
    let trailers = res.take_trailers().filter(|_| !no_body);
    let has_body = !no_body
        && match &body {
            ResponseBody::Full(data) => !data.is_empty(),
            ResponseBody::Stream(_) => true,
            ResponseBody::SizedStream { len, .. } | ResponseBody::File { len, .. } => *len > 0,
            _ => false,
        };
    if !has_body && trailers.is_none() {
        return respond
            .send_response(head, true)
            .map(|_| ())
            .map_err(|_| SendError::Reset);
    }
    let stream = respond
        .send_response(head, false)
        .map_err(|_| SendError::Reset)?;
    let mut sender = Sender::new(stream, watch);
    if trailers.is_some() {
        sender.keep_open();
    }
    match body {
        _ if !has_body => {}
        ResponseBody::Full(data) => sender.data(data, true).await?,
        ResponseBody::Stream(s) => sender.stream(s, None).await?,
        ResponseBody::SizedStream { len, stream } => sender.stream(stream, Some(len)).await?,
        ResponseBody::File { file, offset, len } => sender.file(&file, offset, len).await?,
        // Not reached: `has_body` is false for the others.
        _ => sender.data(Bytes::new(), true).await?,
    }
    match trailers {
        Some(t) => sender.trailers(*t).await,
        None => Ok(()),
    }
}
