//! Parse errors that carry the status code to answer with.

/// A request the codec refuses. `status` is the HTTP status a server must answer with (400, 413,
/// 414, 417, 431, 501 or 505) before closing the connection; `reason` is a short, static,
/// human-readable explanation that is safe to send to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    /// HTTP status code to answer with.
    pub status: u16,
    /// Short explanation, e.g. `"whitespace before colon in field name"`.
    pub reason: &'static str,
}

impl ParseError {
    /// Builds an error.
    pub const fn new(status: u16, reason: &'static str) -> Self {
        Self { status, reason }
    }
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {}", self.status, self.reason)
    }
}

impl std::error::Error for ParseError {}
