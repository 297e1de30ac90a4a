//! The HTTP/3 settings and limits: a leaf, part of the engine's configuration.

/// HTTP/3 settings and limits. The engine's `max_body_size`, `idle` timeout (QUIC's idle
/// timeout), `write` and `body` timeouts and `shutdown` timeout apply too; the handshake
/// timeout is the TLS acceptor's (see [`ServerConfig`](crate::ServerConfig)).
///
/// ```
/// use peregrine_server::h3::Http3Config;
/// let h3 = Http3Config {
///     max_concurrent_streams: 64,
///     ..Http3Config::default()
/// };
/// assert!(h3.alt_svc);
/// assert!(!h3.zero_rtt);
/// assert!(h3.steer_by_connection_id);
/// ```
#[derive(Debug, Clone)]
pub struct Http3Config {
    /// Request streams a client may have open at once (QUIC's `initial_max_streams_bidi`; more
    /// wait in the client until one ends). Default 128, as HTTP/2's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub max_concurrent_streams: u32,
    /// `SETTINGS_MAX_FIELD_SECTION_SIZE`: decoded header bytes (names + values + 32 per
    /// field); larger → 431. Default 16 KiB, the HTTP/1.1 and HTTP/2 limit.
    pub max_field_section_size: u64,
    /// Request body bytes a client may send per stream before the handler reads. Default
    /// 256 KiB (HTTP/2's initial stream window).
    pub stream_receive_window: u32,
    /// Bytes a client may send on the whole connection before the handlers read. Default 1 MiB.
    pub receive_window: u32,
    /// Handshakes from addresses not yet validated a worker carries at once; past it, a new
    /// connection is first sent a Retry (address validation, RFC 9000 §8.1.2) and holds no
    /// state or connection slot until the client echoes the token, so a flood of Initial
    /// packets from spoofed addresses cannot fill the server. 0 sends every new connection a
    /// Retry (one more round trip each). Default 64.
    pub max_unvalidated_handshakes: usize,
    /// Whether responses over TCP advertise HTTP/3 (`Alt-Svc: h3=":PORT"; ma=86400`).
    /// Default on.
    pub alt_svc: bool,
    /// Extended CONNECT (RFC 9220, HTTP/3's RFC 8441): `SETTINGS_ENABLE_CONNECT_PROTOCOL` is
    /// announced, and a `CONNECT` with a `:protocol` reaches the service as a `GET` with
    /// `Upgrade: <protocol>`, a 101 upgrade then running on the stream, as over HTTP/2. Off,
    /// such a request is answered 400 (`:protocol` is then no field of the connection). Default
    /// off: h3 0.0.8 parses only the `:protocol` values `webtransport` and `connect-udp` and
    /// resets a `websocket` one as malformed, so announcing it would make RFC 9220 WebSocket
    /// clients fail instead of using WebSocket over TCP.
    pub extended_connect: bool,
    /// Accept 0-RTT (early data, RFC 9001 §4.6) from clients resuming a session: their first
    /// requests travel with the handshake, a round trip sooner. Early data can be replayed by
    /// whoever captured it, so a request accepted before the handshake completed is served only
    /// when its method is safe (GET, HEAD, OPTIONS, TRACE; RFC 9110 §9.2.1) and reaches the
    /// handler with `early-data: 1` (RFC 8470 §5.1); any other method is answered
    /// `425 Too Early` without reaching the handler, and the client repeats it after the
    /// handshake. PUT and DELETE are idempotent but refused too: idempotence makes repeats
    /// harmless when they arrive together, not when an attacker holds a copy back and
    /// delivers it after the client's next change, which it then undoes. Default off.
    pub zero_rtt: bool,
    /// Steer each datagram to the worker whose connection it belongs to, by the connection ID
    /// (Linux; a classic BPF program on the workers' `SO_REUSEPORT` group, and connection IDs
    /// whose first byte names the worker). Without it the kernel picks a worker by the
    /// client's address, so a client whose address changes (NAT rebinding, migration to
    /// another network) lands on another worker half the time with two workers, and is sent a
    /// stateless reset and must reconnect. Steering is left off, with a log line, when the
    /// port's group already holds another process's sockets (a restart handing over the port)
    /// or there are more than 256 workers. Default on.
    pub steer_by_connection_id: bool,
}

impl Default for Http3Config {
    fn default() -> Self {
        Http3Config {
            max_concurrent_streams: 128,
            max_field_section_size: 16 * 1024,
            stream_receive_window: 256 * 1024,
            receive_window: 1024 * 1024,
            max_unvalidated_handshakes: 64,
            alt_svc: true,
            extended_connect: false,
            zero_rtt: false,
            steer_by_connection_id: true,
        }
    }
}
