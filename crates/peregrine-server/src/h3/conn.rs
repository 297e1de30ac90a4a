//! One QUIC connection: its handshake, the HTTP/3 connection on it, and its request streams,
//! each served by the worker's [`Service`] inside this connection's task (no task per stream,
//! so handlers need not be `Send`, as over HTTP/1.1 and HTTP/2).

use super::context::{answer, Ctx};
use super::early;
use super::request::{self, SharedRecv};
use super::respond::{self, SendHalf};
use super::unvalidated::Unvalidated;
use crate::pace::PaceRules;
use crate::worker::ConnShared;
use crate::{Response, ServerConfig, Service};
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

/// `H3_NO_ERROR` (RFC 9114 §8.1), the code of a connection closed with nothing wrong.
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

/// Bounds of the wait for the client's acknowledgements before the close.
const LINGER_MIN: Duration = Duration::from_millis(20);
const LINGER_MAX: Duration = Duration::from_secs(1);

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;
type Resolver = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// Serves the connection `incoming` starts until the client closes it, it idles out (QUIC's
/// idle timeout, the engine's `idle`), or the worker shuts down: then `GOAWAY`, the open
/// streams finish within the `shutdown` timeout, and the connection closes with
/// `H3_NO_ERROR`. The handshake must finish within `handshake_timeout`, and is abandoned when
/// the worker begins shutting down; `unvalidated` counts it among the handshakes from
/// unvalidated addresses until it ends.
pub(super) async fn serve<S: Service, P>(
    incoming: quinn::Incoming,
    held: ConnShared<P>,
    service: Rc<S>,
    handshake_timeout: Duration,
    unvalidated: Option<Unvalidated>,
) {
    let peer = incoming.remote_address();
    let shared = (*held).clone();
    let config = &shared.config;
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "QUIC connection refused");
            return;
        }
    };
    let zero_rtt = config.http3.zero_rtt;
    // A connection that completes its handshake during shutdown would be sent GOAWAY before
    // its first request: waiting for it would only hold the shutdown to its deadline.
    let established = tokio::select! {
        done = early::establish(connecting, zero_rtt, handshake_timeout, unvalidated) => done,
        () = shared.shutdown_started() => Err("QUIC handshake abandoned: shutting down".into()),
    };
    let (quic, confirmed) = match established {
        Ok(established) => established,
        Err(why) => {
            tracing::debug!(%peer, %why);
            return;
        }
    };
    // The client's SETTINGS are read as the connection runs, not awaited here.
    let mut builder = h3::server::builder();
    builder.max_field_section_size(config.http3.max_field_section_size);
    builder.enable_extended_connect(config.http3.extended_connect);
    let built = builder.build(h3_quinn::Connection::new(quic.clone()));
    let built = confirmed.across_handshake(built);
    let mut conn: H3Conn = match tokio::time::timeout(config.timeouts.header, built).await {
        Ok(Ok(conn)) => conn,
        _ => {
            tracing::debug!(%peer, "HTTP/3 connection setup failed");
            return;
        }
    };
    let ctx = Rc::new(Ctx {
        max_body_size: config.limits.max_body_size,
        body_rules: PaceRules::body(config),
        server_name: config.server_name,
        header_timeout: config.timeouts.header,
        write_timeout: config.timeouts.write,
        write_rules: PaceRules::write(config),
        extended_connect: config.http3.extended_connect,
        quic: quic.clone(),
        confirmed,
    });
    let how = run(
        &mut conn,
        &service,
        &ctx,
        peer,
        shared.shutdown_started(),
        config,
    )
    .await;
    tracing::debug!(%peer, how, "HTTP/3 connection closed");
    // quinn's close drops stream data the client has not acknowledged yet (the last responses'
    // tail): a few round trips first, unless the client closes by itself meanwhile.
    let linger = (quic.rtt() * 4).clamp(LINGER_MIN, LINGER_MAX);
    let _ = tokio::time::timeout(linger, quic.closed()).await;
    quic.close(H3_NO_ERROR, b"");
    drop(held);
}

