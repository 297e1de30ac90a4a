//! [`ProxyProtocolAcceptor`]: the transport step that requires the header on a listener.

use super::{read_header, ProxyHeader};

/// An [`Acceptor`](crate::transport::Acceptor) for a listener behind a load balancer that
/// speaks the PROXY protocol (HAProxy `send-proxy` / `send-proxy-v2`, AWS NLB, ...): every TCP
/// connection must start with a v1 or v2 header, read (within `timeout`) in the connection's
/// own task; the header's source address becomes the connection's peer (`Request::peer_addr`),
/// then `inner` (plain, or TLS) takes the stream. A connection without a valid header is closed
/// without a response. Unix-socket connections are passed to `inner` as they are.
///
/// Only put it on a listener that only the balancer can reach: the header is believed.
///
/// ```no_run
/// use peregrine_server::proxy_protocol::ProxyProtocolAcceptor;
/// use peregrine_server::transport::PlainAcceptor;
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let handle = Server::new(ServerConfig::default())
///     .with_acceptor(ProxyProtocolAcceptor::new(PlainAcceptor))
///     .serve(service_fn(|req: Request| async move { Response::text(req.peer_addr().to_string()) }))
///     .unwrap();
/// # handle.shutdown();
/// ```
#[derive(Debug, Clone)]
pub struct ProxyProtocolAcceptor<A> {
    inner: A,
    timeout: std::time::Duration,
}

impl<A: crate::transport::Acceptor> ProxyProtocolAcceptor<A> {
    /// Requires the header (5 s to arrive), then hands the stream to `inner`.
    pub fn new(inner: A) -> Self {
        ProxyProtocolAcceptor {
            inner,
            timeout: std::time::Duration::from_secs(5),
        }
    }

    /// How long the header may take to arrive.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<A: crate::transport::Acceptor> crate::transport::Acceptor for ProxyProtocolAcceptor<A> {
    fn accept(&self, conn: crate::transport::Accepted) -> crate::transport::Accept {
        use crate::transport::{Accept, Accepted, Stream};
        let Stream::Tcp(tcp) = conn.stream else {
            return self.inner.accept(conn);
        };
        let (inner, timeout, peer) = (self.inner.clone(), self.timeout, conn.peer);
        Accept::Proxied(Box::pin(async move {
            let parsed = match read_header(&tcp, timeout).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "PROXY protocol header refused; closing");
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
                }
            };
            let source = match parsed.header {
                ProxyHeader::Proxied { source, .. } => Some(source),
                ProxyHeader::Local => None,
            };
            let next = Accepted {
                stream: Stream::Tcp(tcp),
                peer: source.unwrap_or(peer),
            };
            let stream = match inner.accept(next) {
                Accept::Ready(s) => s,
                Accept::Handshake(h) => h.await?,
                Accept::Proxied(p) => p.await?.0,
            };
            Ok((stream, source))
        }))
    }
}
