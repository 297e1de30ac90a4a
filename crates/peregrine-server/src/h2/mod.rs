//! HTTP/2 with the `h2` crate (framing, HPACK, flow control): each stream becomes an engine
//! [`crate::Request`] (with `version() == Version::Http2`) for the same [`Service`] as
//! HTTP/1.1, and its [`crate::Response`] is sent back as HEADERS and DATA frames.
//!
//! Limits and protections (defaults in [`Http2Config`], in the spirit of nginx and h2o):
//! * at most 128 concurrent streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`; more →
//!   `RST_STREAM(REFUSED_STREAM)` from h2);
//! * a header list over 16 KiB (the HTTP/1.1 limit) → 431, and CONTINUATION frames beyond what
//!   that size needs → `GOAWAY(ENHANCE_YOUR_CALM)` (the 2024 CONTINUATION flood, handled in h2);
//! * rapid reset (CVE-2023-44487): streams the client resets before their response is complete
//!   are counted; more than [`Http2Config::max_client_resets`] in 10 s →
//!   `GOAWAY(ENHANCE_YOUR_CALM)` and close. h2's own pending-accept and local-error reset limits
//!   stay on;
//! * PING and SETTINGS floods: h2 keeps at most one pending PONG and one pending SETTINGS ACK and
//!   writes it before reading further, so a client that floods without reading stalls only
//!   itself (no queue grows);
//! * control frames (WINDOW_UPDATE, PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA, unknown
//!   types), which h2 does not rate-limit: more than [`Http2Config::max_control_frames`] per
//!   10 s beyond what the client earns (8 per request, 1 per KiB of response data) →
//!   `GOAWAY(ENHANCE_YOUR_CALM)`, so a flood of 1-byte WINDOW_UPDATEs cannot keep a worker busy;
//! * clients that do not take what they asked for: every wait for send capacity follows
//!   `write_timeout` / `write_min_rate` (as an HTTP/1.1 write); past them the stream is reset
//!   (`CANCEL`) and its queued data dropped; when no stream moved meanwhile and all the others
//!   wait for the client too, the connection gets `GOAWAY(ENHANCE_YOUR_CALM)`; a socket that takes nothing as long is closed. Response
//!   bodies are pulled from handlers only while less than `max_pending_output` waits unsent on
//!   the connection, and a file body is read 64 KiB at a time as windows open;
//! * RFC 8441 extended CONNECT (`SETTINGS_ENABLE_CONNECT_PROTOCOL`): a `CONNECT` with a
//!   `:protocol` is handed to the service as a `GET` carrying `Upgrade: <protocol>` (the
//!   translation proxies make to HTTP/1.1; h2 refuses a real `upgrade` field in HTTP/2, so the
//!   field cannot come from the client). A handler answering with an upgrade
//!   ([`crate::ResponseBody::Upgrade`], status 101 as over HTTP/1.1) gets `200` sent and the
//!   stream as its connection (see `tunnel`); any other 2xx answer is replaced by 501;
//! * a response HTTP/2 cannot carry (a 101 to any other request: HTTP/2 has no 101, RFC 9113
//!   §8.6; another 1xx as the final status; a field name or value no field may have) is
//!   answered 500, with an ERROR log line naming the cause;
//! * request bodies follow `body_timeout`, `body_min_rate` and `body_total_timeout` per stream;
//!   `max_requests_per_connection` ends a connection with a graceful GOAWAY;
//! * the preface must arrive within `header_timeout`; a connection where nothing runs (no
//!   stream, or only streams waiting for the client's window) is closed after `idle_timeout`;
//!   graceful shutdown sends `GOAWAY(NO_ERROR)`, lets open streams finish for up to
//!   `shutdown_timeout`, then closes.

mod body;
pub(crate) mod config;
mod cookies;
mod limits;
mod only;
mod request;
mod respond;
mod send;
mod tunnel;

