//! The request handlers receive, with typed accessors. The [`Request`] type and its
//! construction are in `parts`; its accessors are grouped by job in the submodules: the
//! request line and connection (`line`), routing results and URL values (`params`), header
//! fields and cookies (`headers`), middleware rewrites (`rewrite`), state and extensions
//! (`extensions`), and the body (`body`, with the content-type checks in `media_type` and the
//! problem answers for body errors in `body_error`).

mod body;
mod body_error;
pub(crate) mod context;
mod extensions;
mod headers;
mod line;
mod media_type;
mod params;
mod parts;
mod rewrite;

pub(crate) use body_error::body_error;
// Outside `headers`, only the fuzz checks use it.
#[cfg(all(feature = "static-files", feature = "brotli"))]
pub(crate) use headers::find_cookie;
pub use parts::Request;
pub(crate) use parts::{BAD_PATH, NO_ROUTE, PRE_ROUTING};
