//! Response-head encoding: status lines from a static table, cached `Date`, `Content-Length`
//! without allocation.
//!
//! API CONTRACT (fixed; the engine is written against it).
//!
//! ```
//! use peregrine_codec::response::{self, DateCache};
//!
//! let mut out = Vec::with_capacity(128);
//! out.extend_from_slice(response::status_line(200));
//! DateCache::write_date_header(&mut out);
//! response::write_content_length(&mut out, 13);
//! out.extend_from_slice(response::CONNECTION_CLOSE);
//! out.extend_from_slice(b"\r\nHello, World!");
//! assert!(out.starts_with(b"HTTP/1.1 200 OK\r\nDate: "));
//! ```

use crate::Version;
use std::cell::Cell;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// `Connection: close\r\n`, sent with every error response and when either side closes.
pub const CONNECTION_CLOSE: &[u8] = b"Connection: close\r\n";
/// `Connection: keep-alive\r\n`, sent to HTTP/1.0 clients that asked to keep the connection.
pub const CONNECTION_KEEP_ALIVE: &[u8] = b"Connection: keep-alive\r\n";
/// `Transfer-Encoding: chunked\r\n`.
pub const TRANSFER_ENCODING_CHUNKED: &[u8] = b"Transfer-Encoding: chunked\r\n";
/// The complete interim response sent before reading a body announced with
/// `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

macro_rules! statuses {
    ($($code:literal $reason:literal,)*) => {
        /// The canonical reason phrase for `code` (`"OK"`, `"Not Found"`...). Codes without a
        /// registered phrase get a generic one for their class (`"Client Error"`...).
        pub fn reason_phrase(code: u16) -> &'static str {
            match code {
                $($code => $reason,)*
                _ => class_reason(code),
            }
        }

        /// The status line `HTTP/1.1 <code> <reason>\r\n` for `code`, from a static table
        /// (unknown codes get a generic reason for their class). A status code has three digits;
        /// a `code` outside `100..=999` is a programming error and gets the 500 line.
        pub fn status_line(code: u16) -> &'static [u8] {
            match code {
                $($code => concat!("HTTP/1.1 ", stringify!($code), " ", $reason, "\r\n").as_bytes(),)*
                100..=999 => other_status_line(code),
                _ => b"HTTP/1.1 500 Internal Server Error\r\n",
            }
        }
    };
}

statuses! {
    100 "Continue",
    101 "Switching Protocols",
    103 "Early Hints",
    200 "OK",
    201 "Created",
    202 "Accepted",
    203 "Non-Authoritative Information",
    204 "No Content",
    205 "Reset Content",
    206 "Partial Content",
    300 "Multiple Choices",
    301 "Moved Permanently",
    302 "Found",
    303 "See Other",
    304 "Not Modified",
    307 "Temporary Redirect",
    308 "Permanent Redirect",
    400 "Bad Request",
    401 "Unauthorized",
    402 "Payment Required",
    403 "Forbidden",
    404 "Not Found",
    405 "Method Not Allowed",
    406 "Not Acceptable",
    407 "Proxy Authentication Required",
    408 "Request Timeout",
    409 "Conflict",
    410 "Gone",
    411 "Length Required",
    412 "Precondition Failed",
    413 "Content Too Large",
    414 "URI Too Long",
    415 "Unsupported Media Type",
    416 "Range Not Satisfiable",
    417 "Expectation Failed",
    421 "Misdirected Request",
    422 "Unprocessable Content",
    425 "Too Early",
    426 "Upgrade Required",
    428 "Precondition Required",
    429 "Too Many Requests",
    431 "Request Header Fields Too Large",
    451 "Unavailable For Legal Reasons",
    500 "Internal Server Error",
    501 "Not Implemented",
    502 "Bad Gateway",
    503 "Service Unavailable",
    504 "Gateway Timeout",
    505 "HTTP Version Not Supported",
    511 "Network Authentication Required",
}

fn class_reason(code: u16) -> &'static str {
    match code / 100 {
        1 => "Informational",
        2 => "Success",
        3 => "Redirection",
        4 => "Client Error",
        5 => "Server Error",
        _ => "Unknown",
    }
}

/// Status lines for three-digit codes without a registered phrase, built once on first use and
/// kept for the life of the process (at most 900 short lines).
fn other_status_line(code: u16) -> &'static [u8] {
    static TABLE: OnceLock<Vec<Box<[u8]>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (100u16..=999)
            .map(|c| {
                format!("HTTP/1.1 {c} {}\r\n", class_reason(c))
                    .into_bytes()
                    .into_boxed_slice()
            })
            .collect()
    });
    &table[usize::from(code - 100)]
}

/// The `Connection` line a response needs, per http1-rules.md G: `close` when the connection
/// will be closed after this response (always after an error, or when the client asked); for an
/// HTTP/1.0 client that asked for `keep-alive` and will get it, `keep-alive`; otherwise nothing
/// (persistence is the HTTP/1.1 default).
///
/// ```
/// use peregrine_codec::{response::{connection_header, CONNECTION_CLOSE}, Version};
/// assert_eq!(connection_header(Version::Http11, false), Some(CONNECTION_CLOSE));
/// assert_eq!(connection_header(Version::Http11, true), None);
/// ```
pub fn connection_header(version: Version, keep_open: bool) -> Option<&'static [u8]> {
    match (keep_open, version) {
        (false, _) => Some(CONNECTION_CLOSE),
        (true, Version::Http10) => Some(CONNECTION_KEEP_ALIVE),
        (true, Version::Http11 | Version::Http2) => None,
    }
}