pub use crate::protocol::preface::{detect_preface, PREFACE};
pub use config::Http2Config;
pub use only::Http2OnlyAcceptor;
/// Shared with the HTTP/3 driver, whose requests and responses carry the same fields.
#[cfg(feature = "http3")]
pub(crate) use {
    cookies::JoinedCookies, request::connect_request, respond::head as response_head,
    respond::is_connection_specific, respond::Over,
};

use crate::transport::Stream;
use crate::upgrade::Rewind;
use crate::worker::ConnShared;
use crate::{Response, ServerConfig, Service};
use bytes::Bytes;
use bytes::BytesMut;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use h2::server::SendResponse;
use limits::{Metered, Watch, WriteRules};
use request::{CallH2, Ctx, Start};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep, Instant};

/// The window in which client resets are counted.
const RESET_WINDOW: Duration = Duration::from_secs(10);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The client closed, or the connection was idle past `idle_timeout`, or a graceful
    /// shutdown finished.
    Normally,
    /// The preface or settings did not arrive within `header_timeout`, or were invalid.
    Handshake,
    /// Too many streams reset by the client: `GOAWAY(ENHANCE_YOUR_CALM)` was sent.
    RapidReset,
    /// A connection error (h2 sent `GOAWAY` with its code, or the transport failed).
    Error(Option<h2::Reason>),
    /// The client took no response data past the write rules (`write_timeout`,
    /// `write_min_rate`): every stream with data to send was stalled (`GOAWAY(ENHANCE_YOUR_CALM)`
    /// was sent), or the socket refused writes (closed without one).
    Stalled,
    /// More control frames than [`Http2Config::max_control_frames`]:
    /// `GOAWAY(ENHANCE_YOUR_CALM)` was sent.
    ControlFlood,
    /// Streams were still open at the shutdown deadline.
    ForcedShutdown,
}

