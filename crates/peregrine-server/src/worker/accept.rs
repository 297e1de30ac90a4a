//! The accept loop: each connection is counted against the limits, then handed to the
//! acceptor step (identity for plain sockets, a handshake for TLS), then served by the driver in
//! a task of its own.

use super::limits::Slot;
use crate::events::{emit_close, ConnectionClosed, ConnectionOpened, EngineEvents, RejectReason};
use crate::h1::{Held, Shared};
use crate::listener::AsyncListener;
use crate::protocol;
use crate::transport::{Accept, Accepted, Acceptor, Stream};
use crate::Service;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Accepts until the worker stops (the caller drops this future).
pub(super) async fn accept_loop<S: Service, A: Acceptor>(
    listener: &AsyncListener,
    acceptor: &A,
    shared: &Rc<Shared>,
    service: &Rc<S>,
) {
    loop {
        let accepted = match next(listener).await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE/ENFILE/ENOBUFS and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = accepted.peer;
        // Past its address's cap, the connection is closed at once. Unix-socket
        // peers have no address to count.
        let addr_hold = if matches!(accepted.stream, Stream::Unix(_)) {
            None
        } else {
            let Ok(hold) = shared.global.hold_addr(peer.ip()) else {
                tracing::debug!(%peer, "per-address connection cap reached; closing");
                if let Some(events) = &shared.events {
                    let reason = RejectReason::LimitReached;
                    emit_close(&**events, reason, "max_connections_per_addr", peer);
                }
                continue;
            };
            hold
        };
        // Then a slot: at the limit, this closes an idle connection or waits (the next clients
        // wait in the backlog meanwhile).
        if let Some(events) = &shared.events {
            // Told before the wait (which may close an idle connection, reported by it).
            if shared.global.is_full() {
                let (reason, detail) = (RejectReason::LimitReached, "max_connections: waiting");
                emit_close(&**events, reason, detail, peer);
            }
        }
        let slot = Slot::acquire(&shared.global, &shared.idle).await;
        let held = Held::new(shared, slot);
        if let Some(events) = &shared.events {
            // Someone listens (`Server::with_events`): this connection's task reports its
            // opening and closing. Only then, so the default task stays as it is.
            let (events, service) = (events.clone(), service.clone());
            let worker = crate::events::current_worker();
            events.connection_opened(&ConnectionOpened { peer, worker });
            let accept = acceptor.accept(accepted);
            tokio::task::spawn_local(async move {
                let _hold = addr_hold;
                let opened = Instant::now();
                let stream = match accept {
                    Accept::Ready(stream) => Some((stream, peer)),
                    Accept::Handshake(handshake) => handshake.await.ok().map(|s| (s, peer)),
                    Accept::Proxied(proxied) => match proxied.await {
                        Ok((s, real)) => Some((s, real.unwrap_or(peer))),
                        Err(e) => {
                            report_proxy_refusal(&*events, &e, peer);
                            None
                        }
                    },
                };
                match stream {
                    Some((stream, peer)) => protocol::serve(service, held, stream, peer).await,
                    None => drop(held),
                }
                events.connection_closed(&ConnectionClosed {
                    peer,
                    worker,
                    duration: opened.elapsed(),
                });
            });
            continue;
        }
        match (acceptor.accept(accepted), addr_hold) {
            (Accept::Ready(stream), None) => {
                tokio::task::spawn_local(protocol::serve(service.clone(), held, stream, peer));
            }
            // Only with a cap: the hold lives as long as the connection (a larger task, by the
            // hold's 32 bytes, so the uncapped default keeps its size).
            (Accept::Ready(stream), Some(hold)) => {
                let serve = protocol::serve(service.clone(), held, stream, peer);
                tokio::task::spawn_local(async move {
                    let _hold = hold;
                    serve.await
                });
            }
            // A handshake runs in the connection's own task; a failed one closes silently.
            // The PROXY protocol: the header is read in the connection's own task too, and its
            // source becomes the connection's peer.
            (Accept::Proxied(proxied), hold) => {
                let service = service.clone();
                tokio::task::spawn_local(async move {
                    let _hold = hold;
                    if let Ok((stream, real)) = proxied.await {
                        protocol::serve(service, held, stream, real.unwrap_or(peer)).await
                    }
                });
            }
            (Accept::Handshake(handshake), hold) => {
                let service = service.clone();
                tokio::task::spawn_local(async move {
                    let _hold = hold;
                    if let Ok(stream) = handshake.await {
                        protocol::serve(service, held, stream, peer).await
                    }
                });
            }
        }
    }
}

/// The next connection from the listener; in a fault-injection build, the injected accept
/// error instead while there is one (`Fault::AcceptFails`).
async fn next(listener: &AsyncListener) -> std::io::Result<Accepted> {
    #[cfg(feature = "fault-injection")]
    return crate::server::fault::or_accept_error(listener.accept()).await;
    #[cfg(not(feature = "fault-injection"))]
    listener.accept().await
}

/// A connection accepted outside the accept loop (a QUIC endpoint's), counted as a TCP one:
/// its address's place under `max_connections_per_addr` and a slot under `max_connections`.
#[cfg(feature = "http3")]
pub(crate) struct Admitted<P> {
    held: super::ConnShared<P>,
    addr: Option<super::limits::AddrHold>,
}

#[cfg(feature = "http3")]
impl<P> Admitted<P> {
    /// Waits for a slot as the accept loop does; `None` when `peer`'s address is at its cap.
    pub(crate) async fn wait(
        shared: &Rc<super::WorkerShared<P>>,
        peer: std::net::SocketAddr,
    ) -> Option<Self> {
        let Ok(addr) = shared.global.hold_addr(peer.ip()) else {
            tracing::debug!(%peer, "per-address connection cap reached; refusing");
            return None;
        };
        let slot = Slot::acquire(&shared.global, &shared.idle).await;
        Some(Admitted {
            held: super::ConnShared::new(shared, slot),
            addr,
        })
    }

    /// The connection's hold on the worker, and its place under the per-address cap (both
    /// given back when dropped).
    pub(crate) fn into_parts(self) -> (super::ConnShared<P>, Option<super::limits::AddrHold>) {
        (self.held, self.addr)
    }
}

/// Reports a connection closed because its PROXY header was malformed, too large or late (a
/// client that closed, or a failed handshake behind the header, is no refusal).
#[cold]
fn report_proxy_refusal(events: &dyn EngineEvents, e: &std::io::Error, peer: std::net::SocketAddr) {
    use crate::proxy_protocol::ReadError;
    let refused = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ReadError>());
    if let Some(err) = refused.filter(|r| !matches!(r, ReadError::Io(_))) {
        emit_close(events, RejectReason::ProxyProtocol, &err.to_string(), peer);
    }
}
