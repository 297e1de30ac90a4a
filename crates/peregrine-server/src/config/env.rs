//! Reading a [`ServerConfig`] from environment variables and flags, and checking it.

use super::settings::ServerConfig;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// Longest timeout [`ServerConfig::from_env_and_args`] accepts (a year): far beyond any real
/// use, so a larger number is a typo; a deadline computed from it never overflows.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// A configuration that cannot be used, with the setting it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl ConfigError {
    fn new(setting: &str, message: impl std::fmt::Display) -> Self {
        ConfigError(format!("{setting}: {message}"))
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for std::io::Error {
    fn from(e: ConfigError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

/// The settings read by [`ServerConfig::from_env_and_args`]: (environment variable, flag).
const SETTINGS: [(&str, &str); 13] = [
    ("ADDR", "addr"),
    ("WORKERS", "workers"),
    ("STEER", "steer"),
    ("PIN", "pin"),
    ("MAX_BODY", "max-body"),
    ("IDLE_TIMEOUT", "idle-timeout"),
    ("HEADER_TIMEOUT", "header-timeout"),
    ("BODY_TIMEOUT", "body-timeout"),
    ("WRITE_TIMEOUT", "write-timeout"),
    ("SHUTDOWN_TIMEOUT", "shutdown-timeout"),
    ("MAX_CONNECTIONS", "max-connections"),
    ("SERVER_NAME", "server-name"),
    ("DRAIN_DELAY_MS", "drain-delay-ms"),
];

impl ServerConfig {
    /// Builds a configuration from defaults, then environment variables, then command-line
    /// flags (flags win), and checks it ([`ServerConfig::validate`]):
    ///
    /// | env | flag | field |
    /// |---|---|---|
    /// | `ADDR` | `--addr HOST:PORT` or `unix:/path` | `addr` (or `unix`) |
    /// | `WORKERS` | `--workers N` | `workers` |
    /// | `STEER` | `--steer BOOL` | `steer` |
    /// | `PIN` | `--pin BOOL` | `pin` |
    /// | `MAX_BODY` | `--max-body BYTES` | `limits.max_body_size` |
    /// | `IDLE_TIMEOUT` | `--idle-timeout SECS` | `timeouts.idle` |
    /// | `HEADER_TIMEOUT` | `--header-timeout SECS` | `timeouts.header` |
    /// | `BODY_TIMEOUT` | `--body-timeout SECS` | `timeouts.body` |
    /// | `WRITE_TIMEOUT` | `--write-timeout SECS` | `timeouts.write` |
    /// | `SHUTDOWN_TIMEOUT` | `--shutdown-timeout SECS` | `timeouts.shutdown` |
    /// | `MAX_CONNECTIONS` | `--max-connections N` | `limits.max_connections` |
    /// | `SERVER_NAME` | `--server-name NAME` | `server_name` (empty: none) |
    /// | `DRAIN_DELAY_MS` | `--drain-delay-ms MS` | `timeouts.drain_delay` |
    ///
    /// An address is an IP address with a port (`127.0.0.1:8080`, `[::1]:80`), a host name with
    /// a port (`localhost:3000`, resolved now; the first address is used), or `unix:` and a
    /// path. A BOOL is `1`, `true`, `on`, `yes` or `0`, `false`, `off`, `no`. Flags take their
    /// value as the next argument or after `=`.
    ///
    /// `args` are the arguments after the program name. Those that are not engine flags are
    /// returned, in order, for the application to interpret (`--port 80` of an application's
    /// own gives back `["--port", "80"]`).
    ///
    /// ```
    /// use peregrine_server::ServerConfig;
    /// let (cfg, rest) = ServerConfig::from_env_and_args(
    ///     ["--addr", "127.0.0.1:9000", "--workers=2", "--verbose"].map(String::from),
    /// ).unwrap();
    /// assert_eq!(cfg.addr.port(), 9000);
    /// assert_eq!(cfg.workers, 2);
    /// assert_eq!(rest, ["--verbose"]);
    /// ```
    pub fn from_env_and_args<I: IntoIterator<Item = String>>(
        args: I,
    ) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        Self::from_vars_and_args(|var| std::env::var(var).ok(), args)
    }

    /// [`ServerConfig::from_env_and_args`] with the environment given as a function (for
    /// tests, or settings from another source).
    pub fn from_vars_and_args<I: IntoIterator<Item = String>>(
        var: impl Fn(&str) -> Option<String>,
        args: I,
    ) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        let mut cfg = ServerConfig::default();
        for (env, flag) in SETTINGS {
            if let Some(v) = var(env) {
                cfg.apply(flag, &v).map_err(|e| ConfigError::new(env, e))?;
            }
        }
        let mut rest = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                rest.push(arg);
                continue;
            };
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (flag, None),
            };
            if !SETTINGS.iter().any(|(_, f)| *f == name) {
                rest.push(arg);
                continue;
            }
            let setting = format!("--{name}");
            let value = match inline {
                Some(v) => v,
                None => args
                    .next()
                    .ok_or_else(|| ConfigError::new(&setting, "needs a value"))?,
            };
            cfg.apply(name, &value)
                .map_err(|e| ConfigError::new(&setting, e))?;
        }
        cfg.validate()?;
        Ok((cfg, rest))
    }

    /// Checks what the engine cannot work with: no workers, or a `server_name` that is not a
    /// clean field value (CR, LF or another control character would corrupt every response
    /// head). [`Server::serve`](crate::Server::serve) calls it. Timeouts set in code may be as
    /// large as a caller likes (deadlines saturate); values read by
    /// [`ServerConfig::from_env_and_args`] are bounded by [`MAX_TIMEOUT`].
    ///
    /// ```
    /// use peregrine_server::ServerConfig;
    /// let bad = ServerConfig { server_name: Some("x\r\nSet-Cookie: a=b"), ..ServerConfig::default() };
    /// assert!(bad.validate().is_err());
    /// assert!(ServerConfig::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.workers == 0 {
            return Err(ConfigError::new("workers", "must be at least 1"));
        }
        if let Some(name) = self.server_name {
            let clean = name
                .bytes()
                .all(|b| b == b' ' || (b.is_ascii_graphic() || b >= 0x80));
            if name.is_empty() || !clean {
                return Err(ConfigError::new(
                    "server_name",
                    "must be non-empty, without control characters (CR, LF...)",
                ));
            }
        }
        Ok(())
    }

    fn apply(&mut self, name: &str, v: &str) -> Result<(), String> {
        let num = |v: &str| v.trim().parse::<u64>().map_err(|e| format!("{v:?}: {e}"));
        let secs = |v: &str| {
            let n = num(v)?;
            if n > MAX_TIMEOUT.as_secs() {
                return Err(format!(
                    "{n} s is above the maximum of {} s",
                    MAX_TIMEOUT.as_secs()
                ));
            }
            Ok(Duration::from_secs(n))
        };
        match name {
            "addr" => match parse_listen_addr(v)? {
                ListenAddr::Tcp(addr) => {
                    self.addr = addr;
                    self.unix = None;
                }
                ListenAddr::Unix(path) => self.unix = Some(path),
            },
            "workers" => {
                let n = num(v)?;
                if n == 0 {
                    return Err("must be at least 1".into());
                }
                self.workers = usize::try_from(n).map_err(|e| e.to_string())?;
            }
            "steer" => self.steer = parse_bool(v)?,
            "pin" => self.pin = parse_bool(v)?,
            "max-body" => self.limits.max_body_size = num(v)?,
            "idle-timeout" => self.timeouts.idle = secs(v)?,
            "header-timeout" => self.timeouts.header = secs(v)?,
            "body-timeout" => self.timeouts.body = secs(v)?,
            "write-timeout" => self.timeouts.write = secs(v)?,
            "shutdown-timeout" => self.timeouts.shutdown = secs(v)?,
            "max-connections" => {
                self.limits.max_connections = usize::try_from(num(v)?).map_err(|e| e.to_string())?
            }
            "drain-delay-ms" => {
                let d = Duration::from_millis(num(v)?);
                if d > MAX_TIMEOUT {
                    return Err(format!("above the maximum of {} s", MAX_TIMEOUT.as_secs()));
                }
                self.timeouts.drain_delay = d;
            }
            "server-name" => {
                // Read once per process: leaking the string gives the `'static` the field wants.
                self.server_name = match v.trim() {
                    "" => None,
                    name => Some(Box::leak(name.to_owned().into_boxed_str())),
                }
            }
            _ => return Err(format!("unknown setting {name}")),
        }
        Ok(())
    }
}

