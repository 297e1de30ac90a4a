//! [`ServerConfigBuilder`]: a setter for every field of [`ServerConfig`], by name.

use super::settings::{Limits, ServerConfig, Timeouts};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Builds a [`ServerConfig`] one field at a time: start from [`ServerConfig::builder`] (the
/// defaults) or from an existing configuration (`ServerConfigBuilder::from(config)`), end with
/// [`ServerConfigBuilder::build`]. Each setter is named after the field it sets, and its
/// documentation names the field (where the protocols it applies to are described).
///
/// ```
/// use peregrine_server::{ServerConfig, ServerConfigBuilder};
/// use std::time::Duration;
/// let base = ServerConfig::builder().workers(2).build();
/// let config = ServerConfigBuilder::from(base).idle_timeout(Duration::from_secs(5)).build();
/// assert_eq!((config.workers, config.timeouts.idle), (2, Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ServerConfigBuilder {
    config: ServerConfig,
}

impl ServerConfig {
    /// A builder starting from the defaults, with a setter for every field by its name
    /// (`.workers(2)`, `.header_timeout(..)`, `.max_body_size(..)`).
    ///
    /// ```
    /// use peregrine_server::ServerConfig;
    /// use std::time::Duration;
    /// let config = ServerConfig::builder()
    ///     .workers(2)
    ///     .header_timeout(Duration::from_secs(5))
    ///     .max_body_size(64 * 1024)
    ///     .build();
    /// assert_eq!(config.timeouts.header, Duration::from_secs(5));
    /// assert_eq!(config.limits.max_body_size, 64 * 1024);
    /// ```
    pub fn builder() -> ServerConfigBuilder {
        ServerConfigBuilder::from(ServerConfig::default())
    }
}

impl From<ServerConfig> for ServerConfigBuilder {
    fn from(config: ServerConfig) -> Self {
        ServerConfigBuilder { config }
    }
}

/// One setter per field: `name: Type => path.to.field`.
macro_rules! setters {
    ($($name:ident: $ty:ty => $($field:ident).+;)*) => {$(
        #[doc = concat!("Sets [`ServerConfig::", stringify!($($field).+), "`](", setters!(@link $($field).+), ").")]
        pub fn $name(mut self, value: $ty) -> Self {
            self.config.$($field).+ = value;
            self
        }
    )*};
    (@link $field:ident) => { concat!("ServerConfig::", stringify!($field)) };
    (@link limits . $field:ident) => { concat!("Limits::", stringify!($field)) };
    (@link timeouts . $field:ident) => { concat!("Timeouts::", stringify!($field)) };
}

impl ServerConfigBuilder {
    setters! {
        addr: SocketAddr => addr;
        unix: Option<PathBuf> => unix;
        workers: usize => workers;
        steer: bool => steer;
        pin: bool => pin;
        backlog: u32 => backlog;
        server_name: Option<&'static str> => server_name;
        half_close: bool => half_close;
        limits: Limits => limits;
        parser_limits: peregrine_codec::Limits => limits.parser;
        max_body_size: u64 => limits.max_body_size;
        max_connections: usize => limits.max_connections;
        max_connections_per_addr: Option<usize> => limits.max_connections_per_addr;
        max_requests_per_connection: Option<u64> => limits.max_requests_per_connection;
        max_pending_output: usize => limits.max_pending_output;
        timeouts: Timeouts => timeouts;
        header_timeout: Duration => timeouts.header;
        body_timeout: Duration => timeouts.body;
        body_min_rate: u32 => timeouts.body_min_rate;
        body_rate_grace: Duration => timeouts.body_rate_grace;
        body_total_timeout: Duration => timeouts.body_total;
        idle_timeout: Duration => timeouts.idle;
        write_timeout: Duration => timeouts.write;
        write_min_rate: u32 => timeouts.write_min_rate;
        write_rate_grace: Duration => timeouts.write_rate_grace;
        shutdown_timeout: Duration => timeouts.shutdown;
        drain_delay: Duration => timeouts.drain_delay;
    }

    /// Sets [`ServerConfig::http2`] (feature `http2`).
    #[cfg(feature = "http2")]
    pub fn http2(mut self, value: crate::h2::Http2Config) -> Self {
        self.config.http2 = value;
        self
    }

    /// Sets [`ServerConfig::http3`] (feature `http3`).
    #[cfg(feature = "http3")]
    pub fn http3(mut self, value: crate::h3::Http3Config) -> Self {
        self.config.http3 = value;
        self
    }

    /// The configuration. It is checked when the server starts ([`ServerConfig::validate`]).
    #[must_use]
    pub fn build(self) -> ServerConfig {
        self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_starts_from_the_defaults_and_sets_each_field_where_it_lives() {
        let built = format!("{:?}", ServerConfig::builder().build());
        assert_eq!(built, format!("{:?}", ServerConfig::default()));
        let c = ServerConfig::builder()
            .max_body_size(7)
            .max_pending_output(8)
            .body_total_timeout(Duration::from_secs(9))
            .shutdown_timeout(Duration::from_secs(3))
            .drain_delay(Duration::from_millis(4))
            .build();
        assert_eq!(
            (c.limits.max_body_size, c.limits.max_pending_output),
            (7, 8)
        );
        assert_eq!(c.timeouts.body_total, Duration::from_secs(9));
        assert_eq!(c.timeouts.shutdown, Duration::from_secs(3));
        assert_eq!(c.timeouts.drain_delay, Duration::from_millis(4));
        // Everything else kept its default.
        let rest = ServerConfig {
            limits: Limits {
                max_body_size: 7,
                max_pending_output: 8,
                ..Limits::default()
            },
            timeouts: Timeouts {
                body_total: Duration::from_secs(9),
                shutdown: Duration::from_secs(3),
                drain_delay: Duration::from_millis(4),
                ..Timeouts::default()
            },
            ..ServerConfig::default()
        };
        assert_eq!(format!("{c:?}"), format!("{rest:?}"));
    }
}
