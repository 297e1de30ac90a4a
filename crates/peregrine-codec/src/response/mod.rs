//! The response side of the wire format: status lines and reason phrases (one table), header
//! fields checked as they are written, the framing a response gets (RFC 9112 §6, including
//! HEAD, 1xx, 204 and 304), the chunked encoder, and the `Connection` decision with the reason a
//! connection will close ([`KeepAlive`]). Pure functions over byte buffers, like the request
//! side: the engine calls them, and they are unit-tested here without a socket.
//!
//! API CONTRACT (fixed; the engine is written against it).
//!
//! ```
//! use peregrine_codec::response::{self, DateCache};
//!
//! let mut out = Vec::with_capacity(128);
//! out.extend_from_slice(response::status_line(200));
//! DateCache::write_date_header(&mut out);
//! response::write_content_length(&mut out, 13);
//! out.extend_from_slice(response::CONNECTION_CLOSE);
//! out.extend_from_slice(b"\r\nHello, World!");
//! assert!(out.starts_with(b"HTTP/1.1 200 OK\r\nDate: "));
//! ```
//!
//! One job per module: `status` (status lines, reason phrases, which statuses a handler may
//! send), `fields` (field checks), `framing` (how a body is delimited), `sized_body` (a body held
//! to its announced length), `head` (the lines that end a head), `keep_alive` (the `Connection`
//! decision), `chunked_encoder`, `date` (the cached `Date` line). Everything is re-exported
//! here: the paths are `peregrine_codec::response::*`.

mod chunked_encoder;
mod date;
mod fields;
mod framing;
mod head;
mod keep_alive;
mod sized_body;
mod status;

pub use chunked_encoder::{ChunkedEncoder, LAST_CHUNK};
pub use date::DateCache;
pub use fields::{
    asks_close, check_field, is_engine_owned, is_server_field, write_field, FieldError,
};
pub use framing::{sends_body, write_content_length, BodyKind, Framing, TRANSFER_ENCODING_CHUNKED};
pub use head::{
    connection_header, finish_head, ConnectionLine, CONNECTION_CLOSE, CONNECTION_KEEP_ALIVE,
    CONTINUE_100,
};
pub use keep_alive::{CloseReason, KeepAlive, UNREAD_BODY_DRAIN_MAX};
pub use sized_body::{SizedBody, SizedBodyError};
pub use status::{
    is_final_status, reason_phrase, status_forbids_body, status_line, wire_status,
    INVALID_RESPONSE_REASON,
};
