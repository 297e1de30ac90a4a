//! Serving an [`App`] on the engine: `serve`, `run`, `run_async`, `run_until`, with the one
//! body limit agreed with the engine and the per-worker initialisers as its worker-start hook.

use super::{App, AppService};
use peregrine_server::{Server, ServerConfig, ServerHandle};
use std::future::Future;

impl App {
    /// Starts serving on the engine; returns once the workers listen.
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
    /// `InvalidInput` error.
    pub fn serve(self, config: ServerConfig) -> std::io::Result<ServerHandle> {
        let (server, service) = self.build_server(config)?;
        server.serve(service)
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully. Blocks the calling thread.
    ///
    /// Inside a tokio runtime (`#[tokio::main]`, `#[tokio::test]`) this returns an error
    /// instead of panicking; use [`App::run_async`] there.
    ///
    /// ```no_run
    /// use peregrine::{get, App, Request};
    ///
    /// // ADDR, WORKERS, ... from the environment, or --addr, --workers flags.
    /// let config = peregrine::config::from_env_and_args(std::env::args().skip(1))
    ///     .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    /// App::new()
    ///     .route("/", get(|_r: Request| async { "hi" }))
    ///     .run(config)?; // returns after SIGTERM/SIGINT and the drain
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn run(self, config: ServerConfig) -> std::io::Result<()> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(std::io::Error::other(
                "App::run blocks the thread and cannot be called inside a tokio runtime \
                 (#[tokio::main]); use `app.run_async(config).await` instead",
            ));
        }
        let (server, service) = self.build_server(config)?;
        server.run_until_signal(service)
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully: [`App::run`] for use inside
    /// an existing tokio runtime (`#[tokio::main]`). The workers still run on their own
    /// threads; the calling task only waits.
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
    pub async fn run_async(self, config: ServerConfig) -> std::io::Result<()> {
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
    pub async fn run_until(
        self,
        config: ServerConfig,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let (server, service) = self.build_server(config)?;
        // Starting and stopping join threads: keep that off the runtime's own threads.
        let handle = tokio::task::spawn_blocking(move || server.serve(service))
            .await
            .map_err(std::io::Error::other)??;
        shutdown.await;
        tokio::task::spawn_blocking(move || handle.shutdown())
            .await
            .map_err(std::io::Error::other)
    }

    /// The engine [`Server`] for this app and the service it runs, configured exactly as
    /// [`App::serve`] would (the one body limit, the per-worker initialisers as worker-start
    /// hooks), for what the engine offers beyond `serve`: a TLS or HTTP/2-only acceptor
    /// ([`Server::with_acceptor`]), listeners handed over by systemd ([`Server::with_listener`]).
    ///
    /// ```no_run
    /// use peregrine::{App, Request, get};
    /// let config = peregrine::config::from_env_and_args(std::env::args().skip(1))
    ///     .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    /// let (server, service) = App::new()
    ///     .route("/", get(|_req: Request| async { "hi" }))
    ///     .into_server(config)?;
    /// // e.g. `server.with_acceptor(peregrine::server::tls::TlsAcceptor::new(&tls)?)` (feature `tls`)
    /// server.run_until_signal(service)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// A route conflict or a missing state is an `InvalidInput` error.
    pub fn into_server(self, config: ServerConfig) -> std::io::Result<(Server, AppService)> {
        self.build_server(config)
    }

    /// The engine server for this app, with the per-worker initialisers as its worker-start
    /// hook (so they run before a worker accepts), and the service it runs.
    fn build_server(self, config: ServerConfig) -> std::io::Result<(Server, AppService)> {
        let (service, config) = self.build_for(config)?;
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
                        Err(e) => Err(match e.downcast::<std::io::Error>() {
                            Ok(io) => *io,
                            Err(other) => std::io::Error::other(other),
                        }),
                    }
                }
            });
        }
        Ok((server, service))
    }

    /// The service, and the engine's configuration with the body limit agreed on: the app's
    /// limit is `body_limit` if set, else the config's `max_body_size`; the engine's own
    /// declared-length check is lifted so the framework answers (problem+json).
    fn build_for(
        mut self,
        mut config: ServerConfig,
    ) -> std::io::Result<(AppService, ServerConfig)> {
        let limit = self
            .body_limit
            .unwrap_or(usize::try_from(config.max_body_size).unwrap_or(usize::MAX));
        self.body_limit = Some(limit);
        config.max_body_size = u64::MAX;
        let service = self
            .try_into_service()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok((service, config))
    }
}
