//! Reading certificate chains, private keys and CA bundles from PEM files, with the PEM reader
//! of `rustls-pki-types` (the maintained successor of `rustls-pemfile`).

use rustls::pki_types::pem::{self, PemObject};
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
    let rd = BufReader::new(File::open(path).map_err(|e| unreadable(e, role, path))?);
    let certs = CertificateDer::pem_reader_iter(rd)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(e, role, path))?;
    if certs.is_empty() {
        return Err(invalid(role, path, "has no CERTIFICATE block (PEM)"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) in a PEM file.
pub fn read_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    const ROLE: &str = "private key file";
    let rd = BufReader::new(File::open(path).map_err(|e| unreadable(e, ROLE, path))?);
    match PrivateKeyDer::from_pem_reader(rd) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(invalid(
            ROLE,
            path,
            "has no PRIVATE KEY block (PEM: PKCS#8, RSA or EC)",
        )),
        Err(e) => Err(pem_error(e, ROLE, path)),
    }
}

/// A certificate chain and its key, checked to belong together.
pub fn read_certified_key(cert: &Path, key: &Path) -> io::Result<Arc<CertifiedKey>> {
    let chain = read_certs(cert)?;
    let key_der = read_key(key)?;
    let provider = provider();
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

/// A PEM reading error: an I/O error keeps its kind, a malformed file is `InvalidData`.
fn pem_error(e: pem::Error, role: &str, path: &Path) -> io::Error {
    match e {
        pem::Error::Io(e) => unreadable(e, role, path),
        e => invalid(role, path, &format!("is not valid PEM: {e}")),
    }
}

/// "the private key file PATH has no ...".
fn invalid(role: &str, path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the {role} {} {what}", path.display()),
    )
}

/// The crypto provider every TLS object here uses.
pub(super) fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file under the temp directory, unique to this test process and `name`.
    fn file(name: &str, contents: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("peregrine-pem-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn a_file_without_the_block_names_what_is_missing() {
        let empty = file("empty.pem", "no PEM here\n");
        let e = read_certs(&empty).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("has no CERTIFICATE block"), "{e}");
        let e = read_key(&empty).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("has no PRIVATE KEY block"), "{e}");
        std::fs::remove_file(empty).unwrap();
    }

    #[test]
    fn malformed_pem_and_missing_files_are_errors_with_their_kind() {
        let bad = file(
            "bad.pem",
            "-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n",
        );
        let e = read_certs(&bad).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("is not valid PEM"), "{e}");
        let unterminated = file("open.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n");
        let e = read_key(&unterminated).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        std::fs::remove_file(bad).unwrap();
        std::fs::remove_file(unterminated).unwrap();
        let e = read_certs(Path::new("/nonexistent/peregrine/cert.pem")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("cannot read the certificate file"),
            "{e}"
        );
    }
}
