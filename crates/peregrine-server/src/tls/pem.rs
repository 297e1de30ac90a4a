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
    read_certs_as(path, "certificate file")
}

/// [`read_certs`], errors naming the file's `role` ("certificate file", "client CA file").
fn read_certs_as(path: &Path, role: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let mut rd = BufReader::new(File::open(path).map_err(|e| unreadable(e, role, path))?);
    let certs = rustls_pemfile::certs(&mut rd)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(e, role, path))?;
    if certs.is_empty() {
        return Err(invalid(role, path, "has no CERTIFICATE block (PEM)"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) in a PEM file.
pub fn read_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    const ROLE: &str = "private key file";
    let mut rd = BufReader::new(File::open(path).map_err(|e| unreadable(e, ROLE, path))?);
    rustls_pemfile::private_key(&mut rd)
        .map_err(|e| unreadable(e, ROLE, path))?
        .ok_or_else(|| {
            invalid(
                ROLE,
                path,
                "has no PRIVATE KEY block (PEM: PKCS#8, RSA or EC)",
            )
        })
}

/// A certificate chain and its key, checked to belong together.
pub fn read_certified_key(cert: &Path, key: &Path) -> io::Result<Arc<CertifiedKey>> {
    let chain = read_certs(cert)?;
    let key_der = read_key(key)?;
    let provider = super::provider();
    CertifiedKey::from_der(chain, key_der, &provider)
        .map(Arc::new)
        .map_err(|e| {
            invalid(
                "private key file",
                key,
                &format!("does not fit the certificate file {}: {e}", cert.display()),
            )
        })
}

/// The CA certificates client certificates must chain to (mTLS).
pub fn read_roots(path: &Path) -> io::Result<RootCertStore> {
    const ROLE: &str = "client CA file";
    let mut roots = RootCertStore::empty();
    for cert in read_certs_as(path, ROLE)? {
        roots
            .add(cert)
            .map_err(|e| invalid(ROLE, path, &format!("has a bad CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// "cannot read the certificate file PATH: ERROR", keeping the error's kind.
fn unreadable(e: io::Error, role: &str, path: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot read the {role} {}: {e}", path.display()),
    )
}

/// "the private key file PATH has no ...".
fn invalid(role: &str, path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the {role} {} {what}", path.display()),
    )
}
