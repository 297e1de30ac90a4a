//! Response-head encoding: status lines from a static table, cached `Date`, `Content-Length`
//! without allocation.
//!
//! API CONTRACT (fixed; the engine is written against it).

/// The status line `HTTP/1.1 <code> <reason>\r\n` for `code`, from a static table (unknown codes
/// get a generic reason for their class).
pub fn status_line(code: u16) -> &'static [u8] {
    let _ = code;
    todo!("implemented by the codec issue")
}

/// The canonical reason phrase for `code` (`"OK"`, `"Not Found"`...).
pub fn reason_phrase(code: u16) -> &'static str {
    let _ = code;
    todo!("implemented by the codec issue")
}

/// Whether a response with this status must not carry a body (1xx, 204, 304).
pub fn status_forbids_body(code: u16) -> bool {
    (100..200).contains(&code) || code == 204 || code == 304
}

/// Appends `Content-Length: <n>\r\n` to `out` without allocating a temporary string.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    let _ = (out, n);
    todo!("implemented by the codec issue")
}

/// A per-thread cache of the `Date: <IMF-fixdate>\r\n` header line, refreshed at most once a
/// second: [`DateCache::header_line`] never returns a value more than one second stale.
#[derive(Debug)]
pub struct DateCache {
    _private: (),
}

impl DateCache {
    /// Appends the current `Date: ...\r\n` line to `out`.
    pub fn write_date_header(out: &mut Vec<u8>) {
        let _ = out;
        todo!("implemented by the codec issue")
    }
}
