//! Real certificates for TLS tests: a CA, server and client certificates made with rcgen,
//! written as PEM files, and rustls clients that trust that CA.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio_rustls::rustls::{self, pki_types::CertificateDer, pki_types::PrivateKeyDer};

/// A certificate authority, its PEM on disk, and what it signed.
pub struct Ca {
    pub cert: rcgen::Certificate,
    pub key: KeyPair,
    pub pem_path: PathBuf,
    pub dir: PathBuf,
}

/// A leaf certificate: its DER (to compare with what a handshake presented) and PEM files.
pub struct Leaf {
    pub der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory for this test's files.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("peregrine-tls-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Ca {
    pub fn new(tag: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Peregrine test CA {tag}"));
        let cert = params.self_signed(&key).unwrap();
        let dir = temp_dir(tag);
        let pem_path = dir.join("ca.pem");
        std::fs::write(&pem_path, cert.pem()).unwrap();
        Ca {
            cert,
            key,
            pem_path,
            dir,
        }
    }

    fn leaf(&self, file: &str, names: &[&str], client: bool) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let cert_path = self.dir.join(format!("{file}.crt"));
        let key_path = self.dir.join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        Leaf {
            der: cert.der().clone(),
            key_der: key.serialize_der(),
            cert_path,
            key_path,
        }
    }

    /// A server certificate for these DNS names.
    pub fn server(&self, file: &str, names: &[&str]) -> Leaf {
        self.leaf(file, names, false)
    }

    /// A client certificate (for mTLS).
    pub fn client(&self, file: &str, name: &str) -> Leaf {
        self.leaf(file, &[name], true)
    }

    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        roots
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client trusting `ca`, offering `alpn`, limited to `versions`.
pub fn client_config(
    ca: &Ca,
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
    client_cert: Option<&Leaf>,
) -> Arc<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(ca.roots());
    let mut config = match client_cert {
        None => builder.with_no_client_auth(),
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.der.clone()],
                PrivateKeyDer::try_from(leaf.key_der.clone()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A client that accepts any server certificate (to see which one a server presents for a name
/// no certificate covers). Signatures are still verified.
pub fn client_config_any_cert() -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider())))
        .with_no_client_auth();
    Arc::new(config)
}

#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
