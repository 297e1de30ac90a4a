//! Engine configuration from environment variables and command-line flags, for binaries.

use peregrine_server::ServerConfig;
use std::time::Duration;

/// Builds a [`ServerConfig`] from defaults, then environment variables, then command-line
/// flags (flags win):
///
/// | env | flag | field |
/// |---|---|---|
/// | `ADDR` | `--addr HOST:PORT` | `addr` |
/// | `WORKERS` | `--workers N` | `workers` |
/// | `MAX_BODY` | `--max-body BYTES` | `max_body_size` |
/// | `IDLE_TIMEOUT` | `--idle-timeout SECS` | `idle_timeout` |
/// | `HEADER_TIMEOUT` | `--header-timeout SECS` | `header_timeout` |
/// | `BODY_TIMEOUT` | `--body-timeout SECS` | `body_timeout` |
/// | `SHUTDOWN_TIMEOUT` | `--shutdown-timeout SECS` | `shutdown_timeout` |
/// | `MAX_CONNECTIONS` | `--max-connections N` | `max_connections` |
/// | `DRAIN_DELAY_MS` | `--drain-delay-ms MS` | `drain_delay` (readiness off before the listeners close) |
///
/// `args` are the arguments after the program name.
///
/// ```
/// let cfg = peregrine::config::from_env_and_args(
///     ["--addr", "127.0.0.1:9000", "--workers", "2"].map(String::from),
/// ).unwrap();
/// assert_eq!(cfg.addr.port(), 9000);
/// assert_eq!(cfg.workers, 2);
/// ```
pub fn from_env_and_args<I: IntoIterator<Item = String>>(args: I) -> Result<ServerConfig, String> {
    let mut cfg = ServerConfig::default();
    for (var, flag) in VARS {
        if let Ok(v) = std::env::var(var) {
            apply(&mut cfg, flag, &v).map_err(|e| format!("{var}: {e}"))?;
        }
    }
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_owned(), v.to_owned()),
            None => {
                let v = args.next().ok_or_else(|| format!("{a} needs a value"))?;
                (a, v)
            }
        };
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {flag}"))?;
        if !VARS.iter().any(|(_, f)| *f == name) {
            return Err(format!("unknown flag --{name}"));
        }
        apply(&mut cfg, name, &value).map_err(|e| format!("--{name}: {e}"))?;
    }
    Ok(cfg)
}

const VARS: [(&str, &str); 9] = [
    ("ADDR", "addr"),
    ("WORKERS", "workers"),
    ("MAX_BODY", "max-body"),
    ("IDLE_TIMEOUT", "idle-timeout"),
    ("HEADER_TIMEOUT", "header-timeout"),
    ("BODY_TIMEOUT", "body-timeout"),
    ("SHUTDOWN_TIMEOUT", "shutdown-timeout"),
    ("MAX_CONNECTIONS", "max-connections"),
    ("DRAIN_DELAY_MS", "drain-delay-ms"),
];

fn apply(cfg: &mut ServerConfig, name: &str, v: &str) -> Result<(), String> {
    let num = |v: &str| v.trim().parse::<u64>().map_err(|e| format!("{v:?}: {e}"));
    match name {
        "addr" => cfg.addr = v.trim().parse().map_err(|e| format!("{v:?}: {e}"))?,
        "workers" => {
            let n = num(v)?;
            if n == 0 {
                return Err("must be at least 1".into());
            }
            cfg.workers = n as usize;
        }
        "max-body" => cfg.max_body_size = num(v)?,
        "idle-timeout" => cfg.idle_timeout = Duration::from_secs(num(v)?),
        "header-timeout" => cfg.header_timeout = Duration::from_secs(num(v)?),
        "body-timeout" => cfg.body_timeout = Duration::from_secs(num(v)?),
        "shutdown-timeout" => cfg.shutdown_timeout = Duration::from_secs(num(v)?),
        "max-connections" => cfg.max_connections = num(v)? as usize,
        "drain-delay-ms" => cfg.drain_delay = Duration::from_millis(num(v)?),
        _ => return Err(format!("unknown setting {name}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_errors_are_clear() {
        let c =
            from_env_and_args(["--max-body=10", "--idle-timeout", "5"].map(String::from)).unwrap();
        assert_eq!(c.max_body_size, 10);
        assert_eq!(c.idle_timeout, Duration::from_secs(5));
        let c = from_env_and_args(
            [
                "--header-timeout",
                "3",
                "--body-timeout=4",
                "--shutdown-timeout",
                "2",
            ]
            .map(String::from),
        )
        .unwrap();
        assert_eq!(
            (c.header_timeout, c.body_timeout, c.shutdown_timeout),
            (
                Duration::from_secs(3),
                Duration::from_secs(4),
                Duration::from_secs(2)
            )
        );
        let c = from_env_and_args(["--drain-delay-ms", "2500"].map(String::from)).unwrap();
        assert_eq!(c.drain_delay, Duration::from_millis(2500));
        assert!(from_env_and_args(["--workers", "0"].map(String::from)).is_err());
        assert!(from_env_and_args(["--nope", "1"].map(String::from))
            .unwrap_err()
            .contains("unknown"));
        assert!(from_env_and_args(["--addr"].map(String::from))
            .unwrap_err()
            .contains("needs a value"));
    }
}
