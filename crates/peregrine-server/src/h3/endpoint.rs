//! The QUIC side of a listener: the TLS configuration for QUIC (the TCP listener's, with ALPN
//! `h3`), a worker's QUIC endpoint on its UDP socket (`sockets`), and the accept loop that
//! hands each connection to the driver, after address validation (Retry) when too many
//! handshakes come from unvalidated addresses.

use super::conn;
use super::sockets::WorkerSocket;
use super::steer::WorkerCids;
use super::unvalidated::Unvalidated;
use crate::tls::TlsAcceptor;
use crate::worker::{Admitted, WorkerShared};
use crate::{ServerConfig, Service};
use quinn::crypto::rustls::QuicServerConfig;
use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// ALPN protocol id of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// HTTP/3 for a server: the QUIC crypto configuration made from its TLS acceptor. The
/// certificates are the acceptor's own [`CertStore`](crate::tls::CertStore), so a reload
/// applies to QUIC handshakes too; client authentication and the handshake timeout are the
/// acceptor's as well. 0-RTT is off unless
/// [`Http3Config::zero_rtt`](super::Http3Config::zero_rtt) turns it on. Resumption (and so
/// 0-RTT) works across the workers: every worker's QUIC crypto is a copy of the acceptor's
/// rustls configuration, whose session cache is one per acceptor (rustls accepts early data
/// only with such stateful, single-use resumption). Its stateless-reset key,
/// address-validation token key and connection-ID key are drawn once here and shared by every
/// worker's endpoint: a worker handed a datagram of a connection it does not hold (its client's
/// address changed while datagrams spread by address hash) recognises its connection ID and
/// sends a reset the client accepts, and a Retry token from one worker is valid at another.
///
/// ```no_run
/// use peregrine_server::h3::Http3;
/// use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
/// use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
/// let tls = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new("c.pem", "k.pem")]))?;
/// let http3 = Http3::new(&tls)?;
/// Server::new(ServerConfig::default())
///     .with_acceptor(tls)
///     .with_http3(http3)
///     .run_until_signal(service_fn(|_r: Request| async { Response::text("hi") }))?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Http3 {
    crypto: Arc<QuicServerConfig>,
    /// The same with early data accepted (for [`Http3Config::zero_rtt`](super::Http3Config::zero_rtt)).
    early_crypto: Arc<QuicServerConfig>,
    handshake_timeout: Duration,
    reset_key: Arc<ring::hmac::Key>,
    token_key: Arc<ring::hkdf::Prk>,
    cid_key: u64,
}

