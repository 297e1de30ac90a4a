//! Precompressed siblings (`name.br`, `name.gz`): which codings the client accepts among the
//! enabled ones, best first, and the first sibling of those that exists under the root.

use super::open::{self, Opened, Policy};
use super::options::FileOptions;
use crate::middleware::compression::{negotiate, Coding};
use crate::request::Request;
use std::path::Path;

/// Precompressed siblings worth looking for, best first: `(coding, suffix)`.
pub(super) type Wanted = [Option<(Coding, &'static str)>; 2];

pub(super) fn wanted_codings(req: &Request, o: &FileOptions) -> Wanted {
    if !(o.precompressed_br || o.precompressed_gzip) {
        return [None, None];
    }
    let Some(accept) = req.header_bytes("accept-encoding") else {
        return [None, None];
    };
    let suffix = |c: Coding| {
        (
            c,
            match c {
                Coding::Brotli => ".br",
                Coding::Gzip => ".gz",
            },
        )
    };
    let first = negotiate(accept, o.precompressed_gzip, o.precompressed_br);
    // The other enabled coding, if also acceptable, in case the first has no sibling.
    let second = match first {
        Some(Coding::Brotli) => negotiate(accept, o.precompressed_gzip, false),
        Some(Coding::Gzip) => negotiate(accept, false, o.precompressed_br),
        None => None,
    };
    [first.map(suffix), second.map(suffix)]
}

pub(super) fn pick_sibling(
    root: &Path,
    path: &Path,
    wants: Wanted,
    policy: Policy,
) -> Option<(Coding, Opened)> {
    wants
        .into_iter()
        .flatten()
        .find_map(|(c, suffix)| open::open_sibling(root, path, suffix, policy).map(|o| (c, o)))
}
