//! Response header fields: checked as they are written, and the ones the engine owns.

/// A header field a handler may not set, because the engine writes it from what it actually
/// does: `Date`, `Connection`, `Content-Length`, `Transfer-Encoding`. A handler's value could
/// contradict the body actually sent (RFC 9112 §6.3 request smuggling in reverse).
///
/// ```
/// use peregrine_codec::response::is_engine_owned;
/// assert!(is_engine_owned(b"content-length") && is_engine_owned(b"Connection"));
/// assert!(!is_engine_owned(b"Content-Type"));
/// ```
#[inline]
pub fn is_engine_owned(name: &[u8]) -> bool {
    // Length first: most fields are none of these.
    match name.len() {
        4 => name.eq_ignore_ascii_case(b"date"),
        10 => name.eq_ignore_ascii_case(b"connection"),
        14 => name.eq_ignore_ascii_case(b"content-length"),
        17 => name.eq_ignore_ascii_case(b"transfer-encoding"),
        _ => false,
    }
}

/// Whether `name` is `Server` (a handler's own `Server` field replaces the configured one).
#[inline]
pub fn is_server_field(name: &[u8]) -> bool {
    name.len() == 6 && name.eq_ignore_ascii_case(b"server")
}

/// Whether a response field `name: value` asks to close the connection (`Connection` with a
/// `close` token).
///
/// ```
/// use peregrine_codec::response::asks_close;
/// assert!(asks_close(b"Connection", b"upgrade, Close"));
/// assert!(!asks_close(b"Connection", b"keep-alive"));
/// assert!(!asks_close(b"X-Connection", b"close"));
/// ```
#[inline]
pub fn asks_close(name: &[u8], value: &[u8]) -> bool {
    name.len() == 10
        && name.eq_ignore_ascii_case(b"connection")
        && value
            .split(|&b| b == b',')
            .any(|t| crate::grammar::trim_ows(t).eq_ignore_ascii_case(b"close"))
}

/// A response field that cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldError {
    /// The name is empty or has a byte that is not a `tchar` (RFC 9110 §5.1).
    Name,
    /// The value has a byte no field value may carry (RFC 9110 §5.5): a control other than
    /// HTAB (NUL, CR, LF...) or DEL.
    Value,
}

impl core::fmt::Display for FieldError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FieldError::Name => "field name that is not an HTTP token (RFC 9110 §5.1)",
            FieldError::Value => {
                "field value with a control byte (CR, LF, NUL...) or DEL (RFC 9110 §5.5)"
            }
        })
    }
}

impl std::error::Error for FieldError {}

/// Checks a response field: the name a token ([`is_token`](crate::grammar::is_token)), the
/// value field-value bytes only ([`is_field_value`](crate::grammar::is_field_value): HTAB, SP,
/// visible ASCII, obs-text). The one rule both the HTTP/1.1 and the HTTP/2 driver apply to every
/// field a handler gives, before deciding whether the field is sent (`docs/http1-rules.md`).
///
/// ```
/// use peregrine_codec::response::{check_field, FieldError};
/// assert_eq!(check_field(b"X-Name", b"caf\xc3\xa9\tok"), Ok(()));
/// assert_eq!(check_field(b"X-Name", b"a\x01b"), Err(FieldError::Value));
/// assert_eq!(check_field(b"X Name", b"ok"), Err(FieldError::Name));
/// ```
#[inline]
pub fn check_field(name: &[u8], value: &[u8]) -> Result<(), FieldError> {
    if !crate::grammar::is_token(name) {
        return Err(FieldError::Name);
    }
    if !crate::grammar::is_field_value(value) {
        return Err(FieldError::Value);
    }
    Ok(())
}

/// Appends `name: value\r\n` after [`check_field`]; nothing is written when it fails.
///
/// ```
/// use peregrine_codec::response::{write_field, FieldError};
/// let mut out = Vec::new();
/// write_field(&mut out, b"Content-Type", b"text/plain").unwrap();
/// assert_eq!(out, b"Content-Type: text/plain\r\n");
/// assert_eq!(write_field(&mut out, b"X", b"a\r\nb"), Err(FieldError::Value));
/// assert_eq!(write_field(&mut out, b"X Y", b"a"), Err(FieldError::Name));
/// ```
#[inline]
pub fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) -> Result<(), FieldError> {
    check_field(name, value)?;
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_before_they_are_written() {
        let mut out = Vec::new();
        assert_eq!(write_field(&mut out, b"", b"x"), Err(FieldError::Name));
        assert_eq!(write_field(&mut out, b"a:b", b"x"), Err(FieldError::Name));
        for bad in [
            &b"a\rb"[..],
            b"a\nb",
            b"a\0b",
            b"\r\n",
            b"a\x01",
            b"\x1f",
            b"\x7f",
        ] {
            assert_eq!(write_field(&mut out, b"X", bad), Err(FieldError::Value));
        }
        assert!(out.is_empty());
        write_field(&mut out, b"X-Obs", b"caf\xc3\xa9 \t\x80\xff~").unwrap();
        assert_eq!(out, b"X-Obs: caf\xc3\xa9 \t\x80\xff~\r\n");
        for name in ["Date", "connection", "CONTENT-LENGTH", "Transfer-Encoding"] {
            assert!(is_engine_owned(name.as_bytes()), "{name}");
        }
        for name in ["Dates", "Server", "Content-Type", "Keep-Alive"] {
            assert!(!is_engine_owned(name.as_bytes()), "{name}");
        }
        assert!(is_server_field(b"SERVER") && !is_server_field(b"Servers"));
        assert!(asks_close(b"connection", b" close "));
        assert!(!asks_close(b"connection", b"closed"));
    }
}
