//! # peregrine-codec
//!
//! A strict HTTP/1.1 codec with no I/O: pure functions and small state machines over byte slices,
//! in the spirit of h11 and picohttpparser. Nothing here touches a socket or a runtime, so every
//! piece can be unit-tested, fuzzed and benchmarked alone.
//!
//! The rules it enforces are those of the repository's `docs/http1-rules.md` (RFC 9112 / RFC 9110),
//! sections A–F. Every rejection carries the HTTP status a server should answer with.
//!
//! * [`parse_request_head`]: zero-copy request-head parser. Results are [`Span`]s (offsets) into the
//!   input, so a caller may keep the bytes in a refcounted buffer and the parsed head beside them.
//! * [`BodyFraming`]: how the body of a parsed request is delimited.
//! * [`ChunkedDecoder`]: incremental decoder for `Transfer-Encoding: chunked`.
//! * [`response`]: the response side: status lines, header fields, framing (HEAD, 1xx, 204,
//!   304), the chunked encoder, and the keep-alive decision with its close reason
//!   ([`response::KeepAlive`]).
//! * [`grammar`]: the RFC byte classes (`tchar`, field-value bytes...) shared by the parser, the
//!   encoder, the engine and the framework.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod chunked;
pub mod error;
mod fast;
pub mod grammar;
mod head;
pub mod limits;
mod parse;
pub mod request;
pub mod response;
mod scan;

pub use chunked::{ChunkedDecoder, ChunkedStep};
pub use error::ParseError;
pub use limits::Limits;
pub use request::{
    parse_request_head, parse_request_head_into, BodyFraming, ConnectionDirective, Expectation,
    FieldSpan, Method, Parsed, RequestHead, Span, Version,
};
#[doc(hidden)]
pub use request::{parse_request_head_general_with, parse_request_head_with, Isa};
