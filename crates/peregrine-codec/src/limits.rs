//! Configurable parser limits (defaults from `http1-rules.md`).

/// Limits applied while parsing. Defaults follow `http1-rules.md` sections A, B and E.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request-target accepted; longer → 414. Default 8 KiB.
    pub max_target_len: usize,
    /// Longest single field line (name + `:` + value, without CRLF); longer → 431. Default 8 KiB.
    pub max_field_line: usize,
    /// Longest header section (request line excluded); longer → 431. Default 16 KiB.
    pub max_header_bytes: usize,
    /// Most header fields; more → 431. Default 100.
    pub max_fields: usize,
    /// Empty lines (CRLF) tolerated before the request line. Default 4.
    pub max_leading_empty_lines: usize,
    /// Longest chunk extension (bytes after the chunk size up to CRLF); longer → 400. Default 1 KiB.
    pub max_chunk_ext_len: usize,
    /// Longest trailer section of a chunked body; longer → 431. Default 16 KiB.
    pub max_trailer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_target_len: 8 * 1024,
            max_field_line: 8 * 1024,
            max_header_bytes: 16 * 1024,
            max_fields: 100,
            max_leading_empty_lines: 4,
            max_chunk_ext_len: 1024,
            max_trailer_bytes: 16 * 1024,
        }
    }
}
