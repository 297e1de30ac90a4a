//! Status lines and reason phrases (one static table for the project), and which statuses a
//! handler may send ([`wire_status`]) and which carry a body.

use super::fields::check_field;
use std::sync::OnceLock;

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

/// Whether a handler may answer with `status` as a final response: 200 to 999. The 1xx are the
/// engine's (it sends `100 Continue` itself, and `101` only with a protocol switch, see
/// [`wire_status`]); anything else is not a status code.
#[inline]
pub const fn is_final_status(status: u16) -> bool {
    status >= 200 && status <= 999
}

/// The reason (and, with a newline, the body) of the 500 the engine sends in place of a
/// response it refuses to encode (see [`wire_status`]).
pub const INVALID_RESPONSE_REASON: &str = "invalid response from handler";

/// The status that reaches the wire for a handler's response: its own, or 500 when the engine
/// refuses to encode it, with [`INVALID_RESPONSE_REASON`] as body. This is the rule the engine
/// applies on HTTP/1.1 and HTTP/2 (`is_final_status`, then every field must pass
/// [`check_field`], the ones the engine then drops included); observers (access logs, metrics) call it to report what was
/// sent rather than what the handler returned.
///
/// `upgrade`: the response switches protocols (a 101 with an upgrade function, on an
/// HTTP/1.1 request whose body is complete); a 101 is sent then, and only then.
///
/// ```
/// use peregrine_codec::response::wire_status;
/// let ok: [(&[u8], &[u8]); 1] = [(b"Content-Type", b"text/plain")];
/// assert_eq!(wire_status(200, ok, false), 200);
/// assert_eq!(wire_status(101, ok, false), 500);
/// assert_eq!(wire_status(101, ok, true), 101);
/// let split: [(&[u8], &[u8]); 1] = [(b"X-A", b"1\r\nX-B: 2")];
/// assert_eq!(wire_status(200, split, false), 500);
/// // Fields the engine owns are dropped, but checked first like any other.
/// let owned: [(&[u8], &[u8]); 1] = [(b"Content-Length", b"5")];
/// assert_eq!(wire_status(200, owned, false), 200);
/// let owned: [(&[u8], &[u8]); 1] = [(b"Content-Length", b"\r\n")];
/// assert_eq!(wire_status(200, owned, false), 500);
/// ```
pub fn wire_status<'a>(
    status: u16,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    upgrade: bool,
) -> u16 {
    let status_ok = is_final_status(status) || (status == 101 && upgrade);
    let fields_ok = fields
        .into_iter()
        .all(|(name, value)| check_field(name, value).is_ok());
    if status_ok && fields_ok {
        status
    } else {
        500
    }
}

/// Whether a response with this status must not carry a body (1xx, 204, 304): no framing
/// line over HTTP/1.1, no `content-length` and no DATA over HTTP/2; with HEAD, the whole
/// no-body rule is [`sends_body`](super::sends_body).
///
/// ```
/// use peregrine_codec::response::status_forbids_body;
/// assert!(status_forbids_body(103) && status_forbids_body(204) && status_forbids_body(304));
/// assert!(!status_forbids_body(200) && !status_forbids_body(205));
/// ```
#[inline]
pub fn status_forbids_body(code: u16) -> bool {
    (100..200).contains(&code) || code == 204 || code == 304
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
    fn body_forbidden_statuses() {
        assert!(status_forbids_body(100) && status_forbids_body(204) && status_forbids_body(304));
        assert!(!status_forbids_body(200) && !status_forbids_body(404));
    }

    #[test]
    fn the_wire_status_is_the_engines_rule() {
        let none: [(&[u8], &[u8]); 0] = [];
        for (status, upgrade, wire) in [
            (200, false, 200),
            (204, false, 204),
            (999, false, 999),
            (100, false, 500),
            (101, false, 500),
            (199, false, 500),
            (101, true, 101),
            (102, true, 500),
            (0, false, 500),
            (1000, false, 500),
        ] {
            assert_eq!(
                wire_status(status, none, upgrade),
                wire,
                "{status} {upgrade}"
            );
        }
        let fields = |n: &'static [u8], v: &'static [u8]| [(n, v)];
        assert_eq!(wire_status(200, fields(b"x a", b"1"), false), 500);
        assert_eq!(wire_status(200, fields(b"", b"1"), false), 500);
        assert_eq!(wire_status(200, fields(b"x-a", b"1\0"), false), 500);
        assert_eq!(wire_status(101, fields(b"x-a", b"1\n"), true), 500);
        assert_eq!(
            wire_status(200, fields(b"Transfer-Encoding", b"\n"), false),
            500
        );
        assert_eq!(wire_status(200, fields(b"x-a", b"\x01"), false), 500);
        assert_eq!(wire_status(200, fields(b"x-a", b"\x7f"), false), 500);
        assert_eq!(wire_status(200, fields(b"x-a", b"caf\xc3\xa9"), false), 200);
    }
}
