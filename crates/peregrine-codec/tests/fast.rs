//! The fast path against the general parser, at its boundaries: every request here is parsed on
//! every scanning path with the fast path and with the general parser alone (`common::parse_all`
//! asserts that all of them return the same result and the same fields). The inputs are chosen to
//! leave the fast path at every position: each byte of typical requests replaced by every byte
//! value, bytes inserted and removed, every limit set exactly at and one below what the request
//! needs, and the same with a second request after the first (so the vector loads are in bounds
//! instead of ending at the buffer's end).

mod common;
use common::*;
use peregrine_codec::{Limits, ParseError, Parsed};

/// Shapes the fast path takes (and a few it declines), each complete and valid.
const BASES: &[&[u8]] = &[
    b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:18080\r\n\r\n",
    b"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\n\r\n",
    b"POST /a/b?c=d%20e&f=?g HTTP/1.1\r\nHost: x:65535\r\nContent-Length: 12\r\nConnection: close\r\n\r\n",
    b"PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
    b"DELETE /d HTTP/1.0\r\nX:  v \t\r\nY:\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD / HTTP/1.1\r\nHost:\r\n\r\n",
    b"PATCH /p HTTP/1.1\r\nhost: a%41b.example:0080\r\nA-Very-Long-Header-Name-Over-32-Bytes: and a long value, too\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
];

fn limits_for(buf: &[u8]) -> Vec<Limits> {
    let base = Limits::default();
    let head = match parse_all(buf, &base).0 {
        Ok(Parsed::Complete(h)) => h,
        other => panic!("{other:?} for {:?}", show(buf)),
    };
    let line_end = buf.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    let header_bytes = head.head_len - line_end;
    let longest_line = buf[line_end..head.head_len]
        .split(|&b| b == b'\n')
        .map(|l| l.len().saturating_sub(1))
        .max()
        .unwrap();
    let target = head.target.len as usize;
    let mut all = vec![base];
    for d in [0, 1] {
        all.push(Limits {
            max_target_len: target - d,
            ..base
        });
        all.push(Limits {
            max_field_line: longest_line.saturating_sub(d),
            ..base
        });
        all.push(Limits {
            max_header_bytes: header_bytes - d,
            ..base
        });
        all.push(Limits {
            max_fields: head.field_count.saturating_sub(d),
            ..base
        });
    }
    all
}

/// [`check`] where only the agreement matters.
fn agree(buf: &[u8], limits: &Limits) {
    let _outcome = check(buf, limits);
}

/// `buf` alone and followed by another request; returns the outcome for `buf` alone.
fn check(buf: &[u8], limits: &Limits) -> Result<Parsed, ParseError> {
    let (whole, _) = parse_all(buf, limits);
    let mut two = buf.to_vec();
    two.extend_from_slice(BASES[0]);
    let (first, _) = parse_all(&two, limits);
    if let Ok(Parsed::Complete(h)) = whole {
        assert_eq!(first, Ok(Parsed::Complete(h)), "{:?}", show(buf));
    }
    whole
}

#[test]
fn each_base_is_accepted_and_limits_at_the_edge_decide_the_same() {
    for &base in BASES {
        for (k, limits) in limits_for(base).iter().enumerate() {
            let r = check(base, limits);
            // Index 0 is the default, then pairs of (exact, one below) per limit: the exact
            // limit accepts, one below is refused (with the limit's own status).
            match k {
                0 => assert!(matches!(r, Ok(Parsed::Complete(_))), "{r:?}"),
                1..=4 => assert!(matches!(r, Ok(Parsed::Complete(_))), "{k}: {r:?}"),
                _ => {
                    if let Ok(Parsed::Complete(_)) = r {
                        // Only a limit that was already zero slack-free cannot go lower
                        // (e.g. no fields, max_fields 0 both times).
                        assert!(
                            limits.max_fields == 0 || limits.max_field_line == 0,
                            "{k}: {:?} accepted under {limits:?}",
                            show(base)
                        );
                    }
                }
            }
            // Every prefix agrees too (and is incomplete or the same error).
            for cut in 0..base.len() {
                agree(&base[..cut], limits);
            }
        }
    }
}

#[test]
fn every_byte_value_at_every_position_agrees() {
    for &base in BASES {
        let mut buf = base.to_vec();
        for i in 0..base.len() {
            for b in 0..=255u8 {
                buf[i] = b;
                agree(&buf, &Limits::default());
            }
            buf[i] = base[i];
        }
    }
}

