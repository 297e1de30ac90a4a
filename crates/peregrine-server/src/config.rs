//! Server configuration: limits and timeouts, defaults in the spirit of nginx/h2o
//! (`docs/http1-rules.md` section H), and [`ServerConfig::from_env_and_args`] for binaries.

use crate::drain::DrainSignal;
use crate::events::EngineEvents;
use peregrine_codec::Limits;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything configurable about the engine. Build with `ServerConfig::default()` and adjust
/// fields with struct update syntax.
///
/// Every `Duration` may be as large as a caller likes (`Duration::MAX` included): deadlines are
/// computed saturating, so a huge value means "practically never", never a panic.
///
/// Each limit says how it applies to HTTP/2 (feature `http2`) when that differs from HTTP/1.1;
/// `docs/security.md` has the table of every limit by protocol, with the test of each.
///
/// ```
/// use peregrine_server::ServerConfig;
/// use std::time::Duration;
/// let config = ServerConfig {
///     body_min_rate: 4096,
///     body_total_timeout: Duration::from_secs(60),
///     max_connections_per_addr: Some(256),
///     ..ServerConfig::default()
/// };
/// assert_eq!(config.write_min_rate, 1024);
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:8080`. Ignored when [`ServerConfig::unix`] is
    /// set.
    pub addr: SocketAddr,
    /// Listen on this Unix domain socket instead of [`ServerConfig::addr`] (`ADDR=unix:/path`).
    /// Default `None`.
    pub unix: Option<PathBuf>,
    /// Worker threads (each with its own runtime and listener). Default: available cores.
    pub workers: usize,
    /// Connection steering: each new TCP connection goes to the worker of the CPU that received
    /// it (worker i belongs to the i-th CPU the process may run on), by a reuseport CPU program
    /// and `SO_INCOMING_CPU` (see `docs/architecture.md`), instead of the kernel's hash spread
    /// over the workers' `SO_REUSEPORT` sockets. Applies to the TCP listeners the engine binds
    /// (not to injected listeners or Unix sockets); what the kernel refuses falls back to the
    /// spread with a log line. Best with [`ServerConfig::pin`]. Default `false` (measured in
    /// `docs/performance.md`).
    pub steer: bool,
    /// Pin worker i to the i-th CPU the process may run on (its affinity mask, so `taskset`
    /// and cpusets are honoured); workers past the number of allowed CPUs, or a CPU the kernel
    /// refuses, run unpinned with a log line. Default `false`.
    pub pin: bool,
    /// Parser limits (HTTP/1.1 request line and header section). HTTP/2 has no request line and
    /// h2 decodes the header block: [`crate::h2::Http2Config::max_header_list_size`] bounds it
    /// instead (431 past it).
    pub limits: Limits,
    /// The size limit each request body starts with ([`crate::Body::limit`]; a service may
    /// change it per request with [`crate::Body::set_limit`] before reading): reading a body with
    /// a larger Content-Length fails (413) before anything is read, a chunked one once it passes
    /// it. Default [`crate::DEFAULT_BODY_LIMIT`] (1 MiB). HTTP/2 alike, per stream.
    pub max_body_size: u64,
    /// The header section must arrive within this after the first byte of a request → 408.
    /// A new connection that sends nothing is closed silently after it too (the idle timeout
    /// applies only between requests). Default 10 s.
    ///
    /// HTTP/2: the preface and the first SETTINGS must arrive within it. A stream's header block
    /// is read whole by h2 (HEADERS and CONTINUATION, bounded in size), and a connection with
    /// no request in progress is closed at `idle_timeout`, which bounds a slow header block.
    pub header_timeout: Duration,
    /// Longest wait for the next body bytes → 408 (nginx `client_body_timeout`: restarts with
    /// every read, so on its own it does not bound a trickling client; see `body_min_rate`).
    /// Default 10 s. This and the three body settings below apply to an HTTP/2 request body
    /// alike, per stream: the handler sees [`crate::BodyError::Timeout`] (408), the connection
    /// and its other streams go on.
    pub body_timeout: Duration,
    /// Minimum rate of a request body, in bytes per second, after `body_rate_grace` (Apache
    /// `mod_reqtimeout` `MinRate`): the time spent waiting for the body's bytes may not pass
    /// `body_rate_grace + received / body_min_rate`, or the request gets 408 (the handler sees
    /// [`crate::BodyError::Timeout`]) and the connection closes. Only waits for the client
    /// count (a handler that reads slowly is not the client's fault), and the engine's drain of
    /// an unread body counts under the same account. `0` turns the rate check off. Default
    /// 1024 bytes/s.
    pub body_min_rate: u32,
    /// Waiting time a body gets before `body_min_rate` applies (the base of the allowance every
    /// byte received extends). Default 10 s.
    pub body_rate_grace: Duration,
    /// Total time the engine may wait for one request body (including the drain of an unread
    /// body), whatever its rate → 408. Default 300 s.
    pub body_total_timeout: Duration,
    /// Idle keep-alive connections are closed silently after this. Default 60 s.
    ///
    /// HTTP/2: a connection is idle while no stream runs its handler or sends, and streams that
    /// only wait for the client's window (or for the socket) do not count; it then gets
    /// `GOAWAY(NO_ERROR)` and is closed. An RFC 8441 tunnel (WebSocket over HTTP/2) counts as
    /// activity while it is open, as an upgraded HTTP/1.1 connection is no longer idle-timed.
    pub idle_timeout: Duration,
    /// A write that makes no progress for this long closes the connection (restarts with every
    /// wait; see `write_min_rate`). Default 10 s.
    ///
    /// HTTP/2: every wait of a stream for send capacity (its window or the connection's closed,
    /// or the socket not taking what is queued) follows this and `write_min_rate`; past them
    /// the stream is reset (`RST_STREAM(CANCEL)`) and what was queued for it is dropped; if no
    /// stream moved meanwhile and every other stream waits for the client too, the connection
    /// gets `GOAWAY(ENHANCE_YOUR_CALM)` and closes. A socket that takes nothing for as long is closed at once (it could not
    /// take a GOAWAY either). RFC 8441 tunnels' writes follow the same rules (`TimedOut`).
    /// So do the writes of an upgraded HTTP/1.1 connection (WebSocket): past them the
    /// connection is closed with a reset and the write fails with `TimedOut`.
    pub write_timeout: Duration,
    /// Minimum rate, in bytes per second, at which a client must take what the server writes:
    /// from a blocked write until everything pending is written, the time spent waiting for
    /// the socket may not pass `write_rate_grace + written / write_min_rate`, or the connection
    /// is reset. Only waits for the client count, and the account closes whenever the output
    /// is fully written, so a long-lived stream that produces slowly is not penalised for its
    /// own pace. `0` turns the check off. Default 1024 bytes/s. HTTP/2: per stream, the account
    /// closes when everything the handler gave so far was handed to h2 (see `write_timeout`).
    pub write_min_rate: u32,
    /// Waiting time a blocked write gets before `write_min_rate` applies. Default 10 s.
    pub write_rate_grace: Duration,
    /// Most open connections across all workers (HTTP/2 connections included, one each whatever
    /// their streams); past it the server stops accepting (the backlog
    /// holds new clients), after first closing the idle keep-alive connection that waited
    /// longest (on the accepting worker, else on another worker at its next idle tick) to make
    /// room. Default 25 000.
    pub max_connections: usize,
    /// Most open connections from one IP address (IPv4-mapped IPv6 counted as IPv4); a connection
    /// past it is closed right after `accept`. `None` turns the cap off. Default `None`: behind a
    /// proxy or NAT, many clients share an address, so set it where clients connect directly
    /// (for example 256).
    pub max_connections_per_addr: Option<usize>,
    /// Close after this many requests on one connection (last response says `Connection: close`).
    /// Default: unlimited. HTTP/2: after this many streams the connection gets a graceful
    /// `GOAWAY(NO_ERROR)`; streams the client opened before seeing it are still answered.
    pub max_requests_per_connection: Option<u64>,
    /// Stop reading from a pipelining client once this many response bytes wait to be written.
    /// Default 256 KiB.
    ///
    /// HTTP/2: the most response bytes a connection pulls from handlers' streamed bodies and
    /// has not yet handed to h2; a stream waits before pulling more. h2 then queues at most
    /// [`crate::h2::Http2Config::max_send_buffer`] per stream, within the client's windows; a
    /// file body is read 64 KiB at a time as windows open, and a `Full` body is the handler's
    /// (held until the response is sent or its stream reset by `write_timeout`).
    pub max_pending_output: usize,
    /// Graceful shutdown deadline after which connections are force-closed. Default 10 s.
    /// HTTP/2 alike: `GOAWAY(NO_ERROR)`, open streams finish until then.
    pub shutdown_timeout: Duration,
    /// Value of the `Server` header; `None` sends none. Default `Some("peregrine")`. Must be a
    /// valid field value without control characters ([`ServerConfig::validate`]).
    pub server_name: Option<&'static str>,
    /// `listen(2)` backlog. Default 1024.
    pub backlog: u32,
    /// Raised when a graceful shutdown starts, before the listeners close (see
    /// [`ServerConfig::drain_delay`]); readiness endpoints read it. Clones share the flag.
    pub drain_signal: DrainSignal,
    /// How long the server keeps accepting, with [`ServerConfig::drain_signal`] raised, between
    /// the start of a graceful shutdown and closing the listeners: the time a load balancer needs
    /// to see readiness fail and stop sending new connections. Default 0 (close at once).
    pub drain_delay: Duration,
    /// Who hears about connections opening and closing and requests the engine refuses itself
    /// (see [`EngineEvents`]). Default `None`: the driver skips every event.
    pub events: Option<Arc<dyn EngineEvents>>,
    /// HTTP/2 limits and protections (feature `http2`).
    #[cfg(feature = "http2")]
    pub http2: crate::h2::config::Http2Config,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            unix: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            steer: false,
            pin: false,
            limits: Limits::default(),
            max_body_size: 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            body_min_rate: 1024,
            body_rate_grace: Duration::from_secs(10),
            body_total_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            write_min_rate: 1024,
            write_rate_grace: Duration::from_secs(10),
            max_connections: 25_000,
            max_connections_per_addr: None,
            max_requests_per_connection: None,
            max_pending_output: 256 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            server_name: Some("peregrine"),
            backlog: 1024,
            drain_signal: DrainSignal::default(),
            drain_delay: Duration::ZERO,
            events: None,
            #[cfg(feature = "http2")]
            http2: crate::h2::config::Http2Config::default(),
        }
    }
}

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
    /// | `MAX_BODY` | `--max-body BYTES` | `max_body_size` |
    /// | `IDLE_TIMEOUT` | `--idle-timeout SECS` | `idle_timeout` |
    /// | `HEADER_TIMEOUT` | `--header-timeout SECS` | `header_timeout` |
    /// | `BODY_TIMEOUT` | `--body-timeout SECS` | `body_timeout` |
    /// | `WRITE_TIMEOUT` | `--write-timeout SECS` | `write_timeout` |
    /// | `SHUTDOWN_TIMEOUT` | `--shutdown-timeout SECS` | `shutdown_timeout` |
    /// | `MAX_CONNECTIONS` | `--max-connections N` | `max_connections` |
    /// | `SERVER_NAME` | `--server-name NAME` | `server_name` (empty: none) |
    /// | `DRAIN_DELAY_MS` | `--drain-delay-ms MS` | `drain_delay` |
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
            "max-body" => self.max_body_size = num(v)?,
            "idle-timeout" => self.idle_timeout = secs(v)?,
            "header-timeout" => self.header_timeout = secs(v)?,
            "body-timeout" => self.body_timeout = secs(v)?,
            "write-timeout" => self.write_timeout = secs(v)?,
            "shutdown-timeout" => self.shutdown_timeout = secs(v)?,
            "max-connections" => {
                self.max_connections = usize::try_from(num(v)?).map_err(|e| e.to_string())?
            }
            "drain-delay-ms" => {
                let d = Duration::from_millis(num(v)?);
                if d > MAX_TIMEOUT {
                    return Err(format!("above the maximum of {} s", MAX_TIMEOUT.as_secs()));
                }
                self.drain_delay = d;
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
        assert_eq!((c.workers, c.max_body_size), (3, 5));
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
        assert_eq!(c.write_timeout, Duration::from_secs(6));
        assert_eq!(c.idle_timeout, Duration::from_secs(5));
        assert_eq!(c.header_timeout, Duration::from_secs(7));
        assert_eq!(
            (c.body_timeout, c.shutdown_timeout),
            (Duration::from_secs(4), Duration::from_secs(2))
        );
        assert!(parse(&[], &["--workers", "0"]).is_err());
        assert!(parse(&[], &["--workers", "-1"]).is_err());
        assert!(parse(&[], &["--addr"])
            .unwrap_err()
            .to_string()
            .contains("needs a value"));
        let (c, _) = parse(&[("MAX_CONNECTIONS", "12")], &[]).unwrap();
        assert_eq!(c.max_connections, 12);
        let (c, _) = parse(&[("DRAIN_DELAY_MS", "2500")], &[]).unwrap();
        assert_eq!(c.drain_delay, Duration::from_millis(2500));
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
        let c = ServerConfig {
            write_timeout: Duration::MAX,
            header_timeout: Duration::MAX,
            ..ServerConfig::default()
        };
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
