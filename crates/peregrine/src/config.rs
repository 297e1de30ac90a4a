//! Configuration for binaries: the engine's settings ([`ServerConfig`]) and, with the `tls`
//! feature, the certificates to serve HTTPS with, from environment variables and command-line
//! flags. [`App::run`](crate::App::run) and its siblings take the result as it is.
//!
//! ```
//! use peregrine::config::{from_env_and_args, parse_listen_addr, ListenAddr};
//!
//! let cfg = from_env_and_args(["--workers", "3"].map(String::from)).unwrap();
//! assert_eq!(cfg.server.workers, 3);
//! assert_eq!(from_env_and_args(["--verbose"].map(String::from)).unwrap_err(), "unknown flag --verbose");
//! assert!(matches!(parse_listen_addr("unix:/run/app.sock"), Ok(ListenAddr::Unix(_))));
//! ```
//!
//! TLS settings (feature `tls`), read after the engine's:
//!
//! | environment | flag | meaning |
//! | --- | --- | --- |
//! | `TLS_CERT` | `--tls-cert PATH` | PEM certificate chain; several (comma-separated, or the flag repeated) for SNI, the first being the default |
//! | `TLS_KEY` | `--tls-key PATH` | PEM private key of each certificate, in the same order |
//! | `TLS_CLIENT_CA` | `--tls-client-ca PATH` | PEM CA certificates client certificates must chain to (mTLS) |
//! | `TLS_CLIENT_AUTH` | `--tls-client-auth optional\|required` | whether a client certificate is required (default `required` when a CA is given) |
//!
//! A flag replaces the environment variable of the same setting. With no certificate the server
//! speaks cleartext, as before.

pub use peregrine_server::config::{parse_listen_addr, ConfigError, ListenAddr, MAX_TIMEOUT};
use peregrine_server::events::EngineEvents;
#[cfg(feature = "tls")]
use peregrine_server::tls::{CertificateFiles, ClientAuth, TlsConfig};
use peregrine_server::{DrainSignal, ServerConfig};
use std::sync::Arc;

/// What [`App::run`](crate::App::run), [`App::run_async`](crate::App::run_async),
/// [`App::run_until`](crate::App::run_until) and [`App::serve`](crate::App::serve) serve with:
/// the engine's settings, with the `tls` feature the TLS settings of the listener (`None`:
/// cleartext), and what the running server is given besides its settings (its drain signal,
/// who hears its events). A plain [`ServerConfig`] converts into one without TLS, with a
/// drain signal of its own and no observer.
///
/// ```
/// use peregrine::config::Config;
/// use peregrine::ServerConfig;
///
/// let config = Config::from(ServerConfig::builder().workers(2).build());
/// assert_eq!(config.server.workers, 2);
/// # #[cfg(feature = "tls")]
/// assert!(config.tls.is_none());
/// ```
///
/// A readiness check reads the drain signal, raised when a graceful shutdown starts:
///
/// ```
/// use peregrine::config::Config;
/// use peregrine::health::Health;
/// let config = Config::from(peregrine::ServerConfig::default());
/// let health = Health::new(&config.drain_signal);
/// config.drain_signal.start(); // what SIGTERM does, before the listeners close
/// assert!(!health.is_ready());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// The engine's settings: address, workers, limits, timeouts.
    pub server: ServerConfig,
    /// Serve HTTPS with these certificates (HTTP/2 or HTTP/1.1 by ALPN when the `http2` feature
    /// is on); `None` serves cleartext. Certificates are read again on SIGHUP.
    #[cfg(feature = "tls")]
    pub tls: Option<TlsConfig>,
    /// Raised when a graceful shutdown starts (see
    /// [`Server::with_drain_signal`](peregrine_server::Server::with_drain_signal)); give a
    /// clone to [`Health`](crate::health::Health). Clones share the flag.
    pub drain_signal: DrainSignal,
    /// Who hears about connections and the requests the engine refuses itself (see
    /// [`Server::with_events`](peregrine_server::Server::with_events)): the
    /// [`AccessLog`](crate::access_log::AccessLog) or, with the `metrics` feature, an
    /// `EngineObserver`. `None`: nobody.
    pub events: Option<Arc<dyn EngineEvents>>,
}