/// A yes/no setting: `1`, `true`, `on`, `yes` or `0`, `false`, `off`, `no` (any case).
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!("{v:?}: expected 1/0, true/false, on/off or yes/no")),
    }
}

/// Where to listen, as written in `ADDR` / `--addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix domain socket path.
    Unix(PathBuf),
}

/// Parses a listen address: `IP:PORT` (`127.0.0.1:8080`, `[::1]:80`), `HOST:PORT` (resolved;
/// the first address wins), or `unix:/path`.
///
/// ```
/// use peregrine_server::config::{parse_listen_addr, ListenAddr};
/// assert_eq!(parse_listen_addr("[::1]:80").unwrap(), ListenAddr::Tcp("[::1]:80".parse().unwrap()));
/// assert_eq!(parse_listen_addr("unix:/tmp/p.sock").unwrap(), ListenAddr::Unix("/tmp/p.sock".into()));
/// assert!(parse_listen_addr("localhost").is_err()); // no port
/// ```
pub fn parse_listen_addr(v: &str) -> Result<ListenAddr, String> {
    let v = v.trim();
    if let Some(path) = v.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("unix: needs a path".into());
        }
        return Ok(ListenAddr::Unix(PathBuf::from(path)));
    }
    if let Ok(addr) = v.parse::<SocketAddr>() {
        return Ok(ListenAddr::Tcp(addr));
    }
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| format!("{v:?}: expected HOST:PORT, IP:PORT or unix:/path"))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{v:?}: expected HOST:PORT, IP:PORT or unix:/path"));
    }
    let mut addrs = v
        .to_socket_addrs()
        .map_err(|e| format!("{v:?}: cannot resolve: {e}"))?;
    addrs
        .next()
        .map(ListenAddr::Tcp)
        .ok_or_else(|| format!("{v:?}: resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ServerConfig::from_vars_and_args(
            |var| env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone()),
            args.iter().map(|a| a.to_string()),
        )
    }

    #[test]
    fn addresses_by_ip_host_name_and_unix_path() {
        let (c, _) = parse(&[], &["--addr", "[::1]:80"]).unwrap();
        assert_eq!(c.addr, "[::1]:80".parse().unwrap());
        let (c, _) = parse(&[("ADDR", "localhost:3000")], &[]).unwrap();
        assert!(
            c.addr.ip().is_loopback() && c.addr.port() == 3000,
            "{}",
            c.addr
        );
        let (c, _) = parse(&[("ADDR", "unix:/run/app.sock")], &[]).unwrap();
        assert_eq!(
            c.unix.as_deref(),
            Some(std::path::Path::new("/run/app.sock"))
        );
        // A flag wins over the environment, and a TCP address clears a Unix path.
        let (c, _) = parse(&[("ADDR", "unix:/x")], &["--addr=127.0.0.1:1"]).unwrap();
        assert_eq!((c.unix, c.addr.port()), (None, 1));
        for bad in ["localhost", "unix:", ":80", "host:port", "1.2.3.4:99999"] {
            let e = parse(&[], &["--addr", bad]).unwrap_err();
            assert!(e.to_string().starts_with("--addr: "), "{bad}: {e}");
        }
        let e = parse(&[("ADDR", "nope")], &[]).unwrap_err();
        assert!(e.to_string().starts_with("ADDR: "), "{e}");
    }

    #[test]
    fn unknown_arguments_are_left_to_the_app_in_order() {
        let (c, rest) = parse(
            &[],
            &[
                "serve",
                "--port",
                "80",
                "--workers",
                "3",
                "-v",
                "--max-body=5",
                "--x=y",
            ],
        )
        .unwrap();
        assert_eq!((c.workers, c.limits.max_body_size), (3, 5));
        assert_eq!(rest, ["serve", "--port", "80", "-v", "--x=y"]);
    }

    #[test]
    fn flags_parse_and_errors_are_clear() {
        let (c, _) = parse(
            &[
                ("IDLE_TIMEOUT", "9"),
                ("HEADER_TIMEOUT", "7"),
                ("WRITE_TIMEOUT", "6"),
            ],
            &[
                "--idle-timeout",
                "5",
                "--body-timeout=4",
                "--shutdown-timeout",
                "2",
            ],
        )
        .unwrap();
        assert_eq!(c.timeouts.write, Duration::from_secs(6));
        assert_eq!(c.timeouts.idle, Duration::from_secs(5));
        assert_eq!(c.timeouts.header, Duration::from_secs(7));
        assert_eq!(
            (c.timeouts.body, c.timeouts.shutdown),
            (Duration::from_secs(4), Duration::from_secs(2))
        );
        assert!(parse(&[], &["--workers", "0"]).is_err());
        assert!(parse(&[], &["--workers", "-1"]).is_err());
        assert!(parse(&[], &["--addr"])
            .unwrap_err()
            .to_string()
            .contains("needs a value"));
        let (c, _) = parse(&[("MAX_CONNECTIONS", "12")], &[]).unwrap();
        assert_eq!(c.limits.max_connections, 12);
        let (c, _) = parse(&[("DRAIN_DELAY_MS", "2500")], &[]).unwrap();
        assert_eq!(c.timeouts.drain_delay, Duration::from_millis(2500));
        assert!(parse(&[], &["--drain-delay-ms", "x"]).is_err());
    }

    #[test]
    fn steering_and_pinning_are_switches() {
        let (c, _) = parse(&[], &[]).unwrap();
        assert_eq!((c.steer, c.pin), (false, false));
        let (c, _) = parse(&[("STEER", "1"), ("PIN", "on")], &[]).unwrap();
        assert_eq!((c.steer, c.pin), (true, true));
        // Flags win over the environment.
        let (c, rest) = parse(
            &[("STEER", "yes"), ("PIN", "TRUE")],
            &["--steer=0", "--pin", "off", "--x"],
        )
        .unwrap();
        assert_eq!(
            (c.steer, c.pin, rest),
            (false, false, vec!["--x".to_owned()])
        );
        for bad in ["2", "", "maybe"] {
            let e = parse(&[("PIN", bad)], &[]).unwrap_err();
            assert!(e.to_string().starts_with("PIN: "), "{bad:?}: {e}");
        }
        let e = parse(&[], &["--steer", "x"]).unwrap_err();
        assert!(e.to_string().starts_with("--steer: "), "{e}");
        assert!(parse(&[], &["--pin"]).is_err());
    }

    #[test]
    fn huge_timeouts_are_refused() {
        let max = MAX_TIMEOUT.as_secs();
        assert!(parse(&[], &["--idle-timeout", &max.to_string()]).is_ok());
        for setting in [
            "--idle-timeout",
            "--header-timeout",
            "--body-timeout",
            "--shutdown-timeout",
        ] {
            for v in [
                (max + 1).to_string(),
                u64::MAX.to_string(),
                "18446744073709551616".into(),
            ] {
                assert!(parse(&[], &[setting, &v]).is_err(), "{setting} {v}");
            }
        }
        // Set in code, any value is valid: the engine's deadlines saturate.
        let c = ServerConfig::builder()
            .write_timeout(Duration::MAX)
            .header_timeout(Duration::MAX)
            .build();
        assert!(c.validate().is_ok());
        // The largest accepted timeout still makes a deadline.
        assert!(std::time::Instant::now().checked_add(MAX_TIMEOUT).is_some());
    }

    #[test]
    fn server_names_with_control_characters_are_refused() {
        for bad in [
            "a\r\nSet-Cookie: x=y",
            "a\nb",
            "a\rb",
            "a\0b",
            "a\tb",
            "a\x7fb",
            "",
        ] {
            let c = ServerConfig {
                server_name: Some(bad),
                ..ServerConfig::default()
            };
            assert!(c.validate().is_err(), "{bad:?}");
        }
        assert!(parse(&[("SERVER_NAME", "x\ny")], &[]).is_err());
        let (c, _) = parse(&[], &["--server-name", "edge/1.0 (caf\u{e9})"]).unwrap();
        assert_eq!(c.server_name, Some("edge/1.0 (caf\u{e9})"));
        let (c, _) = parse(&[("SERVER_NAME", "")], &[]).unwrap();
        assert_eq!(c.server_name, None);
        let c = ServerConfig {
            server_name: None,
            ..ServerConfig::default()
        };
        assert!(c.validate().is_ok());
    }
}
