//! An incoming request: the parsed head kept beside its bytes (zero-copy), the body, the peer.

use crate::Body;
use peregrine_codec::{Method, Version};
use std::net::SocketAddr;

/// A request as handed to a [`crate::Service`]. The head is parsed and validated already; the
/// body is read on demand through [`Request::body_mut`].
pub struct Request {
    _private: (),
}

impl Request {
    /// Method as sent (`"GET"`).
    pub fn method(&self) -> &str {
        todo!()
    }
    /// Method, recognised.
    pub fn method_kind(&self) -> Method {
        todo!()
    }
    /// The whole request-target as sent.
    pub fn target(&self) -> &str {
        todo!()
    }
    /// Path part of the target, still percent-encoded (validated ASCII).
    pub fn path(&self) -> &str {
        todo!()
    }
    /// Query string without `?`, still percent-encoded, if any.
    pub fn query(&self) -> Option<&str> {
        todo!()
    }
    /// Protocol version.
    pub fn version(&self) -> Version {
        todo!()
    }
    /// First value of header `name` (ASCII case-insensitive), byte-exact.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let _ = name;
        todo!()
    }
    /// All header fields in order received: (name as sent, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        std::iter::empty()
    }
    /// Effective authority (absolute-form target, else Host), if any.
    pub fn authority(&self) -> Option<&str> {
        todo!()
    }
    /// Remote address of the connection.
    pub fn peer_addr(&self) -> SocketAddr {
        todo!()
    }
    /// Declared body length (`Content-Length`), `None` for chunked; `Some(0)` without body.
    pub fn content_length(&self) -> Option<u64> {
        todo!()
    }
    /// The body, to read from.
    pub fn body_mut(&mut self) -> &mut Body {
        todo!()
    }
    /// Takes the body out, leaving an empty one.
    pub fn take_body(&mut self) -> Body {
        todo!()
    }
}