impl Config {
    /// Cleartext with these engine settings.
    ///
    /// ```
    /// let config = peregrine::config::Config::new(peregrine::ServerConfig::default());
    /// assert_eq!(config.server.addr.port(), 8080);
    /// ```
    pub fn new(server: ServerConfig) -> Config {
        Config {
            server,
            #[cfg(feature = "tls")]
            tls: None,
            drain_signal: DrainSignal::default(),
            events: None,
        }
    }

    /// Serve HTTPS with `tls` (feature `tls`).
    ///
    /// ```
    /// use peregrine::config::Config;
    /// use peregrine::tls::{CertificateFiles, TlsConfig};
    ///
    /// let tls = TlsConfig::new(vec![CertificateFiles::new("cert.pem", "key.pem")]);
    /// let config = Config::new(peregrine::ServerConfig::default()).with_tls(tls);
    /// assert_eq!(config.tls.unwrap().certificates.len(), 1);
    /// ```
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: TlsConfig) -> Config {
        self.tls = Some(tls);
        self
    }
}

impl Config {
    /// Reports the engine's events to `events` (see [`Config::events`]).
    ///
    /// ```
    /// use peregrine::access_log::AccessLog;
    /// use peregrine::config::Config;
    /// use std::sync::Arc;
    /// let log = AccessLog::to_writer(std::io::sink(), 64)?;
    /// let config = Config::new(peregrine::ServerConfig::default()).with_events(Arc::new(log));
    /// assert!(config.events.is_some());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_events(mut self, events: Arc<dyn EngineEvents>) -> Config {
        self.events = Some(events);
        self
    }
}

impl From<ServerConfig> for Config {
    fn from(server: ServerConfig) -> Config {
        Config::new(server)
    }
}

/// [`from_vars_and_args`] with the process environment: the configuration of a binary that
/// takes no arguments of its own. Any argument that is not an engine or TLS flag is an error
/// (`unknown flag --x`); so are TLS settings in a build without the `tls` feature.
///
/// ```
/// let cfg = peregrine::config::from_env_and_args(
///     ["--addr", "127.0.0.1:9000", "--workers", "2"].map(String::from),
/// ).unwrap();
/// assert_eq!(cfg.server.addr.port(), 9000);
/// assert_eq!(cfg.server.workers, 2);
/// ```
pub fn from_env_and_args<I: IntoIterator<Item = String>>(args: I) -> Result<Config, String> {
    from_vars_and_args(|var| std::env::var(var).ok(), args)
}

/// The configuration from the variables `var` reads and from `args` (the arguments after the
/// program name): the engine's ([`ServerConfig::from_vars_and_args`]), then the TLS settings
/// of the table above.
///
/// ```
/// # #[cfg(feature = "tls")] {
/// use peregrine::config::from_vars_and_args;
///
/// let env = |var: &str| match var {
///     "TLS_CERT" => Some("a.crt,b.crt".to_string()),
///     "TLS_KEY" => Some("a.key,b.key".to_string()),
///     _ => None,
/// };
/// let cfg = from_vars_and_args(env, ["--workers", "1"].map(String::from)).unwrap();
/// let tls = cfg.tls.unwrap();
/// assert_eq!(tls.certificates.len(), 2); // chosen by SNI, a.crt the default
///
/// let err = from_vars_and_args(|_| None, ["--tls-cert", "a.crt"].map(String::from));
/// assert_eq!(err.unwrap_err(), "--tls-cert is given but --tls-key is not (one key per certificate)");
/// # }
/// ```
pub fn from_vars_and_args<I: IntoIterator<Item = String>>(
    var: impl Fn(&str) -> Option<String>,
    args: I,
) -> Result<Config, String> {
    let (server, rest) = ServerConfig::from_vars_and_args(&var, args).map_err(|e| e.to_string())?;
    let tls = TlsSettings::read(&var, rest)?;
    tls.into_config(server)
}

