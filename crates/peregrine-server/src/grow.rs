//! Growing a connection's read buffer without aborting the process when memory is refused:
//! `BytesMut::reserve` calls `handle_alloc_error` (an abort of every worker and every
//! connection) when the allocator says no; here the refusal is an error for the one connection
//! that needed the room: the driver closes it (a head) or fails its body read (413). The room
//! is asked for in the same amounts as `reserve` would (the length plus `additional`, at least
//! double the capacity).

use bytes::BytesMut;
use std::io;

/// Makes room for `additional` more bytes in `buf`: in place when the buffer's own allocation
/// has it (moving the data back to its start), else in a new allocation asked for with
/// `try_reserve`; `OutOfMemory` if refused (`buf` is unchanged then).
pub(crate) fn try_reserve(buf: &mut BytesMut, additional: usize) -> io::Result<()> {
    if buf.try_reclaim(additional) {
        return Ok(());
    }
    let want = buf
        .len()
        .checked_add(additional)
        .ok_or_else(refused)?
        .max(buf.capacity().saturating_mul(2));
    let mut grown = try_with_capacity(want)?;
    grown.extend_from_slice(buf);
    *buf = grown;
    Ok(())
}

/// An empty buffer of `capacity` bytes, or `OutOfMemory` if the allocator refuses it.
pub(crate) fn try_with_capacity(capacity: usize) -> io::Result<BytesMut> {
    let mut v = Vec::new();
    if refuse_injected() || v.try_reserve_exact(capacity).is_err() {
        tracing::warn!(
            bytes = capacity,
            "read buffer allocation refused; this connection's request fails"
        );
        return Err(refused());
    }
    // Through `Bytes` (there is no `From<Vec<u8>>`): the allocation is taken over, capacity
    // included, without a copy.
    Ok(BytesMut::from(bytes::Bytes::from(v)))
}

fn refused() -> io::Error {
    io::Error::from(io::ErrorKind::OutOfMemory)
}

/// Growths still to refuse (set by tests through `server::fault::refuse_read_buffer_growth`).
#[cfg(feature = "fault-injection")]
pub(crate) static REFUSE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "fault-injection")]
fn refuse_injected() -> bool {
    use std::sync::atomic::Ordering;
    REFUSE
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn refuse_injected() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    #[test]
    fn grows_like_reserve_and_keeps_the_data() {
        let mut b = BytesMut::with_capacity(8);
        b.extend_from_slice(b"abcdefgh");
        try_reserve(&mut b, 4).unwrap();
        assert_eq!(&b[..], b"abcdefgh");
        assert!(b.capacity() >= 16, "doubled: {}", b.capacity());
        // Room at the front after a consumed prefix is reused without a new allocation.
        let before = b.capacity();
        b.advance(6);
        try_reserve(&mut b, before - 4).unwrap();
        assert_eq!(&b[..], b"gh");
        // An impossible size is refused, not an abort.
        let err = try_reserve(&mut b, usize::MAX).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
        assert_eq!(&b[..], b"gh");
    }
}