/// Serves one HTTP/2 connection on `io` (after the TLS handshake, or on a cleartext connection
/// that starts with [`PREFACE`]) until the client goes, an error, or `shutdown` resolves (then
/// graceful: `GOAWAY`, drain, close). `read` holds the bytes already read from `io` (the
/// preface or part of it, when the engine sniffed it); they are read again first.
///
/// A connection that does not start with the preface gets `GOAWAY(PROTOCOL_ERROR)` and a clean
/// close (RFC 9113 §3.4).
///
/// Handlers run inside this future (no task per stream), so they need not be `Send`.
pub async fn serve_connection<IO, S>(
    io: IO,
    read: Bytes,
    peer: SocketAddr,
    service: S,
    config: &ServerConfig,
    h2config: &Http2Config,
    shutdown: impl Future<Output = ()>,
) -> Closed
where
    IO: AsyncRead + AsyncWrite + Unpin,
    S: Service,
{
    let mut io = io;
    let read = match read_preface(&mut io, read, config.timeouts.header).await {
        Ok(read) => read,
        Err(Refused::Timeout) => return Closed::Handshake,
        Err(Refused::NotHttp2) => {
            // Boxed: its 4 KiB read sink would otherwise size every HTTP/2 connection's future.
            Box::pin(refuse(io)).await;
            return Closed::Handshake;
        }
    };
    let rules = WriteRules::write(config);
    let watch = Rc::new(Watch::new(
        rules,
        config.limits.max_pending_output,
        h2config.max_control_frames,
    ));
    let io = Metered::new(Rewind::new(io, read), watch.clone());
    // The builder is not kept across the awaits below (it would size the connection's future).
    let handshake = builder(h2config).handshake::<_, Bytes>(io);
    let handshake = tokio::time::timeout(config.timeouts.header, handshake);
    let mut conn = match handshake.await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "HTTP/2 handshake failed");
            return Closed::Handshake;
        }
        Err(_) => return Closed::Handshake,
    };
    let ctx = Rc::new(Ctx {
        max_body_size: config.limits.max_body_size,
        body_rules: body::BodyRules::body(config),
        server_name: config.server_name,
        watch,
    });
    let mut streams: FuturesUnordered<Pin<Box<dyn Future<Output = Outcome>>>> =
        FuturesUnordered::new();
    let mut shutdown = pin!(shutdown);
    let mut draining: Option<Pin<Box<tokio::time::Sleep>>> = None;
    let idle = sleep(config.timeouts.idle);
    let mut idle = pin!(idle);
    let mut resets = ResetCounter::new(h2config.max_client_resets);
    let mut closed = Closed::Normally;
    // Armed only while the socket refuses writes.
    let mut write_stall: Option<Pin<Box<tokio::time::Sleep>>> = None;
    let mut last_grants = 0;
    // Requests accepted, against `max_requests_per_connection`.
    let mut requests: u64 = 0;
    let mut conn_going_away = false;

    poll_fn(|cx| {
        if draining.is_none() && shutdown.as_mut().poll(cx).is_ready() {
            conn.graceful_shutdown();
            draining = Some(Box::pin(sleep(config.timeouts.shutdown)));
        }
        if let Some(deadline) = draining.as_mut() {
            // Past the deadline the connection is closed even if the client never answers the
            // GOAWAY's PING (h2's two-step graceful shutdown).
            if deadline.as_mut().poll(cx).is_ready() {
                if !streams.is_empty() && closed == Closed::Normally {
                    closed = Closed::ForcedShutdown;
                }
                return Poll::Ready(());
            }
        }
        loop {
            // Run the streams first: what they send is written by the connection's poll below.
            while let Poll::Ready(Some(outcome)) = streams.poll_next_unpin(cx) {
                if outcome == Outcome::ResetByClient && resets.hit() {
                    tracing::warn!(%peer, "HTTP/2 rapid reset: closing with ENHANCE_YOUR_CALM");
                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    closed = Closed::RapidReset;
                }
            }
            // Then accept every request that has arrived before running any of them: each
            // `poll_accept` writes and flushes what the streams queued, so running a stream
            // between two accepts would send one TLS record and one `writev` per response
            // (measured: 1.00 writev per request under `h2load -m 10`, against actix-web's 0.10).
            // The first accept below writes what the streams above queued; the next round runs
            // the new streams, and its accepts write all their responses at once.
            let mut accepted = false;
            loop {
                match conn.poll_accept(cx) {
                    Poll::Ready(Some(Ok((req, respond)))) => {
                        streams.push(Box::pin(stream(
                            service.call_h2(req, peer, &ctx),
                            respond,
                            ctx.clone(),
                        )));
                        accepted = true;
                        requests += 1;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        if closed == Closed::Normally {
                            closed = Closed::Error(e.reason());
                        }
                        tracing::debug!(%peer, error = %e, "HTTP/2 connection error");
                        return Poll::Ready(());
                    }
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => break,
                }
            }
            if !accepted {
                break;
            }
        }
        if config
            .limits
            .max_requests_per_connection
            .is_some_and(|max| requests >= max)
            && draining.is_none()
            && !conn_going_away
        {
            // As HTTP/1.1's last `Connection: close`: GOAWAY(NO_ERROR), open streams finish.
            conn.graceful_shutdown();
            conn_going_away = true;
        }
        let watch = &ctx.watch;
        let refusal = if watch.flood() {
            Some((Closed::ControlFlood, "too many control frames"))
        } else if watch.take_stalled() && streams.len() <= watch.waiting() {
            // No stream moved during the stalled one's wait and every stream left waits for the
            // client too; a stream still running its handler or producing (an SSE stream
            // between events) keeps the connection, and only the stalled stream was reset.
            Some((
                Closed::Stalled,
                "no stream took data within the write timeout",
            ))
        } else {
            None
        };
        if let Some((why, what)) = refusal {
            if !matches!(closed, Closed::ControlFlood | Closed::Stalled) {
                tracing::debug!(%peer, what, "HTTP/2: closing with ENHANCE_YOUR_CALM");
                conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                closed = why;
                draining = Some(Box::pin(sleep(config.timeouts.shutdown)));
                // Poll again so the GOAWAY is written and the connection ends.
                cx.waker().wake_by_ref();
            }
        }
        // A socket that refuses writes past the write rules cannot take a GOAWAY either: the
        // connection is dropped, and with it everything queued for the client.
        match watch.write_deadline() {
            None => write_stall = None,
            Some(at) => {
                let timer =
                    write_stall.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if timer.as_mut().poll(cx).is_ready() {
                    tracing::debug!(%peer, "HTTP/2: the socket took nothing in time");
                    closed = Closed::Stalled;
                    return Poll::Ready(());
                }
            }
        }
        // Busy while a stream runs its handler or sends; streams that only wait for the client
        // (window closed, socket full) do not keep the connection from idling out, though
        // every grant of window does.
        let grants = watch.grants();
        if streams.len() > watch.waiting() || grants != last_grants {
            last_grants = grants;
            idle.as_mut().reset(Instant::now() + config.timeouts.idle);
        } else if idle.as_mut().poll(cx).is_ready() && draining.is_none() {
            // Nothing in progress: GOAWAY(NO_ERROR) naming the last stream processed, then
            // close (a request crossing it is known unprocessed by the client, which retries).
            conn.abrupt_shutdown(h2::Reason::NO_ERROR);
            draining = Some(Box::pin(sleep(config.timeouts.shutdown)));
            // Poll again so the GOAWAY is written and the connection ends.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await;
    closed
}

/// h2's settings for a connection, from [`Http2Config`].
fn builder(h2config: &Http2Config) -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(h2config.max_concurrent_streams)
        .max_header_list_size(h2config.max_header_list_size)
        .initial_window_size(h2config.initial_stream_window)
        .initial_connection_window_size(h2config.initial_connection_window)
        .max_frame_size(h2config.max_frame_size)
        .max_send_buffer_size(h2config.max_send_buffer)
        .max_pending_accept_reset_streams(h2config.max_pending_accept_reset_streams)
        .max_local_error_reset_streams(Some(h2config.max_local_error_reset_streams));
    if h2config.enable_connect_protocol {
        builder.enable_connect_protocol();
    }
    builder
}

enum Refused {
    Timeout,
    NotHttp2,
}

/// Reads until the whole preface is in `read` (or proven absent), within `timeout`.
async fn read_preface<IO: AsyncRead + Unpin>(
    io: &mut IO,
    read: Bytes,
    timeout: Duration,
) -> Result<Bytes, Refused> {
    let mut got = BytesMut::from(read);
    let reading = async {
        loop {
            match detect_preface(&got) {
                Some(true) => return Ok(()),
                Some(false) => return Err(Refused::NotHttp2),
                None => {}
            }
            got.reserve(PREFACE.len());
            match io.read_buf(&mut got).await {
                Ok(0) | Err(_) => return Err(Refused::Timeout),
                Ok(_) => {}
            }
        }
    };
    match tokio::time::timeout(timeout, reading).await {
        Ok(Ok(())) => Ok(got.freeze()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Refused::Timeout),
    }
}

/// `GOAWAY(PROTOCOL_ERROR)`, then a lingering close: the write side is shut and what the client
/// still sends is read and dropped for a moment, so the close is a FIN the client sees after
/// the GOAWAY, not a reset that could destroy it.
async fn refuse<IO: AsyncRead + AsyncWrite + Unpin>(mut io: IO) {
    const GOAWAY_PROTOCOL_ERROR: [u8; 17] = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let linger = async {
        io.write_all(&GOAWAY_PROTOCOL_ERROR).await?;
        io.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 64 * 1024;
        while left > 0 {
            match io.read(&mut sink).await? {
                0 => break,
                n => left -= n.min(left),
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), linger).await;
}

/// Serves an HTTP/2 connection the worker accepted (TLS with ALPN `h2`, or a cleartext one that
/// began with the preface, whose bytes read so far are in `read`), holding its place in the
/// worker's connection count until it ends; shutdown of the worker starts the graceful GOAWAY.
pub(crate) async fn serve_stream<S: Service, P>(
    service: Rc<S>,
    held: ConnShared<P>,
    stream: Stream,
    read: Bytes,
    peer: SocketAddr,
) {
    let shared = (*held).clone();
    let io = crate::upgrade::TransportIo::new(stream);
    let shutdown = shared.shutdown_started();
    // Boxed: inline, the HTTP/2 connection's state would size every connection task of the
    // worker, HTTP/1.1 ones included (5 KiB more per idle TLS connection, measured).
    let how = Box::pin(serve_connection(
        io,
        read,
        peer,
        (*service).clone(),
        &shared.config,
        &shared.config.http2,
        shutdown,
    ))
    .await;
    tracing::debug!(%peer, ?how, "HTTP/2 connection closed");
    drop(held);
}

/// Counts client resets in a sliding 10 s window.
struct ResetCounter {
    max: u32,
    count: u32,
    since: Instant,
}

impl ResetCounter {
    fn new(max: u32) -> Self {
        ResetCounter {
            max,
            count: 0,
            since: Instant::now(),
        }
    }

    /// Records one reset; `true` once the limit is passed.
    fn hit(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.since) > RESET_WINDOW {
            self.since = now;
            self.count = 0;
        }
        self.count += 1;
        self.count > self.max
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    ResetByClient,
}

/// One stream: the service's answer (or the client's reset, whichever comes first), then the
/// response. A panicking handler is answered 500, as over HTTP/1.1.
async fn stream<F: Future<Output = Response>>(
    start: Start<F>,
    mut respond: SendResponse<Bytes>,
    ctx: Rc<Ctx>,
) -> Outcome {
    let (response, head_request, recv, tunnel) = match start {
        Start::Answer(r) => (r, false, None, None),
        Start::Call(fut, head_request, recv, tunnel) => {
            let mut fut = pin!(fut);
            let answer = poll_fn(|cx| {
                if respond.poll_reset(cx).is_ready() {
                    return Poll::Ready(None);
                }
                match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                    Ok(Poll::Ready(r)) => Poll::Ready(Some(r)),
                    Ok(Poll::Pending) => Poll::Pending,
                    Err(_) => {
                        tracing::error!("handler panicked; answering 500");
                        Poll::Ready(Some(Response::new(500)))
                    }
                }
            })
            .await;
            match answer {
                Some(r) => (r, head_request, recv, tunnel),
                // The handler's future is dropped here: a cancelled request stops its work.
                None => return Outcome::ResetByClient,
            }
        }
    };
    if let Some(tunnel) = tunnel {
        let opened =
            respond::open_tunnel(&mut respond, response, tunnel, ctx.server_name, &ctx.watch);
        return match opened.await {
            Ok(()) | Err(send::SendError::Stalled) => Outcome::Done,
            Err(_) => Outcome::ResetByClient,
        };
    }
    match respond::send(
        &mut respond,
        response,
        head_request,
        ctx.server_name,
        &ctx.watch,
    )
    .await
    {
        Ok(()) => {
            if let Some(recv) = recv {
                body::drain(recv, ctx.body_rules).await;
            }
            Outcome::Done
        }
        Err(send::SendError::Reset) => Outcome::ResetByClient,
        Err(send::SendError::Body | send::SendError::Stalled) => Outcome::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boxed connection future of every HTTP/2 connection, idle or not: it holds h2's
    /// connection state, so each cold path that awaits something large (the refusal's linger
    /// with its read sink) is boxed where it is awaited rather than sizing every connection.
    #[test]
    fn connection_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let io = crate::upgrade::TransportIo::new(Stream::Tcp(c));
            let svc = crate::service_fn(|_r: crate::Request| async { Response::text("x") });
            let config = ServerConfig::default();
            let h2config = Http2Config::default();
            let fut = serve_connection(
                io,
                Bytes::new(),
                "127.0.0.1:1".parse().unwrap(),
                svc,
                &config,
                &h2config,
                std::future::pending::<()>(),
            );
            let size = std::mem::size_of_val(&fut);
            // 4,848 bytes when the refusal's linger was awaited inline; h2's own connection
            // state is 1,352 of the rest.
            assert!(size <= 2048, "HTTP/2 connection future is {size} bytes");
        });
    }
}
