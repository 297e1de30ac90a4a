//! `uri-host [ ":" port ]`: the Host value and the authority of a request-target.

use crate::grammar::is_hex;
use crate::scan::{Scan, HOST};
use crate::ParseError;

/// Validates `uri-host [ ":" port ]` (a Host value, the authority of an absolute-form target, or
/// with `need_port` an authority-form target). Rejects userinfo, path, query, fragment,
/// whitespace, controls, list separators, empty hosts, and ports that are empty, non-numeric or
/// above 65535.
///
/// The authority is `buf[start..end]`; taking the whole buffer lets the vector scan read past
/// `end` (the result is clipped), so a short Host value still gets a full-width scan.
#[inline(always)]
pub(crate) fn validate_authority<S: Scan>(
    s: S,
    buf: &[u8],
    start: usize,
    end: usize,
    need_port: bool,
) -> Result<(), ParseError> {
    let a = &buf[start..end];
    // One pass: the host (IP literal, or reg-name/IPv4 by table lookup), then `:` and the port.
    let host_end = if a.first() == Some(&b'[') {
        let close = match a.iter().position(|&b| b == b']') {
            Some(c) => c,
            None => bad!("unterminated IP literal in authority"),
        };
        let inner = &a[1..close];
        if inner.is_empty()
            || !inner.iter().all(|&b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b':' | b'.' | b'-' | b'_' | b'~' | b'!' | b'$' | b'&')
                    || matches!(b, b'\'' | b'(' | b')' | b'*' | b'+' | b';' | b'=')
            })
        {
            bad!("invalid IP literal in authority");
        }
        if !matches!(a.get(close + 1), None | Some(b':')) {
            bad!("invalid bytes after IP literal in authority");
        }
        close + 1
    } else {
        let mut i = 0;
        loop {
            i = s.skip(buf, start + i, &HOST).min(end) - start;
            let Some(&b) = a.get(i) else { break };
            match b {
                b':' => break,
                b'%' => {
                    if i + 2 >= a.len() || !is_hex(a[i + 1]) || !is_hex(a[i + 2]) {
                        bad!("'%' not followed by two hex digits in host");
                    }
                    i += 3;
                }
                b'@' => bad!("userinfo in authority"),
                b',' => bad!("list value where one host is expected"),
                _ => bad!("invalid byte in host"),
            }
        }
        if i == 0 {
            bad!("empty host in authority");
        }
        i
    };
    if host_end == a.len() {
        if need_port {
            bad!("authority-form request-target without a port");
        }
        return Ok(());
    }
    // a[host_end] == b':'
    let port = &a[host_end + 1..];
    if port.is_empty() {
        bad!("empty port in authority");
    }
    if port.len() > 5 {
        bad!("invalid port in authority");
    }
    if !port.iter().all(u8::is_ascii_digit) {
        bad!("invalid port in authority");
    }
    // Up to 4 digits always fit; 5 digits compare as strings of equal length (leading zeros
    // included, as before: `00080` is 80).
    if port.len() == 5 && port > &b"65535"[..] {
        bad!("invalid port in authority");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Scalar;

    #[test]
    fn port_bounds_are_checked_by_value_on_every_length() {
        for (authority, ok) in [
            (&b"a:0"[..], true),
            (b"a:8080", true),
            (b"a:00080", true),
            (b"a:09999", true),
            (b"a:65535", true),
            (b"a:65536", false),
            (b"a:70000", false),
            (b"a:99999", false),
            (b"a:000080", false),
            (b"a:8a", false),
            (b"a:", false),
        ] {
            let got = validate_authority(Scalar, authority, 0, authority.len(), false);
            assert_eq!(got.is_ok(), ok, "{:?}", std::str::from_utf8(authority));
        }
    }
}
