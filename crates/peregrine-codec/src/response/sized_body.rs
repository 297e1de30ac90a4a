//! A body of announced length ([`BodyKind::Sized`](super::BodyKind::Sized)) held to that length.

/// Holds a [`BodyKind::Sized`](super::BodyKind::Sized) body to its announced length: the sender reports each piece
/// before writing it and the end of the source after the last one. A source that yields more
/// or fewer bytes than announced would leave the client reading the next response from the
/// wrong place, so either is an error and the connection must close (never kept alive).
///
/// ```
/// use peregrine_codec::response::{SizedBody, SizedBodyError};
///
/// let mut body = SizedBody::new(5);
/// assert_eq!(body.piece(3), Ok(()));
/// assert_eq!(body.remaining(), 2);
/// assert_eq!(body.piece(3), Err(SizedBodyError::TooLong { announced: 5 }));
/// let mut short = SizedBody::new(5);
/// short.piece(4).unwrap();
/// assert_eq!(short.end(), Err(SizedBodyError::TooShort { announced: 5, sent: 4 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizedBody {
    announced: u64,
    sent: u64,
}

/// How a [`SizedBody`] source broke its announced length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizedBodyError {
    /// A piece would take the body past the announced length (nothing of it may be sent).
    TooLong {
        /// The announced length.
        announced: u64,
    },
    /// The source ended before the announced length.
    TooShort {
        /// The announced length.
        announced: u64,
        /// Bytes the source gave.
        sent: u64,
    },
}

impl std::fmt::Display for SizedBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizedBodyError::TooLong { announced } => {
                write!(f, "body longer than its announced {announced} bytes")
            }
            SizedBodyError::TooShort { announced, sent } => {
                write!(
                    f,
                    "body ended after {sent} of its announced {announced} bytes"
                )
            }
        }
    }
}

impl std::error::Error for SizedBodyError {}

impl SizedBody {
    /// A body announced as `len` bytes (`Content-Length: len`).
    pub fn new(len: u64) -> Self {
        SizedBody {
            announced: len,
            sent: 0,
        }
    }

    /// Bytes still owed.
    pub fn remaining(&self) -> u64 {
        self.announced - self.sent
    }

    /// Accounts a piece of `len` bytes about to be sent; refuses it whole if it would exceed
    /// the announced length.
    pub fn piece(&mut self, len: usize) -> Result<(), SizedBodyError> {
        let len = len as u64;
        if len > self.remaining() {
            return Err(SizedBodyError::TooLong {
                announced: self.announced,
            });
        }
        self.sent += len;
        Ok(())
    }

    /// The source ended: fine only if every announced byte was given.
    pub fn end(&self) -> Result<(), SizedBodyError> {
        if self.sent == self.announced {
            Ok(())
        } else {
            Err(SizedBodyError::TooShort {
                announced: self.announced,
                sent: self.sent,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_body_accepts_exactly_its_length() {
        let mut b = SizedBody::new(10);
        assert_eq!(
            b.end(),
            Err(SizedBodyError::TooShort {
                announced: 10,
                sent: 0
            })
        );
        b.piece(0).unwrap();
        b.piece(4).unwrap();
        b.piece(6).unwrap();
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.end(), Ok(()));
        // One byte more is refused, and the refused piece is not counted.
        assert_eq!(b.piece(1), Err(SizedBodyError::TooLong { announced: 10 }));
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.end(), Ok(()));
        // A piece crossing the end is refused whole.
        let mut b = SizedBody::new(10);
        b.piece(8).unwrap();
        assert!(b.piece(3).is_err());
        assert_eq!(b.remaining(), 2);
        assert_eq!(
            b.end(),
            Err(SizedBodyError::TooShort {
                announced: 10,
                sent: 8
            })
        );
        // An empty body is complete at once.
        assert_eq!(SizedBody::new(0).end(), Ok(()));
        assert!(SizedBody::new(0).piece(1).is_err());
        assert!(b
            .end()
            .unwrap_err()
            .to_string()
            .contains("8 of its announced 10"));
    }
}
