//! The HTTP/2 client connection preface, which selects h2c by prior knowledge. A leaf: the
//! HTTP/1.1 driver recognises it in a connection's first bytes and protocol selection hands the
//! connection over, without either driver naming the other.

/// The client connection preface (RFC 9113 §3.4): an HTTP/1.1 parser sees it as a request line
/// `PRI * HTTP/2.0`; a cleartext connection starting with it speaks HTTP/2 (h2c, prior
/// knowledge).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether `buf` (the first bytes read from a connection) is, or may still become, the HTTP/2
/// preface: `Some(true)` for the whole preface, `Some(false)` for anything else, `None` when
/// `buf` is a strict prefix of it (read more).
pub fn detect_preface(buf: &[u8]) -> Option<bool> {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        Some(false)
    } else if n == PREFACE.len() {
        Some(true)
    } else {
        None
    }
}