impl Http3 {
    /// The QUIC configuration for `tls`'s certificates: TLS 1.3 only (QUIC has no other),
    /// ALPN `h3`, early data only where the configuration asks for it; fresh random reset,
    /// token and connection-ID keys.
    pub fn new(tls: &TlsAcceptor) -> io::Result<Http3> {
        use ring::rand::{SecureRandom, SystemRandom};
        let rng = SystemRandom::new();
        let mut seed = [0u8; 64];
        rng.fill(&mut seed)
            .map_err(|_| io::Error::other("no system randomness for the QUIC keys"))?;
        let (token_seed, cid_seed) = seed.split_at(56);
        let token_key = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[]).extract(token_seed);
        let cid_key = u64::from_le_bytes(cid_seed.try_into().expect("8 bytes"));
        let reset_key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .map_err(|_| io::Error::other("no system randomness for the QUIC keys"))?;
        let mut rustls = (**tls.rustls_config()).clone();
        rustls.alpn_protocols = vec![ALPN_H3.to_vec()];
        rustls.max_early_data_size = 0;
        let crypto =
            QuicServerConfig::try_from(Arc::new(rustls.clone())).map_err(io::Error::other)?;
        // QUIC allows no other size than "any" (RFC 9001 §4.6.1); the copy shares the session
        // cache, so a ticket from one worker resumes at another.
        rustls.max_early_data_size = u32::MAX;
        let early_crypto =
            QuicServerConfig::try_from(Arc::new(rustls)).map_err(io::Error::other)?;
        Ok(Http3 {
            crypto: Arc::new(crypto),
            early_crypto: Arc::new(early_crypto),
            handshake_timeout: tls.handshake_timeout(),
            reset_key: Arc::new(reset_key),
            token_key: Arc::new(token_key),
            cid_key,
        })
    }

    /// A QUIC endpoint for one worker on its UDP socket (see `sockets`), on the current
    /// (worker's) runtime. Its connection IDs name the worker (`steer`), so that with
    /// connection-ID steering a client's datagrams reach it whatever the client's address.
    pub(crate) fn endpoint(
        &self,
        socket: WorkerSocket,
        config: &ServerConfig,
    ) -> io::Result<quinn::Endpoint> {
        let h3 = &config.http3;
        let mut transport = quinn::TransportConfig::default();
        let idle = quinn::IdleTimeout::try_from(config.timeouts.idle).map_err(io::Error::other)?;
        transport
            .max_concurrent_bidi_streams(h3.max_concurrent_streams.into())
            .max_idle_timeout(Some(idle))
            .stream_receive_window(h3.stream_receive_window.into())
            .receive_window(h3.receive_window.into());
        let crypto = if h3.zero_rtt {
            self.early_crypto.clone()
        } else {
            self.crypto.clone()
        };
        let mut server = quinn::ServerConfig::new(crypto, self.token_key.clone());
        server.transport_config(Arc::new(transport));
        let mut endpoint = quinn::EndpointConfig::new(self.reset_key.clone());
        // A worker drops a short-header packet whose connection ID its generator does not
        // recognise, so a reset needs every worker to recognise every worker's IDs: one key.
        let (cid_key, worker, workers) = (self.cid_key, socket.worker, socket.workers);
        endpoint.cid_generator(move || Box::new(WorkerCids::new(cid_key, worker, workers)));
        quinn::Endpoint::new(
            endpoint,
            Some(server),
            socket.socket,
            Arc::new(quinn::TokioRuntime),
        )
    }
}

impl std::fmt::Debug for Http3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http3")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// Accepts QUIC connections on `endpoint` until the worker shuts down, each counted against the
/// connection limits and served in a task of its own; then refuses new ones, while the
/// connections already open finish (their drivers send `GOAWAY`). A connection from an
/// unvalidated address while `max_unvalidated_handshakes` such handshakes are under way is
/// sent a Retry instead, before it costs a slot or any state.
pub(crate) async fn accept_loop<S: Service, P: 'static>(
    endpoint: quinn::Endpoint,
    http3: Http3,
    shared: Rc<WorkerShared<P>>,
    service: Rc<S>,
) {
    let limit = shared.config.http3.max_unvalidated_handshakes;
    let unvalidated = Rc::new(Cell::new(0));
    let accepting = async {
        while let Some(incoming) = endpoint.accept().await {
            let validated = incoming.remote_address_validated();
            if !validated && unvalidated.get() >= limit {
                // Unvalidated means quinn may retry it; were it refused, drop it all the same.
                if let Err(e) = incoming.retry() {
                    e.into_incoming().ignore();
                }
                continue;
            }
            let handshake = (!validated).then(|| Unvalidated::start(&unvalidated));
            let peer = incoming.remote_address();
            let Some(admitted) = Admitted::wait(&shared, peer).await else {
                incoming.refuse();
                continue;
            };
            let (service, timeout) = (service.clone(), http3.handshake_timeout);
            tokio::task::spawn_local(async move {
                let (held, addr_hold) = admitted.into_parts();
                conn::serve(incoming, held, service, timeout, handshake).await;
                drop(addr_hold);
            });
        }
    };
    tokio::select! {
        () = accepting => {}
        () = shared.shutdown_started() => {}
    }
    endpoint.set_server_config(None);
    // The endpoint's driver keeps running for the open connections (they hold it).
}
