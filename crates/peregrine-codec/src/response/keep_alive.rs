//! The keep-alive decision and the reason a connection closes ([`KeepAlive`], [`CloseReason`]).

use super::head::ConnectionLine;
use crate::Version;

/// The most of a request body the handler left unread that is read and discarded after the
/// response, so the exchange completes: over HTTP/1.1 the connection is kept, over HTTP/2 the
/// stream ends without a reset. A larger rest is not read: [`CloseReason::BodyUnread`] over
/// HTTP/1.1, `CANCEL` over HTTP/2. One number for both drivers (256 KiB).
///
/// ```
/// use peregrine_codec::response::UNREAD_BODY_DRAIN_MAX;
/// assert_eq!(UNREAD_BODY_DRAIN_MAX, 256 * 1024);
/// ```
pub const UNREAD_BODY_DRAIN_MAX: u64 = 256 * 1024;

/// Why a connection will close after the current response. The first reason found is kept
/// (see [`KeepAlive::disable`]); it is what logs and tests can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent `Connection: close`.
    ClientAsked,
    /// An HTTP/1.0 client that did not ask for `keep-alive`.
    Http10,
    /// The connection reached the configured number of requests.
    RequestLimit,
    /// The server is shutting down gracefully.
    ShuttingDown,
    /// The handler's own fields ask for `Connection: close`.
    ResponseAsked,
    /// The request body did not arrive intact (limit passed, malformed, timed out, cut short).
    BodyFailed,
    /// Too much of the request body is left unread to skip it, or the client waits for
    /// `100 Continue` and may never send it.
    BodyUnread,
    /// The response body is delimited by closing the connection (a stream to HTTP/1.0).
    CloseDelimited,
    /// The request was refused before the handler ran (an error status from the parser or a
    /// limit), or the handler failed (panic, invalid response).
    Error,
}

/// Whether the connection stays open after the current exchange, and if not, why: the one
/// home of the keep-alive decision (in the spirit of hyper's `proto::h1` state).
///
/// A connection is [`KeepAlive::Idle`] between requests and [`KeepAlive::Busy`] while
/// answering one; any step of the exchange that finds a reason to close calls
/// [`KeepAlive::disable`], after which the state stays [`KeepAlive::Disabled`].
///
/// ```
/// use peregrine_codec::response::{CloseReason, ConnectionLine, KeepAlive};
/// use peregrine_codec::Version;
///
/// let mut ka = KeepAlive::Idle;
/// ka.busy();
/// assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Default);
/// ka.disable(CloseReason::RequestLimit);
/// ka.disable(CloseReason::ShuttingDown); // the first reason stays
/// assert_eq!(ka.close_reason(), Some(CloseReason::RequestLimit));
/// assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Close);
/// ka.idle(); // a disabled connection does not go idle
/// assert!(!ka.is_open());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Between requests: open, nothing pending.
    Idle,
    /// Answering a request; the connection stays open afterwards unless disabled.
    Busy,
    /// The connection closes after the current response, for this reason.
    Disabled(CloseReason),
}

impl KeepAlive {
    /// The state for a request with this version and `Connection` directive: busy, or
    /// disabled when the client asked to close or is HTTP/1.0 without `keep-alive`
    /// (RFC 9112 §9.3).
    #[inline]
    pub fn for_request(version: Version, connection: crate::ConnectionDirective) -> KeepAlive {
        // The common case (HTTP/1.1, no `close`) in two tests; the rest out of line. Written
        // as one expression, the three outcomes were computed without branches, which cost
        // 13 instructions per request on the engine's hot path.
        if !connection.close && version != Version::Http10 {
            return KeepAlive::Busy;
        }
        Self::for_request_rare(version, connection)
    }

    /// [`KeepAlive::for_request`] for a client that asked to close or speaks HTTP/1.0.
    #[cold]
    #[inline(never)]
    fn for_request_rare(version: Version, connection: crate::ConnectionDirective) -> KeepAlive {
        if connection.close {
            KeepAlive::Disabled(CloseReason::ClientAsked)
        } else if version == Version::Http10 && !connection.keep_alive {
            KeepAlive::Disabled(CloseReason::Http10)
        } else {
            KeepAlive::Busy
        }
    }

