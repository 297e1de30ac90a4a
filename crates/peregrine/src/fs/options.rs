//! What applies to every file served, by [`ServeDir`](super::ServeDir) and
//! [`ServeFile`](super::ServeFile) alike: which precompressed siblings to look for, the
//! `Cache-Control` policy, and the size past which a body is sent from the file instead of
//! being read into memory. The builders of both types write these options; the response
//! building reads them.

use std::borrow::Cow;

/// Default for [`ServeDir::max_in_memory`](super::ServeDir::max_in_memory) (64 KiB): bodies up
/// to this size are read into memory whole; larger ones are sent from the open file
/// (`sendfile(2)` on plain TCP), both with `Content-Length`. Small, because it is memory each
/// request holds until a (possibly slow) client has read it.
///
/// ```
/// assert_eq!(peregrine::fs::DEFAULT_MAX_IN_MEMORY, 64 * 1024);
/// ```
pub const DEFAULT_MAX_IN_MEMORY: u64 = 64 * 1024;

/// What applies to every file served (by [`ServeDir`](super::ServeDir) or
/// [`ServeFile`](super::ServeFile)).
#[derive(Debug, Clone)]
pub(super) struct FileOptions {
    pub(super) precompressed_br: bool,
    pub(super) precompressed_gzip: bool,
    pub(super) cache_control: Option<Cow<'static, [u8]>>,
    pub(super) immutable_hashed: bool,
    pub(super) max_in_memory: u64,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            precompressed_br: false,
            precompressed_gzip: false,
            cache_control: None,
            immutable_hashed: false,
            max_in_memory: DEFAULT_MAX_IN_MEMORY,
        }
    }
}

/// A `Cache-Control` value given to a builder, as header bytes; panics on a control character
/// (the builders document it).
pub(super) fn checked_value(value: &str) -> Cow<'static, [u8]> {
    assert!(
        !value.bytes().any(|b| b.is_ascii_control() && b != b'\t'),
        "header value {value:?} contains a control character"
    );
    Cow::Owned(value.as_bytes().to_vec())
}
