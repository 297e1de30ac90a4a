//! Reading certificate chains, private keys and CA bundles from PEM files.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;
use std::sync::Arc;

/// Every certificate in a PEM file, in order (end-entity first for a chain).
pub fn read_certs(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let mut rd = BufReader::new(File::open(path).map_err(|e| with_path(e, path))?);
    let certs = rustls_pemfile::certs(&mut rd)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| with_path(e, path))?;
    if certs.is_empty() {
        return Err(invalid(path, "no CERTIFICATE block"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) in a PEM file.
pub fn read_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    let mut rd = BufReader::new(File::open(path).map_err(|e| with_path(e, path))?);
    rustls_pemfile::private_key(&mut rd)
        .map_err(|e| with_path(e, path))?
        .ok_or_else(|| invalid(path, "no PRIVATE KEY block"))
}

/// A certificate chain and its key, checked to belong together.
pub fn read_certified_key(cert: &Path, key: &Path) -> io::Result<Arc<CertifiedKey>> {
    let chain = read_certs(cert)?;
    let key_der = read_key(key)?;
    let provider = super::provider();
    CertifiedKey::from_der(chain, key_der, &provider)
        .map(Arc::new)
        .map_err(|e| invalid(key, &format!("key does not fit {}: {e}", cert.display())))
}

/// The CA certificates client certificates must chain to (mTLS).
pub fn read_roots(path: &Path) -> io::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| invalid(path, &format!("bad CA certificate: {e}")))?;
    }
    Ok(roots)
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}
