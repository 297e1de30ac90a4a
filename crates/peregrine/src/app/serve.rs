//! Serving an [`App`] on the engine: `serve`, `run`, `run_async`, `run_until`, with the one
//! body limit agreed with the engine, the per-worker initialisers as its worker-start hook, and
//! TLS when the [`Config`] has it (certificates reloaded on SIGHUP).

use super::{App, AppService};
use crate::config::Config;
use peregrine_server::{Server, ServerConfig, ServerHandle};
use std::future::Future;
use std::io;

impl App {
    /// Starts serving on the engine; returns once the workers listen. Takes a [`ServerConfig`]
    /// (cleartext) or a [`Config`] (with TLS, feature `tls`: then a thread of its own reloads
    /// the certificates on every SIGHUP, for the life of the process).
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    /// use peregrine::server::ServerConfig;
    /// let mut config = ServerConfig::default();
    /// config.addr = "127.0.0.1:0".parse().unwrap();
    /// let handle = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .serve(config)?;
    /// println!("listening on {}", handle.local_addr());
    /// handle.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// It does not block and works inside or outside a tokio runtime (the workers run their
    /// own runtimes on their own threads). A route conflict or a missing state is an
    /// `InvalidInput` error; so is a certificate or key that does not load.
    pub fn serve(self, config: impl Into<Config>) -> io::Result<ServerHandle> {
        let config = config.into();
        let (server, service) = self.build_server(config.server.clone())?;
        let started = start(server, service, &config)?;
        #[cfg(feature = "tls")]
        if let Some(certs) = &started.certs {
            peregrine_server::tls::reload_on_sighup(certs.clone())?;
        }
        Ok(started.handle)
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully. Blocks the calling thread.
    /// Over TLS when the configuration has certificates (`TLS_CERT`/`TLS_KEY`, feature
    /// `tls`), reloading them on SIGHUP.
    ///
    /// Inside a tokio runtime (`#[tokio::main]`, `#[tokio::test]`) this returns an error
    /// instead of panicking; use [`App::run_async`] there.
    ///
    /// ```no_run
    /// use peregrine::{get, App, Request};
    ///
    /// // ADDR, WORKERS, TLS_CERT, ... from the environment, or --addr, --tls-cert, ... flags.
    /// let config = peregrine::config::from_env_and_args(std::env::args().skip(1))
    ///     .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    /// App::new()
    ///     .route("/", get(|_r: Request| async { "hi" }))
    ///     .run(config)?; // returns after SIGTERM/SIGINT and the drain
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn run(self, config: impl Into<Config>) -> io::Result<()> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(io::Error::other(
                "App::run blocks the thread and cannot be called inside a tokio runtime \
                 (#[tokio::main]); use `app.run_async(config).await` instead",
            ));
        }
        // Only waits for signals; the workers run on their own threads.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(self.run_async(config))
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully: [`App::run`] for use inside
    /// an existing tokio runtime (`#[tokio::main]`). The workers still run on their own
    /// threads; the calling task only waits (and reloads the certificates on SIGHUP).
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    ///
    /// #[tokio::main]
    /// async fn main() -> std::io::Result<()> {
    ///     App::new()
    ///         .route("/", get(|_req: Request| async { "hi" }))
    ///         .run_async(peregrine::ServerConfig::default())
    ///         .await
    /// }
    /// ```
    pub async fn run_async(self, config: impl Into<Config>) -> io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        // Installed before serving, so a signal during startup is not fatal.
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        self.run_until(config, async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
        })
        .await
    }

    /// Serves until `shutdown` completes, then shuts down gracefully (in-flight requests
    /// finish, up to the configured `shutdown_timeout`). For use inside a tokio runtime.
    /// Returns early, with the error, when the server stops by itself because its workers kept
    /// dying (see [`ServerHandle::join`]), so that `main` exits non-zero for its supervisor.
    ///
    /// ```
    /// use peregrine::{App, Request, get};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # rt.block_on(async {
    /// let mut config = peregrine::ServerConfig::default();
    /// config.addr = "127.0.0.1:0".parse().unwrap();
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .run_until(config, async { let _ = stopped.await; });
    /// stop.send(()).unwrap();
    /// server.await.unwrap();
    /// # });
    /// ```
    ///
    /// With TLS in the configuration (feature `tls`) the listener speaks HTTPS, HTTP/2 or
    /// HTTP/1.1 by ALPN (`h2` offered with the `http2` feature), and while it waits for
    /// `shutdown` every SIGHUP reads the certificate files again (new handshakes use them; a
    /// reload that fails is logged and the old certificates stay). Listening for SIGHUP takes
    /// the runtime's I/O driver: build the runtime with `enable_all` (as `#[tokio::main]` and
    /// `#[tokio::test]` do).
    ///
    /// ```no_run
    /// # #[cfg(feature = "tls")] {
    /// use peregrine::config::Config;
    /// use peregrine::tls::{CertificateFiles, TlsConfig};
    /// use peregrine::{App, Request, get};
    /// # async fn serve() -> std::io::Result<()> {
    /// let tls = TlsConfig::new(vec![CertificateFiles::new("cert.pem", "key.pem")]);
    /// let config = Config::new(peregrine::ServerConfig::default()).with_tls(tls);
    /// App::new()
    ///     .route("/", get(|_req: Request| async { "hi over TLS" }))
    ///     .run_until(config, async { let _ = tokio::signal::ctrl_c().await; })
    ///     .await
    /// # }
    /// # }
    /// ```
    pub async fn run_until(
        self,
        config: impl Into<Config>,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let config = config.into();
        let reloads = Reloads::install(&config)?;
        let (server, service) = self.build_server(config.server.clone())?;
        // Starting and stopping join threads: keep that off the runtime's own threads.
        let started = tokio::task::spawn_blocking(move || start(server, service, &config))
            .await
            .map_err(io::Error::other)??;
        // A server that stopped by itself (its workers kept dying) ends the wait too, so the
        // program exits with the error for its supervisor instead of serving nothing.
        let stopped_by_itself = tokio::select! {
            _ = shutdown => false,
            _ = reloads.run(&started) => false,
            _ = started.handle.stopped() => true,
        };
        let handle = started.handle;
        if stopped_by_itself {
            return tokio::task::spawn_blocking(move || handle.join())
                .await
                .map_err(io::Error::other)?;
        }
        tokio::task::spawn_blocking(move || handle.shutdown())
            .await
            .map_err(io::Error::other)
    }

    /// The engine [`Server`] for this app and the service it runs, configured exactly as
    /// [`App::serve`] would (the one body limit, the per-worker initialisers as worker-start
    /// hooks), for what the engine offers beyond `serve`: an acceptor of one's own, HTTP/2-only
    /// say ([`Server::with_acceptor`]), listeners handed over by systemd
    /// ([`Server::with_listener`]). TLS needs none of this: give `run` or `serve` a [`Config`]
    /// with certificates.
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    /// let config = peregrine::config::from_env_and_args(std::env::args().skip(1))
    ///     .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    /// let (server, service) = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .into_server(config.server)?;
    /// // e.g. `server.with_acceptor(peregrine::server::h2::Http2OnlyAcceptor)` (feature `http2`)
    /// server.run_until_signal(service)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// A route conflict or a missing state is an `InvalidInput` error.
    pub fn into_server(self, config: ServerConfig) -> io::Result<(Server, AppService)> {
        self.build_server(config)
    }

    /// The engine server for this app, with the per-worker initialisers as its worker-start
    /// hook (so they run before a worker accepts), and the service it runs.
    fn build_server(self, config: ServerConfig) -> io::Result<(Server, AppService)> {
        let service = self
            .try_into_service()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut server = Server::new(config);
        if service.shared.has_worker_inits {
            let worker = service.shared.worker.clone();
            server = server.on_worker_start(move |_index| {
                let worker = worker.clone();
                async move {
                    // The engine's error names the worker and the hook: the initialiser's
                    // error goes through as it is (an `io::Error` keeps its kind).
                    match worker.init().await {
                        Ok(_) => Ok(()),
                        Err(e) => Err(match e.downcast::<io::Error>() {
                            Ok(io) => *io,
                            Err(other) => io::Error::other(other),
                        }),
                    }
                }
            });
        }
        Ok((server, service))
    }
}