#[test]
fn inserted_and_removed_bytes_at_every_position_agree() {
    const BYTES: &[u8] = b" \t\r\n:%?/[]@,;0aZ\x00\x7f\x80";
    for &base in BASES {
        for i in 0..=base.len() {
            for &b in BYTES {
                let mut buf = base.to_vec();
                buf.insert(i, b);
                agree(&buf, &Limits::default());
            }
            if i < base.len() {
                let mut buf = base.to_vec();
                buf.remove(i);
                agree(&buf, &Limits::default());
            }
        }
    }
}

#[test]
fn small_limits_with_substitutions_agree() {
    for &base in &BASES[..4] {
        for limits in limits_for(base) {
            let mut buf = base.to_vec();
            for i in 0..base.len() {
                for &b in b" \r\n:%?a\x00" {
                    buf[i] = b;
                    agree(&buf, &limits);
                }
                buf[i] = base[i];
            }
        }
    }
}

#[test]
fn host_ports_at_the_boundaries() {
    // The fast path checks plain `host:port` values itself; every other shape is the general
    // parser's. Ports around every length and value boundary, with and without bytes after.
    let ports: &[(&str, bool)] = &[
        ("0", true),
        ("9", true),
        ("80", true),
        ("8080", true),
        ("00080", true),
        ("65535", true),
        ("65536", false),
        ("65599", false),
        ("70000", false),
        ("99999", false),
        ("000080", false),
        ("", false),
        ("8a", false),
        ("a8", false),
        ("8:", false),
        ("/", false),
        (":", false),
        ("1 2", false),
    ];
    for (port, ok) in ports {
        for host in [
            "h",
            "127.0.0.1",
            "a-very-long-host-name.example.com",
            "[::1]",
            "a%41",
        ] {
            let buf = format!("GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
            let r = check(buf.as_bytes(), &Limits::default());
            assert_eq!(matches!(r, Ok(Parsed::Complete(_))), *ok, "{buf:?}: {r:?}");
            if !ok {
                assert_eq!(r.unwrap_err().status, 400, "{buf:?}");
            }
        }
    }
}

#[test]
fn host_lines_of_every_shape_agree() {
    // The fast path reads `Host: ` lines with a plain value in one pass; everything around that
    // shape (name case, spacing, trailing whitespace, empty parts, a second Host, a port cut by
    // the end of the buffer) must decide exactly as the general parser does.
    let names = ["Host", "host", "HOST", "hOsT", "Hosts", "Hos", "X-Host"];
    let seps = [": ", ":", ":  ", ":\t", " : "];
    let values = [
        "h",
        "h:1",
        "h:80",
        "h:65535",
        "h:65536",
        "h:",
        ":80",
        "h:8a",
        "h:1:2",
        "h ",
        "h:80 ",
        "h\t",
        "",
        "a%41",
        "[::1]:80",
        "h,i",
        "h@i",
        "h:123456",
        "h:000080",
        "h:0000080",
    ];
    for name in names {
        for sep in seps {
            for value in values {
                for extra in ["", "Host: h\r\n", "X: y\r\n"] {
                    let buf = format!("GET / HTTP/1.1\r\n{name}{sep}{value}\r\n{extra}\r\n");
                    agree(buf.as_bytes(), &Limits::default());
                    // The same line later in the head, after another field.
                    let buf =
                        format!("GET / HTTP/1.1\r\nA: b\r\n{extra}{name}{sep}{value}\r\n\r\n");
                    agree(buf.as_bytes(), &Limits::default());
                }
            }
        }
    }
}

#[test]
fn targets_and_versions_at_the_boundaries() {
    for target in [
        "/",
        "/?",
        "/??",
        "/a?b?c",
        "/%",
        "/%4",
        "/%4g",
        "/%41",
        "/a%41?%42",
        "/[",
        "/a]",
        "//",
        "/\x7f",
        "/a b",
        "/a\tb",
    ] {
        for version in [
            "HTTP/1.1",
            "HTTP/1.0",
            "HTTP/1.2",
            "HTTP/2.0",
            "HTTP/1.1 ",
            "http/1.1",
        ] {
            for method in [
                "GET", "POST", "PUT", "HEAD", "PATCH", "DELETE", "GETX", "get",
            ] {
                let buf = format!("{method} {target} {version}\r\nHost: h\r\n\r\n");
                agree(buf.as_bytes(), &Limits::default());
            }
        }
    }
}
