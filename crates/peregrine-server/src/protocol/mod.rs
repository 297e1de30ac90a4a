//! Protocol selection, the one place that decides which driver serves a connection, above both
//! drivers (which never name each other): HTTP/2 when the transport negotiated `h2` by ALPN
//! (TLS, or an acceptor such as [`Http2OnlyAcceptor`](crate::h2::Http2OnlyAcceptor) that says
//! so), else HTTP/1.1, whose driver hands a cleartext connection that opens with the h2c preface
//! ([`preface`]) back here to go on as HTTP/2. Every accept path (plain, TLS, PROXY protocol,
//! with and without engine events) serves its connections through [`serve`].

#[cfg(feature = "http2")]
pub(crate) mod preface;

use crate::h1::{self, Held};
use crate::transport::Stream;
use crate::Service;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;

/// Serves `stream` with the driver its protocol needs, until it closes.
///
/// Not `async`: the HTTP/1.1 driver's future is returned as it is (an idle connection's task is
/// sized by it, see `h1::serve`), and an HTTP/2 one is boxed beside it.
pub(crate) fn serve<S: Service>(
    service: Rc<S>,
    held: Held,
    stream: Stream,
    peer: SocketAddr,
) -> impl Future<Output = ()> {
    #[cfg(feature = "http2")]
    {
        use futures_util::future::Either;
        if crate::transport::Transport::http2(&stream) {
            let read = bytes::Bytes::new();
            return Either::Right(Box::pin(crate::h2::serve_stream(
                service, held, stream, read, peer,
            )));
        }
        Either::Left(h1::serve(service, held, stream, peer, ToHttp2))
    }
    #[cfg(not(feature = "http2"))]
    h1::serve(service, held, stream, peer)
}

/// The HTTP/2 driver as the HTTP/1.1 driver gets it: where a connection that opened with the
/// h2c preface goes on, with the bytes already read.
#[cfg(feature = "http2")]
#[derive(Clone, Copy)]
struct ToHttp2;

#[cfg(feature = "http2")]
impl h1::Http2Handoff for ToHttp2 {
    fn serve<S: Service>(
        self,
        service: Rc<S>,
        held: Held,
        stream: Stream,
        read: bytes::Bytes,
        peer: SocketAddr,
    ) -> impl Future<Output = ()> {
        crate::h2::serve_stream(service, held, stream, read, peer)
    }
}

#[cfg(test)]
mod tests {
    /// What an idle connection costs is mostly the task tokio allocates for it, sized by the
    /// largest state of its future (this one, for every accept path); this guards the budget
    /// against accidental growth (an inlined timer, buffer or request would add hundreds of
    /// bytes).
    #[test]
    fn idle_connection_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let shared = crate::h1::shared_for_test();
            let svc = crate::service_fn(|_r: crate::Request| async { crate::Response::text("x") });
            let held = crate::h1::Held::for_test(&shared);
            let c = crate::transport::Stream::Tcp(c);
            let fut = super::serve(
                std::rc::Rc::new(svc),
                held,
                c,
                "127.0.0.1:1".parse().unwrap(),
            );
            // Tokio's task cell is the future plus 96 bytes of header and trailer, rounded up to
            // 128 bytes: at most 160 bytes of future keeps an idle connection's task in 256.
            let size = std::mem::size_of_val(&fut);
            assert!(size <= 160, "connection future is {size} bytes");
        });
    }
}