/// The TLS settings as given, before they are checked and become a `TlsConfig`.
#[derive(Default)]
struct TlsSettings {
    certs: Setting,
    keys: Setting,
    client_ca: Setting,
    client_auth: Setting,
}

/// One setting's values, and where they came from (for the error messages).
#[derive(Default)]
struct Setting {
    values: Vec<String>,
    source: &'static str,
}

/// Environment variable and flag of each TLS setting, in the order of `TlsSettings`'s fields.
const TLS_SETTINGS: [(&str, &str); 4] = [
    ("TLS_CERT", "tls-cert"),
    ("TLS_KEY", "tls-key"),
    ("TLS_CLIENT_CA", "tls-client-ca"),
    ("TLS_CLIENT_AUTH", "tls-client-auth"),
];

impl TlsSettings {
    /// Environment first, then the flags in `args` (replacing it); any other argument is an
    /// error.
    fn read(var: &impl Fn(&str) -> Option<String>, args: Vec<String>) -> Result<Self, String> {
        let mut s = TlsSettings::default();
        for (i, (env, _)) in TLS_SETTINGS.iter().enumerate() {
            // An empty variable counts as unset (`TLS_CERT=` in a compose file).
            if let Some(v) = var(env).filter(|v| !v.trim().is_empty()) {
                let setting = s.field(i);
                setting.values = v.split(',').map(|p| p.trim().to_string()).collect();
                setting.source = env;
            }
        }
        let mut from_flags = [false; 4];
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg}"));
            };
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (flag, None),
            };
            let Some(i) = TLS_SETTINGS.iter().position(|(_, f)| *f == name) else {
                return Err(format!("unknown flag {arg}"));
            };
            // A next argument that is itself a flag is a forgotten value, not a path.
            let value = match inline.or_else(|| args.next().filter(|v| !v.starts_with("--"))) {
                Some(v) if !v.trim().is_empty() => v.trim().to_string(),
                _ => return Err(format!("--{name} needs a value")),
            };
            let setting = s.field(i);
            // The first flag replaces the environment's list; later ones add to it (SNI).
            if !from_flags[i] {
                setting.values.clear();
                from_flags[i] = true;
            }
            setting.values.push(value);
            setting.source = TLS_SETTINGS[i].1;
        }
        Ok(s)
    }

    fn field(&mut self, i: usize) -> &mut Setting {
        match i {
            0 => &mut self.certs,
            1 => &mut self.keys,
            2 => &mut self.client_ca,
            _ => &mut self.client_auth,
        }
    }

    /// The first setting given, if any (`TLS_CERT`, `--tls-key`...), for error messages.
    fn first_given(&self) -> Option<&'static str> {
        [&self.certs, &self.keys, &self.client_ca, &self.client_auth]
            .into_iter()
            .find(|s| !s.values.is_empty())
            .map(|s| s.source)
    }

    #[cfg(not(feature = "tls"))]
    fn into_config(self, server: ServerConfig) -> Result<Config, String> {
        // Cleartext where TLS was asked for would be a silent downgrade: refuse.
        match self.first_given() {
            Some(given) => Err(format!(
                "{} is set but this build has no TLS (enable peregrine's `tls` feature)",
                shown(given)
            )),
            None => Ok(Config::new(server)),
        }
    }

    #[cfg(feature = "tls")]
    fn into_config(self, server: ServerConfig) -> Result<Config, String> {
        let config = Config::new(server);
        if self.certs.values.is_empty() && self.keys.values.is_empty() {
            return match self.first_given() {
                Some(given) => Err(format!(
                    "{} needs a server certificate (TLS_CERT / --tls-cert)",
                    shown(given)
                )),
                None => Ok(config),
            };
        }
        let (certs, keys) = (&self.certs, &self.keys);
        if keys.values.is_empty() {
            return Err(format!(
                "{} is given but {} is not (one key per certificate)",
                shown(certs.source),
                shown(partner(certs.source))
            ));
        }
        if certs.values.is_empty() {
            return Err(format!(
                "{} is given but {} is not (one certificate per key)",
                shown(keys.source),
                shown(partner(keys.source))
            ));
        }
        if certs.values.len() != keys.values.len() {
            return Err(format!(
                "{} names {} certificate(s) but {} names {} key(s): one key per certificate, \
                 in the same order",
                shown(certs.source),
                certs.values.len(),
                shown(keys.source),
                keys.values.len()
            ));
        }
        if let Some(empty) = [certs, keys]
            .into_iter()
            .find(|s| s.values.iter().any(String::is_empty))
        {
            return Err(format!("{} has an empty path", shown(empty.source)));
        }
        let files = certs
            .values
            .iter()
            .zip(&keys.values)
            .map(|(c, k)| CertificateFiles::new(c, k))
            .collect();
        let mut tls = TlsConfig::new(files);
        tls.client_auth = self.client_auth()?;
        Ok(config.with_tls(tls))
    }

    #[cfg(feature = "tls")]
    fn client_auth(&self) -> Result<ClientAuth, String> {
        let one = |s: &Setting| -> Result<Option<String>, String> {
            match &s.values[..] {
                [] => Ok(None),
                [v] => Ok(Some(v.clone())),
                _ => Err(format!("{} takes one value", shown(s.source))),
            }
        };
        let auth = one(&self.client_auth)?;
        let Some(ca) = one(&self.client_ca)? else {
            return match auth {
                Some(_) => Err(format!(
                    "{} needs a client CA (TLS_CLIENT_CA / --tls-client-ca)",
                    shown(self.client_auth.source)
                )),
                None => Ok(ClientAuth::None),
            };
        };
        match auth.as_deref() {
            Some("optional") => Ok(ClientAuth::Optional(ca.into())),
            Some("required") | None => Ok(ClientAuth::Required(ca.into())),
            Some(other) => Err(format!(
                "{} must be optional or required, not {other:?}",
                shown(self.client_auth.source)
            )),
        }
    }
}

