//! The request-head parser proper. Generic over the scanning strategy so that each path is
//! compiled as one function with its own target features and everything inlined.
//!
//! The parser never looks at a byte twice on the success path, except for the few header fields
//! whose values decide framing or routing (Host, Content-Length, Transfer-Encoding, Connection,
//! Expect). An incomplete buffer is re-parsed from the start on the next call (like httparse and
//! picohttpparser); heads are small, so this is cheaper than carrying state.
//!
//! One job per module: `request_line` (leading empty lines, method, version), `target` (the
//! request-target and its form), `authority` (Host and target authorities), `fields` (field
//! lines and their limits), `head_fields` (the fields that decide framing, routing and the
//! connection), `instantiations` (one parser per scanning path). The steps are called in order
//! by [`parse_core`], below.

use crate::head::{FieldSpan, Parsed, RequestHead};
use crate::scan::Scan;
use crate::{Limits, ParseError};

macro_rules! bad {
    ($reason:expr) => {
        return Err(ParseError::new(400, $reason))
    };
}

mod authority;
mod fields;
mod head_fields;
pub(crate) mod instantiations;
mod request_line;
mod span;
mod target;

pub(crate) use crate::grammar::name_is;
pub(crate) use authority::validate_authority;
pub(crate) use fields::parse_field_line;
pub(crate) use head_fields::{
    parse_connection, parse_content_length, parse_transfer_encoding, te_lists_trailers,
};
pub(crate) use span::span;

use fields::field_lines;
use head_fields::HeadFields;
use request_line::{method, skip_leading_empty_lines, version};
use target::{request_target, target_form};

/// `Ok(Some(x))` goes on with `x`; `Ok(None)` means "the head is incomplete" and ends the
/// parse with [`Parsed::Incomplete`]; an error ends it with the error.
macro_rules! need {
    ($step:expr) => {
        match $step? {
            Some(value) => value,
            None => return Ok(Parsed::Incomplete),
        }
    };
}

/// The parse, for one scanning strategy: the request line, then the field lines, then the
/// checks that need the whole head. Each step is a function below, inlined here.
#[inline(always)]
pub(crate) fn parse_core<S: Scan>(
    s: S,
    buf: &[u8],
    limits: &Limits,
    fields: &mut [FieldSpan],
) -> Result<Parsed, ParseError> {
    // Spans are u32; refuse to index past that rather than wrap. A head that long broke the
    // limits long before, so treat only the first 4 GiB as visible.
    let buf = &buf[..buf.len().min(u32::MAX as usize)];

    let m_start = need!(skip_leading_empty_lines(buf, limits));
    let (m_end, method_kind) = need!(method(s, buf, m_start));
    let t_start = m_end + 1;
    let target = need!(request_target(s, buf, t_start, limits));
    let t_end = target.end;
    let version = need!(version(buf, t_end + 1));
    let form = target_form(s, buf, t_start, &target, method_kind)?;

    let mut head = HeadFields::new(version);
    let (head_len, field_count) = need!(field_lines(s, buf, t_end + 11, limits, fields, &mut head));
    let authority = head.authority(form.authority)?;
    let framing = head.framing();

    Ok(Parsed::Complete(RequestHead {
        head_len,
        method: span(m_start, m_end),
        method_kind,
        target: span(t_start, t_end),
        path: form.path,
        query: form.query,
        version,
        field_count,
        authority,
        framing,
        connection: head.connection,
        expect: head.expect,
        te_trailers: head.te_trailers,
    }))
}
