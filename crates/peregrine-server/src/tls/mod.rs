//! TLS termination with rustls: certificates from PEM files, SNI across several certificates,
//! ALPN (`h2`, `http/1.1`), TLS 1.2 and 1.3 only, reload without restart, a handshake timeout and
//! optional client-certificate verification (mTLS).
//!
//! The crypto provider is rustls' `ring`: it builds with a C compiler alone, while `aws-lc-rs`
//! needs cmake and several more minutes of build on the project's 2-core machines; both offer
//! the same cipher suites here (ECDHE with AES-GCM or ChaCha20-Poly1305 only).
//!
//! ```no_run
//! use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
//! let config = TlsConfig::new(vec![
//!     CertificateFiles::new("example.com.crt", "example.com.key"),
//!     CertificateFiles::new("api.example.net.crt", "api.example.net.key"),
//! ]);
//! let acceptor = TlsAcceptor::new(&config).unwrap();
//! // On SIGHUP the files are read again and new handshakes use them.
//! peregrine_server::tls::reload_on_sighup(acceptor.certificates().clone()).unwrap();
//! ```

mod acceptor;
mod pem;
mod reload;
mod resolver;
mod transport;

pub use acceptor::{
    negotiated, ClientAuth, Negotiated, TlsAcceptor, TlsConfig, TlsStream, ALPN_H2, ALPN_HTTP11,
};
pub use pem::{read_certs, read_key, read_roots};
pub use reload::{reload_on_sighup, reload_when_changed};
pub use resolver::{CertStore, CertificateFiles};
pub use transport::TlsTransport;
