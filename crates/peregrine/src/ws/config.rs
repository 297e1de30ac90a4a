//! The limits a WebSocket connection gets, a leaf the handshake and the open socket share.

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Limits of a WebSocket connection.
///
/// ```
/// use peregrine::ws::WsConfig;
/// let c = WsConfig::default();
/// assert_eq!((c.max_message_size, c.max_frame_size), (1 << 20, 1 << 20));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WsConfig {
    /// Largest message (all fragments together); larger → close 1009. Default 1 MiB.
    pub max_message_size: usize,
    /// Largest single frame; larger → close 1009. Default 1 MiB.
    pub max_frame_size: usize,
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            max_message_size: 1024 * 1024,
            max_frame_size: 1024 * 1024,
        }
    }
}

impl WsConfig {
    pub(super) fn tungstenite(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            // Buffers sized for chat-like traffic, not tungstenite's 128 KiB default per
            // connection; they grow for larger messages.
            .read_buffer_size(4 * 1024)
            .write_buffer_size(0)
            .max_message_size(Some(self.max_message_size))
            .max_frame_size(Some(self.max_frame_size))
    }
}
