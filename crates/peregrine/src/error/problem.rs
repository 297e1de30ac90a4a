//! An [`Error`] as a response: the RFC 9457 problem document (`application/problem+json`),
//! with the detail and extension members left out of server errors (logged instead).

use super::{Error, Extra};
use crate::response::into_response::IntoResponse;
use peregrine_server::{Response, ResponseBody};
use std::borrow::Cow;

/// Content type of every error answer.
const PROBLEM_JSON: &[u8] = b"application/problem+json";

impl Error {
    /// Renders the problem document. Built by hand rather than through a serde struct so the
    /// members come out in the RFC's order with no intermediate allocation besides the buffer.
    fn body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.detail.as_ref().map_or(0, |d| d.len()));
        let no_extra = Extra::default();
        let x = self.extra.as_deref().unwrap_or(&no_extra);
        match &x.type_uri {
            None => out.extend_from_slice(b"{\"type\":\"about:blank\""),
            Some(t) => {
                out.extend_from_slice(b"{\"type\":");
                write_json_str(&mut out, t);
            }
        }
        out.extend_from_slice(b",\"title\":");
        write_json_str(&mut out, &self.title);
        out.extend_from_slice(b",\"status\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.status).as_bytes());
        let client_error = self.status < 500;
        if client_error {
            if let Some(d) = &self.detail {
                out.extend_from_slice(b",\"detail\":");
                write_json_str(&mut out, d);
            }
        }
        if let Some(i) = &x.instance {
            out.extend_from_slice(b",\"instance\":");
            write_json_str(&mut out, i);
        }
        if client_error {
            for (name, value) in &x.extensions {
                out.push(b',');
                write_json_str(&mut out, name);
                out.push(b':');
                // A Value always serialises.
                let _ = serde_json::to_writer(&mut out, value);
            }
            if !x.field_errors.is_empty() {
                out.extend_from_slice(b",\"errors\":[");
                for (i, (field, detail)) in x.field_errors.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"pointer\":");
                    write_json_str(&mut out, &json_pointer(field));
                    out.extend_from_slice(b",\"field\":");
                    write_json_str(&mut out, field);
                    out.extend_from_slice(b",\"detail\":");
                    write_json_str(&mut out, detail);
                    out.push(b'}');
                }
                out.push(b']');
            }
        }
        out.push(b'}');
        out
    }
}

/// `#/a/b` for the field path `a/b`, each segment escaped as RFC 6901 wants (`~` → `~0`;
/// a literal `/` inside a name cannot be told from a separator here, so `/` separates).
fn json_pointer(field: &str) -> String {
    let mut p = String::with_capacity(field.len() + 2);
    p.push_str("#/");
    p.push_str(&field.replace('~', "~0"));
    p
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json's string escaper, writing into our buffer; cannot fail on a Vec.
    let _ = serde_json::to_writer(&mut *out, s);
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.status >= 500 {
            match (&self.source, &self.detail) {
                (Some(src), _) => {
                    tracing::error!(status = self.status, error = %src, "handler failed")
                }
                (None, Some(d)) => {
                    tracing::error!(status = self.status, detail = %d, "handler failed")
                }
                (None, None) => tracing::debug!(status = self.status, "handler failed"),
            }
        }
        let body = self.body();
        let mut headers = self.headers;
        headers.push((Cow::Borrowed("content-type"), Cow::Borrowed(PROBLEM_JSON)));
        let mut r = Response::new(self.status)
            .with_body(ResponseBody::Full(crate::response::chunks::owned(body)));
        r.headers = headers;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_json(r: &Response) -> serde_json::Value {
        match &r.body {
            ResponseBody::Full(b) => serde_json::from_slice(b).unwrap(),
            _ => panic!("expected full body"),
        }
    }

    #[test]
    fn internal_error_body_is_exactly_the_contract() {
        let r = Error::from(std::io::Error::other("secret path /etc/x")).into_response();
        assert_eq!(r.status, 500);
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Internal Server Error","status":500})
        );
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| n == "content-type" && &v[..] == PROBLEM_JSON));
    }

    #[test]
    fn client_error_shows_detail_server_error_hides_it() {
        let r = Error::bad_request()
            .with_detail("bad \"id\"")
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Bad Request","status":400,"detail":"bad \"id\""})
        );
        let r = Error::new(503)
            .with_detail("pool exhausted at 10.0.0.3")
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Service Unavailable","status":503})
        );
    }

    #[test]
    fn server_errors_hide_extensions_and_field_errors() {
        let r = Error::new(500)
            .with_type("https://example.com/p/db")
            .with_instance("/x")
            .with_extension("sql", "select * from users")
            .with_field_error("a", "b")
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"https://example.com/p/db","title":"Internal Server Error","status":500,"instance":"/x"})
        );
    }

    #[test]
    fn reserved_extension_names_are_dropped() {
        let r = Error::bad_request()
            .with_extension("status", 200)
            .with_extension("n", 1)
            .with_extension("n", 2)
            .into_response();
        assert_eq!(
            body_json(&r),
            serde_json::json!({"type":"about:blank","title":"Bad Request","status":400,"n":2})
        );
    }

    #[test]
    fn field_pointer_escapes() {
        assert_eq!(json_pointer("items/0/name"), "#/items/0/name");
        assert_eq!(json_pointer("a~b"), "#/a~0b");
    }
}
