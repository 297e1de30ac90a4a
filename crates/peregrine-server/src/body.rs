//! Incoming request bodies, streamed from the connection with backpressure.

use bytes::Bytes;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Body larger than the limit → answer 413.
    TooLarge,
    /// No body bytes within the body timeout → the engine answers 408.
    Timeout,
    /// The client closed or reset the connection before the body was complete.
    Incomplete,
    /// Invalid chunked framing → 400. The reason is safe to show.
    Invalid(&'static str),
}

impl BodyError {
    /// The status a server answers with for this error.
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooLarge => 413,
            BodyError::Timeout => 408,
            BodyError::Incomplete | BodyError::Invalid(_) => 400,
        }
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge => f.write_str("request body too large"),
            BodyError::Timeout => f.write_str("timed out reading request body"),
            BodyError::Incomplete => f.write_str("request body incomplete"),
            BodyError::Invalid(r) => write!(f, "invalid request body: {r}"),
        }
    }
}

impl std::error::Error for BodyError {}

/// A request body. Reading pulls bytes from the connection on demand (and sends
/// `100 Continue` first if the client asked for it); what the handler does not read is drained
/// or the connection closed by the engine afterwards, so the connection never desynchronises.
pub struct Body {
    _private: (),
}

impl Body {
    /// An empty body.
    pub fn empty() -> Self {
        Body { _private: () }
    }
    /// Next piece of the body, `None` at the end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        todo!()
    }
    /// The whole body, failing with [`BodyError::TooLarge`] past `limit` bytes (checked against
    /// Content-Length before reading anything).
    pub async fn to_bytes(&mut self, limit: usize) -> Result<Bytes, BodyError> {
        let _ = limit;
        todo!()
    }
}