/// A setting's name as the user wrote it: `TLS_CERT`, or `--tls-cert` for a flag.
fn shown(source: &str) -> String {
    if source.starts_with("TLS_") {
        source.to_string()
    } else {
        format!("--{source}")
    }
}

/// The certificate's key setting for a certificate source, and the other way round, in the
/// same form (environment or flag).
#[cfg(feature = "tls")]
fn partner(source: &str) -> &'static str {
    match source {
        "TLS_CERT" => "TLS_KEY",
        "TLS_KEY" => "TLS_CERT",
        "tls-cert" => "tls-key",
        _ => "tls-cert",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn flags_parse_and_errors_are_clear() {
        let c =
            from_env_and_args(["--max-body=10", "--idle-timeout", "5"].map(String::from)).unwrap();
        assert_eq!(c.server.limits.max_body_size, 10);
        assert_eq!(c.server.timeouts.idle, Duration::from_secs(5));
        assert!(from_env_and_args(["--workers", "0"].map(String::from)).is_err());
        assert!(from_env_and_args(["--nope", "1"].map(String::from))
            .unwrap_err()
            .contains("unknown"));
        assert!(from_env_and_args(["--addr"].map(String::from))
            .unwrap_err()
            .contains("needs a value"));
        assert_eq!(
            from_vars_and_args(|_| None, ["stray"].map(String::from)).unwrap_err(),
            "unexpected argument stray"
        );
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_settings_without_the_feature_are_refused() {
        let env = |v: &str| (v == "TLS_CERT").then(|| "cert.pem".to_string());
        assert_eq!(
            from_vars_and_args(env, Vec::new()).unwrap_err(),
            "TLS_CERT is set but this build has no TLS (enable peregrine's `tls` feature)"
        );
        let flags = ["--tls-key", "k.pem"].map(String::from);
        assert!(from_vars_and_args(|_| None, flags)
            .unwrap_err()
            .starts_with("--tls-key is set but this build has no TLS"));
    }
}
