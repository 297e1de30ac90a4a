//! Incremental decoder for `Transfer-Encoding: chunked` (RFC 9112 §7.1).
//!
//! API CONTRACT (fixed; the engine is written against it).

use crate::{Limits, ParseError};

/// One step of chunked decoding over the bytes given to [`ChunkedDecoder::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkedStep {
    /// `consumed` bytes of framing were used and more input is needed to progress.
    NeedMore {
        /// Bytes of the input used (framing only).
        consumed: usize,
    },
    /// Body data: `input[data_start..data_start + data_len]` is body, and the caller should drop
    /// `consumed` bytes (framing before it plus the data) from the front of its input.
    Data {
        /// Bytes of input consumed, including this data.
        consumed: usize,
        /// Offset of the data in the input.
        data_start: usize,
        /// Length of the data.
        data_len: usize,
    },
    /// The last chunk and trailer section ended; `consumed` bytes used. What follows is the next
    /// request.
    Done {
        /// Bytes of input consumed.
        consumed: usize,
    },
}

/// State machine that decodes a chunked body piece by piece, without copying body bytes.
#[derive(Debug, Clone, Default)]
pub struct ChunkedDecoder {
    _private: (),
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes as far as possible in `input` (the unconsumed bytes received so far). Call in a
    /// loop, dropping `consumed` bytes each time, until `NeedMore` (read more) or `Done`.
    pub fn decode(&mut self, input: &[u8], limits: &Limits) -> Result<ChunkedStep, ParseError> {
        let _ = (input, limits);
        todo!("implemented by the codec issue")
    }

    /// `true` once the terminating chunk and trailers were decoded.
    pub fn is_done(&self) -> bool {
        todo!("implemented by the codec issue")
    }
}
