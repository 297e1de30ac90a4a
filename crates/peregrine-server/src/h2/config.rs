//! The HTTP/2 settings and limits: a leaf, part of the engine's configuration.

/// HTTP/2 settings and limits (the engine's timeouts and `max_pending_output` apply too; see
/// [`ServerConfig`](crate::ServerConfig)).
///
/// ```
/// use peregrine_server::h2::Http2Config;
/// let h2 = Http2Config {
///     max_concurrent_streams: 64,
///     max_control_frames: 500,
///     ..Http2Config::default()
/// };
/// assert_eq!(h2.max_send_buffer, 64 * 1024);
/// ```
#[derive(Debug, Clone)]
pub struct Http2Config {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`. Default 128 (nginx `http2_max_concurrent_streams`).
    pub max_concurrent_streams: u32,
    /// `SETTINGS_MAX_HEADER_LIST_SIZE`: decoded header list bytes (names + values + 32 per
    /// field); larger → 431. Default 16 KiB, the HTTP/1.1 header limit.
    pub max_header_list_size: u32,
    /// `SETTINGS_INITIAL_WINDOW_SIZE`: request body bytes a client may send per stream before
    /// the handler reads. Default 256 KiB.
    pub initial_stream_window: u32,
    /// The connection's receive window. Default 1 MiB.
    pub initial_connection_window: u32,
    /// `SETTINGS_MAX_FRAME_SIZE`. Default 16 KiB (the protocol's minimum and default).
    pub max_frame_size: u32,
    /// Response bytes h2 queues per stream, within the client's windows, until the socket takes
    /// them. Default 64 KiB.
    pub max_send_buffer: usize,
    /// Streams reset by the client before they were accepted that may wait in h2's queue;
    /// more → `GOAWAY(ENHANCE_YOUR_CALM)`. Default 20 (h2's).
    pub max_pending_accept_reset_streams: usize,
    /// Streams h2 itself resets for protocol errors by the client; more →
    /// `GOAWAY(ENHANCE_YOUR_CALM)`. Default 128.
    pub max_local_error_reset_streams: usize,
    /// Streams the client may reset before their response is complete within 10 s; more →
    /// `GOAWAY(ENHANCE_YOUR_CALM)` (rapid reset, CVE-2023-44487). Default 200.
    pub max_client_resets: u32,
    /// Announce RFC 8441 extended CONNECT (WebSocket over HTTP/2). Default on.
    pub enable_connect_protocol: bool,
    /// Control frames (frames that carry no data: WINDOW_UPDATE, PING, SETTINGS, PRIORITY,
    /// RST_STREAM, empty DATA, unknown types) a client may send per 10 s beyond what it earns
    /// (8 per request, 1 per KiB of response data sent); more → `GOAWAY(ENHANCE_YOUR_CALM)`
    /// and close. A flood of 1-byte WINDOW_UPDATEs earns almost nothing. Default 1000.
    pub max_control_frames: u32,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 128,
            max_header_list_size: 16 * 1024,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_send_buffer: 64 * 1024,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 128,
            max_client_resets: 200,
            enable_connect_protocol: true,
            max_control_frames: 1000,
        }
    }
}