    /// The connection will close after the current response, for `reason` (unless it was
    /// already going to, for an earlier reason, which is kept).
    #[inline]
    pub fn disable(&mut self, reason: CloseReason) {
        if !matches!(self, KeepAlive::Disabled(_)) {
            *self = KeepAlive::Disabled(reason);
        }
    }

    /// Starts answering a request (no effect once disabled).
    #[inline]
    pub fn busy(&mut self) {
        if *self == KeepAlive::Idle {
            *self = KeepAlive::Busy;
        }
    }

    /// The exchange is over and the connection stays open (no effect once disabled).
    #[inline]
    pub fn idle(&mut self) {
        if *self == KeepAlive::Busy {
            *self = KeepAlive::Idle;
        }
    }

    /// Whether the connection stays open after the current response.
    #[inline]
    pub fn is_open(self) -> bool {
        !matches!(self, KeepAlive::Disabled(_))
    }

    /// Why the connection will close, if it will.
    #[inline]
    pub fn close_reason(self) -> Option<CloseReason> {
        match self {
            KeepAlive::Disabled(r) => Some(r),
            _ => None,
        }
    }

    /// The `Connection` line the current response carries (RFC 9112 §9.3, §9.6): `close` when
    /// the connection will close; `keep-alive` for an HTTP/1.0 client that keeps it; none
    /// otherwise.
    #[inline]
    pub fn connection_line(self, version: Version) -> ConnectionLine {
        match (self.is_open(), version) {
            (false, _) => ConnectionLine::Close,
            (true, Version::Http10) => ConnectionLine::KeepAlive,
            (true, Version::Http11 | Version::Http2 | Version::Http3) => ConnectionLine::Default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::connection_header;

    #[test]
    fn keep_alive_records_the_first_close_reason() {
        use crate::ConnectionDirective;
        let d = |close, keep_alive| ConnectionDirective {
            close,
            keep_alive,
            upgrade: false,
        };
        assert_eq!(
            KeepAlive::for_request(Version::Http11, d(false, false)),
            KeepAlive::Busy
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http11, d(true, true)),
            KeepAlive::Disabled(CloseReason::ClientAsked)
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http10, d(false, false)),
            KeepAlive::Disabled(CloseReason::Http10)
        );
        assert_eq!(
            KeepAlive::for_request(Version::Http10, d(false, true)),
            KeepAlive::Busy
        );
        let reasons = [
            CloseReason::ClientAsked,
            CloseReason::Http10,
            CloseReason::RequestLimit,
            CloseReason::ShuttingDown,
            CloseReason::ResponseAsked,
            CloseReason::BodyFailed,
            CloseReason::BodyUnread,
            CloseReason::CloseDelimited,
            CloseReason::Error,
        ];
        for first in reasons {
            for second in reasons {
                let mut ka = KeepAlive::Busy;
                assert!(ka.is_open() && ka.close_reason().is_none());
                ka.disable(first);
                ka.disable(second);
                ka.idle();
                ka.busy();
                assert_eq!(ka, KeepAlive::Disabled(first));
                assert_eq!(ka.close_reason(), Some(first));
                for v in [Version::Http10, Version::Http11] {
                    assert_eq!(ka.connection_line(v), ConnectionLine::Close);
                }
            }
        }
        let mut ka = KeepAlive::Idle;
        ka.busy();
        assert_eq!(ka, KeepAlive::Busy);
        assert_eq!(
            ka.connection_line(Version::Http10),
            ConnectionLine::KeepAlive
        );
        assert_eq!(ka.connection_line(Version::Http11), ConnectionLine::Default);
        ka.idle();
        assert_eq!(ka, KeepAlive::Idle);
        // The codec's older helper agrees with the state.
        for open in [false, true] {
            for v in [Version::Http10, Version::Http11] {
                let ka = if open {
                    KeepAlive::Busy
                } else {
                    KeepAlive::Disabled(CloseReason::Error)
                };
                assert_eq!(
                    connection_header(v, open).unwrap_or(b""),
                    ka.connection_line(v).as_bytes()
                );
            }
        }
    }
}
