//! Engine configuration from environment variables and command-line flags, for binaries. The
//! engine owns it ([`ServerConfig::from_env_and_args`]); this module keeps the framework's
//! entry point.
//!
//! ```
//! use peregrine::config::{from_env_and_args, parse_listen_addr, ListenAddr};
//!
//! let cfg = from_env_and_args(["--workers", "3"].map(String::from)).unwrap();
//! assert_eq!(cfg.workers, 3);
//! assert_eq!(from_env_and_args(["--verbose"].map(String::from)).unwrap_err(), "unknown flag --verbose");
//! assert!(matches!(parse_listen_addr("unix:/run/app.sock"), Ok(ListenAddr::Unix(_))));
//! ```

pub use peregrine_server::config::{parse_listen_addr, ConfigError, ListenAddr, MAX_TIMEOUT};
use peregrine_server::ServerConfig;

/// [`ServerConfig::from_env_and_args`] for a binary that takes no arguments of its own: any
/// argument that is not an engine flag is an error (`unknown flag --x`).
///
/// ```
/// let cfg = peregrine::config::from_env_and_args(
///     ["--addr", "127.0.0.1:9000", "--workers", "2"].map(String::from),
/// ).unwrap();
/// assert_eq!(cfg.addr.port(), 9000);
/// assert_eq!(cfg.workers, 2);
/// ```
pub fn from_env_and_args<I: IntoIterator<Item = String>>(args: I) -> Result<ServerConfig, String> {
    let (cfg, rest) = ServerConfig::from_env_and_args(args).map_err(|e| e.to_string())?;
    match rest.first() {
        None => Ok(cfg),
        Some(a) if a.starts_with("--") => Err(format!("unknown flag {a}")),
        Some(a) => Err(format!("unexpected argument {a}")),
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
        assert_eq!(c.max_body_size, 10);
        assert_eq!(c.idle_timeout, Duration::from_secs(5));
        assert!(from_env_and_args(["--workers", "0"].map(String::from)).is_err());
        assert!(from_env_and_args(["--nope", "1"].map(String::from))
            .unwrap_err()
            .contains("unknown"));
        assert!(from_env_and_args(["--addr"].map(String::from))
            .unwrap_err()
            .contains("needs a value"));
    }
}
