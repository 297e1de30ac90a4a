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
