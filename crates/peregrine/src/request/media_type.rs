//! `Content-Type` checks for the body readers: the media type before its parameters,
//! compared case-insensitively, and what counts as JSON (`application/json` and
//! `application/*+json`).

/// The media type of a Content-Type value (before parameters), trimmed.
fn essence(ct: &[u8]) -> &[u8] {
    let end = ct.iter().position(|&b| b == b';').unwrap_or(ct.len());
    ct[..end].trim_ascii()
}

/// Is the media type of `ct` (a `Content-Type` value) `want`, case-insensitively?
pub(super) fn media_type_is(ct: Option<&[u8]>, want: &str) -> bool {
    ct.is_some_and(|ct| essence(ct).eq_ignore_ascii_case(want.as_bytes()))
}

/// Is `ct` a JSON media type: `application/json` or `application/*+json`?
pub(super) fn is_json_content_type(ct: Option<&[u8]>) -> bool {
    let Some(ct) = ct else { return false };
    let e = essence(ct);
    if e.eq_ignore_ascii_case(b"application/json") {
        return true;
    }
    // application/problem+json, application/vnd.api+json, ...
    e.len() > 17
        && e[..12].eq_ignore_ascii_case(b"application/")
        && e[e.len() - 5..].eq_ignore_ascii_case(b"+json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type(Some(b"application/json")));
        assert!(is_json_content_type(Some(
            b"Application/JSON; charset=utf-8"
        )));
        assert!(is_json_content_type(Some(b"application/vnd.api+json")));
        assert!(!is_json_content_type(Some(b"text/json+")));
        assert!(!is_json_content_type(Some(b"application/+json")));
        assert!(!is_json_content_type(Some(b"text/plain")));
        assert!(!is_json_content_type(None));
    }

    #[test]
    fn form_content_type() {
        assert!(media_type_is(
            Some(b" application/x-www-form-urlencoded ; charset=UTF-8"),
            "application/x-www-form-urlencoded"
        ));
        assert!(!media_type_is(
            Some(b"multipart/form-data"),
            "application/x-www-form-urlencoded"
        ));
    }
}
