//! Request-head parser: no panic on any input; every scanning path gives the same result, with
//! the fast path and with the general parser alone; a prefix never succeeds where the whole
//! fails; a complete head's spans are inside the head and its fields obey the field rules.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_codec::{
    parse_request_head_general_with, parse_request_head_with, FieldSpan, Isa, Limits, ParseError,
    Parsed,
};

fn limits(selector: u8) -> Limits {
    match selector % 3 {
        0 => Limits::default(),
        1 => Limits {
            max_target_len: 16,
            max_field_line: 24,
            max_header_bytes: 64,
            max_fields: 3,
            max_leading_empty_lines: 1,
            ..Limits::default()
        },
        _ => Limits {
            max_leading_empty_lines: 0,
            max_fields: 1,
            ..Limits::default()
        },
    }
}

fn parse(
    isa: Isa,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    parse_request_head_with(isa, buf, limits, fields)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else {
        return;
    };
    let limits = limits(selector);
    let mut fields = [FieldSpan::default(); 8];
    let whole = parse(Isa::Scalar, buf, &limits, &mut fields);
    if let Err(e) = whole {
        assert!(matches!(e.status, 400 | 414 | 431 | 501 | 505) && !e.reason.is_empty());
    }
    let filled: Vec<FieldSpan> = match whole {
        Ok(Parsed::Complete(h)) => fields[..h.field_count].to_vec(),
        _ => Vec::new(),
    };
    for isa in Isa::available() {
        let mut f2 = [FieldSpan::default(); 8];
        let r = parse(isa, buf, &limits, &mut f2);
        assert_eq!(r, whole, "{isa:?} disagrees with scalar");
        if let Ok(Parsed::Complete(h)) = r {
            assert_eq!(&f2[..h.field_count], &filled[..], "{isa:?} fields disagree");
        }
        // The general parser alone (no fast path) decides the same.
        let mut f3 = [FieldSpan::default(); 8];
        let g = parse_request_head_general_with(isa, buf, &limits, &mut f3);
        assert_eq!(g, whole, "{isa:?} general parser disagrees with the fast path");
        if let Ok(Parsed::Complete(h)) = g {
            assert_eq!(&f3[..h.field_count], &filled[..], "{isa:?} general fields disagree");
        }
    }
    if let Ok(Parsed::Complete(h)) = whole {
        assert!(h.head_len <= buf.len() && buf[..h.head_len].ends_with(b"\r\n\r\n"));
        for span in [h.method, h.target, h.path] {
            assert!((span.start + span.len) as usize <= h.head_len);
        }
        for f in &filled {
            let name = f.name.slice(buf);
            let value = f.value.slice(buf);
            assert!(!name.is_empty() && !name.contains(&b':'));
            assert!(value
                .iter()
                .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f)));
            assert!(!value.starts_with(b" ") && !value.ends_with(b" "));
        }
        // Everything after the head must not change it.
        let mut longer = buf[..h.head_len].to_vec();
        longer.extend_from_slice(b"GARBAGE\0\r\n");
        assert_eq!(parse(Isa::best(), &longer, &limits, &mut fields), whole);
    }
    // Prefixes: a few cut points (all of them would make the target too slow).
    let end = match whole {
        Ok(Parsed::Complete(h)) => h.head_len,
        _ => buf.len(),
    };
    for cut in [
        end / 2,
        end.saturating_sub(1),
        end / 3,
        end.saturating_sub(2),
    ] {
        match (
            parse(Isa::best(), &buf[..cut.min(end)], &limits, &mut fields),
            &whole,
        ) {
            (Ok(Parsed::Incomplete), _) | (Err(_), Err(_)) => {}
            (Ok(Parsed::Complete(_)), _) if cut >= end => {}
            (p, w) => panic!("prefix {cut} gave {p:?}, whole gave {w:?}"),
        }
    }
});