/// A running server, and the certificates it serves when it speaks TLS (to reload them).
struct Started {
    handle: ServerHandle,
    #[cfg(feature = "tls")]
    certs: Option<std::sync::Arc<peregrine_server::tls::CertStore>>,
}

/// Serves `service` on `server`, behind a TLS acceptor when `config` has TLS settings (the
/// certificates are read here: a file that does not load is an error before any worker starts).
fn start(server: Server, service: AppService, config: &Config) -> io::Result<Started> {
    let mut server = server.with_drain_signal(config.drain_signal.clone());
    if let Some(events) = &config.events {
        server = server.with_events(events.clone());
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let acceptor = peregrine_server::tls::TlsAcceptor::new(tls)?;
        let certs = acceptor.certificates().clone();
        // Built with `http3`: HTTP/3 on the same port over UDP, same certificates.
        #[cfg(feature = "http3")]
        let server = server.with_http3(peregrine_server::h3::Http3::new(&acceptor)?);
        let handle = server.with_acceptor(acceptor).serve(service)?;
        tracing::info!(
            addr = %handle.local_addr(),
            certificates = certs.files().len(),
            alpn = ?tls.alpn.iter().map(|p| String::from_utf8_lossy(p)).collect::<Vec<_>>(),
            "serving TLS"
        );
        return Ok(Started {
            handle,
            certs: Some(certs),
        });
    }
    #[cfg(not(feature = "tls"))]
    let _ = config;
    Ok(Started {
        handle: server.serve(service)?,
        #[cfg(feature = "tls")]
        certs: None,
    })
}

/// Certificate reloads on SIGHUP while `run_until` waits: only for a TLS listener (a cleartext
/// server leaves SIGHUP's disposition alone).
struct Reloads {
    #[cfg(feature = "tls")]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Reloads {
    /// Registers for SIGHUP before the server starts, so one sent as soon as it listens is
    /// neither lost nor fatal.
    fn install(config: &Config) -> io::Result<Reloads> {
        #[cfg(feature = "tls")]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let hangup = match config.tls {
                Some(_) => Some(signal(SignalKind::hangup())?),
                None => None,
            };
            Ok(Reloads { hangup })
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = config;
            Ok(Reloads {})
        }
    }

    /// Reloads `started`'s certificates on every SIGHUP; never completes on its own.
    async fn run(self, started: &Started) {
        #[cfg(feature = "tls")]
        if let (Some(mut hangup), Some(certs)) = (self.hangup, &started.certs) {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading TLS certificates");
                let certs = certs.clone();
                // Reading files blocks: off the runtime's threads.
                match tokio::task::spawn_blocking(move || certs.reload()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "TLS reload failed; keeping the old certificates")
                    }
                    Err(e) => tracing::error!(error = %e, "TLS reload did not run"),
                }
            }
        }
        #[cfg(not(feature = "tls"))]
        let _ = (self, started);
        std::future::pending::<()>().await
    }
}