/// Accepts and runs the connection's streams; says how the connection ended.
async fn run<S: Service>(
    conn: &mut H3Conn,
    service: &Rc<S>,
    ctx: &Rc<Ctx>,
    peer: SocketAddr,
    shutdown: impl Future<Output = ()>,
    config: &ServerConfig,
) -> &'static str {
    let mut streams: FuturesUnordered<Pin<Box<dyn Future<Output = ()>>>> = FuturesUnordered::new();
    let mut shutdown = pin!(shutdown);
    let mut requests: u64 = 0;
    loop {
        let next = poll_fn(|cx| {
            while let Poll::Ready(Some(())) = streams.poll_next_unpin(cx) {}
            if shutdown.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            let accept = pin!(conn.accept());
            accept.poll(cx).map(Some)
        })
        .await;
        match next {
            Some(Ok(Some(resolver))) => {
                requests += 1;
                // Decided as the stream is accepted, as quinn's `RecvStream::is_0rtt`.
                let early = ctx.confirmed.early();
                let stream = stream(resolver, early, service.clone(), ctx.clone());
                streams.push(Box::pin(stream));
                let limit = config.limits.max_requests_per_connection;
                if limit.is_some_and(|max| requests >= max) {
                    // As HTTP/1.1's last `Connection: close`: GOAWAY, open streams finish.
                    return finish(conn, streams, config, "max_requests_per_connection").await;
                }
            }
            // The client sent GOAWAY and every request completed, or it closed.
            Some(Ok(None)) => return "closed by the client",
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "HTTP/3 connection ended");
                return if e.is_h3_no_error() {
                    "closed"
                } else {
                    "connection error"
                };
            }
            None => return finish(conn, streams, config, "shutdown").await,
        }
    }
}

/// Graceful end: `GOAWAY` naming the last request accepted, then the open streams run for up
/// to the `shutdown` timeout while the connection goes on reading (the client's control
/// frames; requests past the GOAWAY are refused by h3 with `H3_REQUEST_REJECTED`).
async fn finish(
    conn: &mut H3Conn,
    mut streams: FuturesUnordered<Pin<Box<dyn Future<Output = ()>>>>,
    config: &ServerConfig,
    why: &'static str,
) -> &'static str {
    let sent = tokio::time::timeout(config.timeouts.shutdown, conn.shutdown(0)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return "GOAWAY could not be sent";
    }
    let drained = tokio::time::timeout(config.timeouts.shutdown, async {
        while !streams.is_empty() {
            // Accepting keeps h3 reading the control stream and refusing late requests.
            let accepted = {
                let accept = conn.accept();
                tokio::select! {
                    _ = streams.next() => None,
                    r = accept => Some(r),
                }
            };
            if let Some(Err(_) | Ok(None)) = accepted {
                // The connection ended: what is left cannot be sent.
                break;
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = streams.len(),
            "HTTP/3 streams still open at the shutdown deadline"
        );
    }
    why
}

/// One request stream: its head (within the header timeout), the service's answer (a
/// panicking handler is answered 500), the response; the client is told to stop sending a
/// body the handler left unread. An `early` request (0-RTT) with an unsafe method is answered
/// 425 instead of reaching the service.
async fn stream<S: Service>(resolver: Resolver, early: bool, service: Rc<S>, ctx: Rc<Ctx>) {
    // A header section over `max_field_section_size` is answered 431 by h3 itself.
    let resolved = tokio::time::timeout(ctx.header_timeout, resolver.resolve_request()).await;
    let peer = ctx.quic.remote_address();
    let (mut head, stream) = match resolved {
        Ok(Ok(resolved)) => resolved,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "HTTP/3 request refused");
            return;
        }
        Err(_) => return,
    };
    if let Some(protocol) = head.extensions().get::<h3::ext::Protocol>().copied() {
        return super::tunnel::serve(head, protocol.as_str(), stream, &*service, &ctx, peer).await;
    }
    let head_request = head.method() == http::Method::HEAD;
    let (mut send, mut recv) = stream.split();
    if early {
        if let Err(too_early) = early::admit(&mut head) {
            finish_stream(&mut send, too_early, head_request, &ctx, None).await;
            // As after any complete response: the body is not wanted (RFC 9114 §4.1).
            recv.stop_sending(h3::error::Code::H3_NO_ERROR);
            return;
        }
    }
    let mapped = request::map(head, recv, peer, ctx.max_body_size, ctx.body_rules);
    let (response, recv) = match mapped {
        Some((req, recv)) => (answer(service.call(req)).await, Some(recv)),
        None => (Response::new(400), None),
    };
    finish_stream(&mut send, response, head_request, &ctx, recv).await;
}

async fn finish_stream(
    send: &mut SendHalf,
    response: Response,
    head_request: bool,
    ctx: &Ctx,
    recv: Option<SharedRecv>,
) {
    let sent = respond::send(
        send,
        response,
        head_request,
        ctx.server_name,
        ctx.write_timeout,
    )
    .await;
    if let Err(why) = sent {
        tracing::debug!(?why, "HTTP/3 response not sent completely");
    }
    if let Some(recv) = recv {
        recv.borrow_mut().stop();
    }
}
