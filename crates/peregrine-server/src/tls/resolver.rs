//! SNI: several certificates on one listener, swappable while the server runs.

use super::pem::read_certified_key;
use rustls::pki_types::{CertificateDer, DnsName, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// A certificate chain (end-entity first) and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFiles {
    /// PEM file with the certificate chain.
    pub cert: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertificateFiles {
    /// A chain and its key.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        CertificateFiles {
            cert: cert.into(),
            key: key.into(),
        }
    }
}

/// The certificates a listener serves, chosen per handshake by the client's SNI name.
///
/// The first certificate is the default: it answers clients that send no name (or an IP) and
/// names no certificate covers. A name is matched against each certificate's subject alternative
/// names, wildcards included, in the order given.
///
/// [`CertStore::reload`] reads the files again and swaps the whole set at once (an `Arc` behind a
/// lock held only for the swap or the clone): handshakes in progress finish with the old set,
/// new ones get the new one, no connection is dropped. A reload that fails keeps the old set.
#[derive(Debug)]
pub struct CertStore {
    files: Vec<CertificateFiles>,
    current: RwLock<Arc<Vec<Arc<CertifiedKey>>>>,
}

impl CertStore {
    /// Loads every certificate and key (each key must fit its certificate).
    pub fn load(files: Vec<CertificateFiles>) -> io::Result<CertStore> {
        let set = load_all(&files)?;
        Ok(CertStore {
            files,
            current: RwLock::new(Arc::new(set)),
        })
    }

    /// Reads the files again and, if every one loads, serves the new set from the next
    /// handshake on. On error the old set stays and the error is returned.
    pub fn reload(&self) -> io::Result<()> {
        let set = Arc::new(load_all(&self.files)?);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = set;
        tracing::info!(certificates = self.files.len(), "TLS certificates reloaded");
        Ok(())
    }

    /// The files this store reads.
    pub fn files(&self) -> &[CertificateFiles] {
        &self.files
    }

    fn snapshot(&self) -> Arc<Vec<Arc<CertifiedKey>>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The certificate for `name` (default when `None` or unmatched).
    pub fn pick(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let set = self.snapshot();
        let wanted = name.and_then(|n| DnsName::try_from(n).ok().map(|d| d.to_owned()));
        if let Some(wanted) = wanted {
            let wanted = ServerName::DnsName(wanted);
            // A few certificates per listener: parsing each end-entity DER (no crypto) costs far
            // less than the handshake's signature, so no name index is kept.
            for ck in set.iter() {
                if let Some(ee) = ck.cert.first() {
                    if valid_for(ee, &wanted) {
                        return Some(ck.clone());
                    }
                }
            }
        }
        set.first().cloned()
    }
}

fn valid_for(ee: &CertificateDer<'_>, name: &ServerName<'_>) -> bool {
    webpki::EndEntityCert::try_from(ee)
        .and_then(|c| c.verify_is_valid_for_subject_name(name))
        .is_ok()
}

fn load_all(files: &[CertificateFiles]) -> io::Result<Vec<Arc<CertifiedKey>>> {
    if files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TLS needs at least one certificate",
        ));
    }
    files
        .iter()
        .map(|f| read_certified_key(&f.cert, &f.key))
        .collect()
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name())
    }
}
