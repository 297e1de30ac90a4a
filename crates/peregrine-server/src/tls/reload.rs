//! Reloading certificates without a restart: on SIGHUP, or when the files change.

use super::CertStore;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Reloads `store` on every SIGHUP, from a small thread of its own (for the life of the
/// process). A failed reload is logged and the old certificates stay. It may be called inside
/// a tokio runtime (`App::serve` from `#[tokio::main]`): the thread runs its own.
pub fn reload_on_sighup(store: Arc<CertStore>) -> io::Result<()> {
    let (ready, registered) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("peregrine-tls-reload".into())
        .spawn(move || {
            // Built on this thread: blocking on a runtime inside the caller's one would panic.
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return drop(ready.send(Err(e))),
            };
            rt.block_on(async move {
                let signal = tokio::signal::unix::signal;
                let mut hup = match signal(tokio::signal::unix::SignalKind::hangup()) {
                    Ok(hup) => hup,
                    Err(e) => return drop(ready.send(Err(e))),
                };
                let _ = ready.send(Ok(()));
                while hup.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading TLS certificates");
                    if let Err(e) = store.reload() {
                        tracing::error!(error = %e, "TLS reload failed; keeping the old certificates");
                    }
                }
            })
        })?;
    // Registered before returning, so a SIGHUP right after this call is not lost (or fatal).
    registered
        .recv()
        .map_err(|_| io::Error::other("the TLS reload thread ended before registering"))?
}

/// Reloads `store` when the modification time of any of its files changes, checked every
/// `every` from a small thread of its own (for the life of the process). Tools that renew
/// certificates (certbot, cert-manager) replace the files; the new ones are served from the next
/// check on. A reload that fails (say, the key written but not yet the certificate) is tried
/// again at the next check.
pub fn reload_when_changed(store: Arc<CertStore>, every: Duration) -> io::Result<()> {
    // Taken now, not in the thread: a change right after this call must count as a change.
    let mut seen = stamps(&store);
    std::thread::Builder::new()
        .name("peregrine-tls-watch".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let now = stamps(&store);
            if now != seen {
                match store.reload() {
                    Ok(()) => seen = now,
                    Err(e) => tracing::warn!(error = %e, "TLS files changed but do not load yet"),
                }
            }
        })?;
    Ok(())
}

fn stamps(store: &CertStore) -> Vec<Option<SystemTime>> {
    store
        .files()
        .iter()
        .flat_map(|f| [&f.cert, &f.key])
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}