/// Whether a response with this status must not carry a body (1xx, 204, 304).
pub fn status_forbids_body(code: u16) -> bool {
    (100..200).contains(&code) || code == 204 || code == 304
}

/// Appends `Content-Length: <n>\r\n` to `out` without allocating a temporary string.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Length of `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n` (IMF-fixdate is always 29 bytes).
const DATE_LINE_LEN: usize = 6 + 29 + 2;

/// A per-thread cache of the `Date: <IMF-fixdate>\r\n` header line, refreshed at most once a
/// second: [`DateCache::write_date_header`] never writes a value more than one second stale.
///
/// Each call reads the wall clock (a vDSO call, tens of nanoseconds) and compares whole seconds
/// with the cached line; the line is re-formatted only when the second changed. The cache lives
/// in a thread-local, so thread-per-core workers never share or lock it.
#[derive(Debug)]
pub struct DateCache {
    _private: (),
}

thread_local! {
    /// (unix second of the cached line, the line). Second `u64::MAX` means "never formatted".
    static DATE_LINE: Cell<(u64, [u8; DATE_LINE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LINE_LEN])) };
}

impl DateCache {
    /// Appends the current `Date: ...\r\n` line to `out`.
    pub fn write_date_header(out: &mut Vec<u8>) {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        DATE_LINE.with(|cell| {
            let (cached_secs, mut line) = cell.get();
            if cached_secs != secs {
                line = format_date_line(now);
                cell.set((secs, line));
            }
            out.extend_from_slice(&line);
        });
    }
}

fn format_date_line(now: SystemTime) -> [u8; DATE_LINE_LEN] {
    let mut line = [0u8; DATE_LINE_LEN];
    let mut w = &mut line[..];
    // Writing 37 bytes into a 37-byte array cannot fail: IMF-fixdate has a fixed width.
    let _ = write!(w, "Date: {}\r\n", httpdate::HttpDate::from(now));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_status_lines() {
        assert_eq!(status_line(200), b"HTTP/1.1 200 OK\r\n");
        assert_eq!(status_line(404), b"HTTP/1.1 404 Not Found\r\n");
        assert_eq!(
            status_line(431),
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        );
        assert_eq!(status_line(299), b"HTTP/1.1 299 Success\r\n");
        assert_eq!(status_line(499), b"HTTP/1.1 499 Client Error\r\n");
        assert_eq!(status_line(42), b"HTTP/1.1 500 Internal Server Error\r\n");
        assert_eq!(reason_phrase(505), "HTTP Version Not Supported");
        assert_eq!(reason_phrase(599), "Server Error");
        for code in 100..=999u16 {
            let line = status_line(code);
            let expect = format!("HTTP/1.1 {code} {}\r\n", reason_phrase(code));
            assert_eq!(line, expect.as_bytes());
        }
    }

    #[test]
    fn content_length_formatting() {
        let mut out = Vec::new();
        write_content_length(&mut out, 0);
        write_content_length(&mut out, u64::MAX);
        assert_eq!(
            out,
            b"Content-Length: 0\r\nContent-Length: 18446744073709551615\r\n"
        );
    }

    #[test]
    fn connection_lines() {
        assert_eq!(
            connection_header(Version::Http10, true),
            Some(CONNECTION_KEEP_ALIVE)
        );
        assert_eq!(
            connection_header(Version::Http10, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(
            connection_header(Version::Http11, false),
            Some(CONNECTION_CLOSE)
        );
        assert_eq!(connection_header(Version::Http11, true), None);
    }

    #[test]
    fn body_forbidden_statuses() {
        assert!(status_forbids_body(100) && status_forbids_body(204) && status_forbids_body(304));
        assert!(!status_forbids_body(200) && !status_forbids_body(404));
    }

    #[test]
    fn date_line_is_refreshed_when_the_second_changes() {
        let read = || {
            let mut out = Vec::new();
            DateCache::write_date_header(&mut out);
            httpdate::parse_http_date(std::str::from_utf8(&out[6..out.len() - 2]).unwrap()).unwrap()
        };
        let first = read();
        // Sleeping past the next whole second must give a later Date (the cache is keyed by the
        // second, not refreshed on a timer).
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(read() > first);
        // Each thread has its own cache, and a fresh thread formats its own line.
        let other = std::thread::spawn(read).join().unwrap();
        assert!(other > first);
    }

    #[test]
    fn date_line_is_well_formed_and_current() {
        let mut out = Vec::new();
        DateCache::write_date_header(&mut out);
        assert_eq!(out.len(), DATE_LINE_LEN);
        assert!(out.starts_with(b"Date: ") && out.ends_with(b" GMT\r\n"));
        let text = std::str::from_utf8(&out[6..out.len() - 2]).unwrap();
        let when = httpdate::parse_http_date(text).unwrap();
        let now = SystemTime::now();
        // The cached line is at most one second behind the clock, and never ahead of it.
        let behind = now.duration_since(when).unwrap();
        assert!(behind.as_secs() <= 1, "date is {behind:?} behind");
        // A second call in the same thread gives the same or a later second.
        let mut again = Vec::new();
        DateCache::write_date_header(&mut again);
        let text2 = std::str::from_utf8(&again[6..again.len() - 2]).unwrap();
        assert!(httpdate::parse_http_date(text2).unwrap() >= when);
    }
}
