//! The answer for an opened file (or its precompressed sibling): validators, `Cache-Control`
//! and `Vary`, conditional requests (304, 412), `Range` (206, 416, or the whole file), and
//! the body, read whole or sent from the file. Also the answer when nothing was opened.

use super::byteranges::multipart;
use super::cache;
use super::conditional::{self, validators, Conditions, Precondition};
use super::content_type::content_type;
use super::open::{self, blocking, miss_response, Opened};
use super::options::FileOptions;
use super::range::{self, Ranges};
use crate::error::Error;
use crate::middleware::compression::Coding;
use crate::request::Request;
use crate::response::IntoResponse;
use bytes::Bytes;
use peregrine_server::{Method, Response, ResponseBody};
use std::borrow::Cow;

/// Answers `req` from an opened file (or its precompressed `sibling`).
pub(super) async fn serve(
    req: &Request,
    opened: Opened,
    sibling: Option<(Coding, Opened)>,
    o: &FileOptions,
    status: Option<u16>,
) -> Response {
    let type_path = opened.path.clone();
    let (coding, file) = match sibling {
        Some((c, s)) => (Some(c), s),
        None => (None, opened),
    };
    let len = file.meta.len();
    let modified = file.meta.modified().ok();
    let (mut etag, last_modified) = validators(len, modified);
    if let Some(c) = coding {
        // Distinct validators per coding: the bytes differ (RFC 9110 §8.8.3).
        etag.insert_str(
            etag.len() - 1,
            if c == Coding::Brotli { "-br" } else { "-gz" },
        );
    }

    let mut res = Response::new(status.unwrap_or(200));
    push(&mut res, "etag", etag.clone().into_bytes());
    if let Some(lm) = &last_modified {
        push(&mut res, "last-modified", lm.clone().into_bytes());
    }
    let file_name = type_path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(cc) = cache::cache_control(o, file_name) {
        res.headers.push((Cow::Borrowed("cache-control"), cc));
    }
    if o.precompressed_br || o.precompressed_gzip {
        res.headers
            .push((Cow::Borrowed("vary"), Cow::Borrowed(b"Accept-Encoding")));
    }

    let method = req.method_kind();
    let safe = matches!(method, Method::Get | Method::Head);
    if safe {
        let c = Conditions {
            if_match: req.header("if-match"),
            if_unmodified_since: req.header("if-unmodified-since"),
            if_none_match: req.header("if-none-match"),
            if_modified_since: req.header("if-modified-since"),
        };
        match conditional::evaluate(c, &etag, modified) {
            Precondition::Proceed => {}
            Precondition::NotModified => {
                res.status = 304;
                return res;
            }
            Precondition::Failed => {
                let mut e = Error::new(412).into_response();
                e.headers.extend(res.headers);
                return e;
            }
        }
    }

    let ctype = content_type(&type_path);
    if let Some(c) = coding {
        res.headers.push((
            Cow::Borrowed("content-encoding"),
            Cow::Borrowed(if c == Coding::Brotli { b"br" } else { b"gzip" }),
        ));
    }
    res.headers
        .push((Cow::Borrowed("accept-ranges"), Cow::Borrowed(b"bytes")));

    // Range applies to GET only (RFC 9110 §14.2), and only while If-Range holds.
    let ranges = match req.header("range") {
        Some(r) if method == Method::Get && res.status == 200 => {
            let if_range_ok = req
                .header("if-range")
                .is_none_or(|ir| conditional::if_range_holds(ir, &etag, last_modified.as_deref()));
            if if_range_ok {
                range::parse(r, len)
            } else {
                Ranges::Ignore
            }
        }
        _ => Ranges::Ignore,
    };
    match ranges {
        Ranges::Unsatisfiable => {
            let mut e = Error::new(416)
                .with_header(
                    "content-range",
                    Cow::Owned(format!("bytes */{len}").into_bytes()),
                )
                .into_response();
            e.headers.extend(res.headers);
            e
        }
        Ranges::Satisfiable(r) if r.len() == 1 => {
            let (a, b) = r[0];
            res.status = 206;
            push(
                &mut res,
                "content-range",
                format!("bytes {a}-{b}/{len}").into_bytes(),
            );
            res.headers.push((Cow::Borrowed("content-type"), ctype));
            body(res, file, a, b - a + 1, o.max_in_memory).await
        }
        Ranges::Satisfiable(r) => {
            multipart(res, file, &r, len, &ctype, &etag, o.max_in_memory).await
        }
        _ => {
            res.headers.push((Cow::Borrowed("content-type"), ctype));
            body(res, file, 0, len, o.max_in_memory).await
        }
    }
}

fn push(res: &mut Response, name: &'static str, value: Vec<u8>) {
    res.headers.push((Cow::Borrowed(name), Cow::Owned(value)));
}

/// Sets the body to `n` bytes of `file` from `offset`, always with `Content-Length`: read whole
/// up to `max_in_memory`; past it, a file body the engine sends with `sendfile(2)` on plain
/// TCP (read and written in bounded pieces on other transports), so a large file is never
/// held in memory, however slowly the client reads.
async fn body(
    mut res: Response,
    file: Opened,
    offset: u64,
    n: u64,
    max_in_memory: u64,
) -> Response {
    if n <= max_in_memory {
        match blocking(move || Ok(open::read_at(&file.file, offset, n)?)).await {
            Ok(data) => res.body = ResponseBody::Full(Bytes::from(data)),
            Err(miss) => return miss_response(miss),
        }
        return res;
    }
    res.body = ResponseBody::File {
        file: file.file,
        offset,
        len: n,
    };
    res
}
