//! Where small response bodies are made: a buffer per worker thread that bodies are cut from, so
//! a [`Json`](super::Json) answer, a `String` with spare capacity or a problem document costs
//! no allocation of its own.
//!
//! Each body is written at the end of the worker's chunk and split off as a [`Bytes`] that
//! shares the chunk (one reference count). When the chunk runs short, it is reused from its
//! start if every body cut from it is gone (the usual case: the engine copies a small body into
//! the connection's write buffer and drops it), and replaced by a fresh chunk if not; the old one
//! is freed with its last body.
//!
//! Measured with callgrind on the scenarios app's `GET /users/42`, 16 pipelined: an exactly-sized
//! copy per JSON answer (`Bytes::copy_from_slice` out of a scratch `Vec`) cost a `malloc` and a
//! `free`, about 200 instructions per request; cutting it from the chunk (two uncontended atomic
//! operations on the chunk's count) took 120 off the request. A `String` or `Vec<u8>` whose capacity exceeds its length becomes a
//! `Bytes` through a second allocation (`bytes` keeps the capacity in a box of its own): a small
//! one is copied here instead. See `docs/performance.md`, "Framework cost".
//!
//! Memory: a body kept alive keeps its chunk, at most [`CHUNK`] bytes, alive with it. A client
//! cannot make the server keep one: HTTP/1.1 copies bodies of up to 16 KiB into the connection's
//! output at once, and HTTP/2 and HTTP/3 send a copy of a small body that shares its allocation
//! (the engine's `detach_small`), as h2 and h3 hold what they are given until the client's
//! window opens. A handler that keeps a body (a cache) keeps its chunk. A JSON body larger than
//! [`KEEP`] is given its chunk for itself, so one huge answer does not stay with the worker.

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use std::cell::RefCell;

/// Size of a chunk answers are cut from.
const CHUNK: usize = 8 * 1024;
/// Room left below which a new chunk is taken (or the old one reused) before serialising:
/// most answers fit in it without growing the chunk mid-write. Also the largest owned body
/// copied into the chunk (a larger one keeps its own allocation).
const ROOM: usize = 1024;
/// An answer larger than this leaves the worker with a new, empty chunk.
const KEEP: usize = 64 * 1024;

thread_local! {
    static CHUNKS: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// Runs `write` on the worker's chunk, emptied and with room for a typical body; `None` when the
/// chunk is in use already (re-entered from inside a `Serialize` impl).
#[inline]
fn with_chunk<R>(write: impl FnOnce(&mut BytesMut) -> R) -> Option<R> {
    CHUNKS.with(|cell| {
        let mut buf = cell.try_borrow_mut().ok()?;
        // Empty after every split; not after a `Serialize` impl that panicked halfway (the
        // worker goes on): what it wrote must not start the next body.
        buf.clear();
        if buf.capacity() < ROOM {
            // Reclaims the chunk when no body cut from it is alive, else allocates one.
            buf.reserve(CHUNK);
        }
        Some(write(&mut buf))
    })
}

/// `body` as [`Bytes`] without a second allocation: as it is when it has no spare capacity or
/// is large, else copied into the worker's chunk (and its own buffer freed).
#[inline]
pub(crate) fn owned(body: Vec<u8>) -> Bytes {
    if body.len() == body.capacity() || body.len() > ROOM {
        return Bytes::from(body);
    }
    with_chunk(|buf| {
        buf.extend_from_slice(&body);
        buf.split().freeze()
    })
    .unwrap_or_else(|| Bytes::from(body))
}

/// Serialises `value` as JSON into the worker's chunk and returns it as its own [`Bytes`].
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Bytes> {
    let cut = with_chunk(|buf| match serde_json::to_writer(Writer(buf), value) {
        Ok(()) => {
            let body = buf.split().freeze();
            if body.len() > KEEP {
                *buf = BytesMut::new();
            }
            Ok(body)
        }
        Err(e) => {
            // A `Serialize` impl failed halfway: drop what it wrote.
            buf.clear();
            Err(e)
        }
    });
    cut.unwrap_or_else(|| {
        // Re-entered from inside a `Serialize` impl: a buffer of its own.
        let mut buf = BytesMut::with_capacity(128);
        serde_json::to_writer(Writer(&mut buf), value).map(|()| buf.freeze())
    })
}

/// `io::Write` over a `BytesMut`.
struct Writer<'a>(&'a mut BytesMut);

impl std::io::Write for Writer<'_> {
    #[inline]
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    #[inline]
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(b);
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::ser::{Error as _, Serializer};

    /// Room left in the worker's chunk.
    fn room() -> usize {
        CHUNKS.with(|c| c.borrow().capacity())
    }

    #[test]
    fn answers_are_cut_from_one_chunk_and_it_is_reused_once_they_are_gone() {
        let a = json(&serde_json::json!({"id": 1})).unwrap();
        let b = json(&serde_json::json!({"id": 2})).unwrap();
        assert_eq!(&a[..], br#"{"id":1}"#);
        assert_eq!(&b[..], br#"{"id":2}"#);
        // Adjacent in one chunk: no allocation of their own.
        assert_eq!(a.as_ptr() as usize + a.len(), b.as_ptr() as usize);
        let start = a.as_ptr() as usize;
        drop((a, b));
        // Fill the chunk so the next answer needs room: it is taken from the chunk's start.
        let filler = "x".repeat(CHUNK - ROOM);
        drop(json(&filler).unwrap());
        let c = json(&7u32).unwrap();
        assert_eq!(&c[..], b"7");
        assert_eq!(
            c.as_ptr() as usize,
            start,
            "the chunk was reused from its start"
        );
    }

    #[test]
    fn an_answer_still_alive_is_never_overwritten() {
        let kept = json(&"kept").unwrap();
        for i in 0..(4 * CHUNK / 8) {
            let other = json(&i).unwrap();
            assert_eq!(other, i.to_string().as_bytes());
        }
        assert_eq!(&kept[..], br#""kept""#);
    }

    #[test]
    fn a_huge_answer_does_not_stay_with_the_worker() {
        let big = json(&"y".repeat(KEEP * 2)).unwrap();
        assert_eq!(big.len(), KEEP * 2 + 2);
        assert_eq!(room(), 0, "the worker let go of the huge answer's chunk");
        drop(big);
        let small = json(&1u8).unwrap();
        assert_eq!(&small[..], b"1");
    }

    #[test]
    fn owned_bodies_with_spare_capacity_are_cut_from_the_chunk() {
        let spare = |text: &[u8]| {
            let mut v = Vec::with_capacity(64);
            v.extend_from_slice(text);
            v
        };
        let a = owned(spare(b"hello"));
        let b = owned(spare(b"world"));
        let c = json(&1u8).unwrap();
        assert_eq!(
            (&a[..], &b[..], &c[..]),
            (&b"hello"[..], &b"world"[..], &b"1"[..])
        );
        // Copied into the chunk one after the other, JSON bodies too.
        assert_eq!(a.as_ptr() as usize + a.len(), b.as_ptr() as usize);
        assert_eq!(b.as_ptr() as usize + b.len(), c.as_ptr() as usize);

        let exact = b"abc".to_vec();
        assert_eq!(exact.len(), exact.capacity());
        let at = exact.as_ptr();
        assert_eq!(
            owned(exact).as_ptr(),
            at,
            "no spare capacity: the body keeps its allocation"
        );
        let mut large = Vec::with_capacity(ROOM * 4);
        large.resize(ROOM + 1, b'z');
        let at = large.as_ptr();
        assert_eq!(
            owned(large).as_ptr(),
            at,
            "a large body keeps its allocation"
        );
    }

    struct Fails;
    impl Serialize for Fails {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut seq = s.serialize_seq(None)?;
            seq.serialize_element("written before the failure")?;
            Err(S::Error::custom("no"))
        }
    }

    #[test]
    fn a_failed_serialisation_leaves_nothing_behind() {
        assert!(json(&Fails).is_err());
        let next = json(&[1, 2]).unwrap();
        assert_eq!(&next[..], b"[1,2]");
    }

    struct Panics;
    impl Serialize for Panics {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut seq = s.serialize_seq(None)?;
            seq.serialize_element("written before the panic")?;
            panic!("a Serialize impl panicked");
        }
    }

    #[test]
    fn a_serialisation_that_panicked_leaves_nothing_behind() {
        let caught = std::panic::catch_unwind(|| json(&Panics));
        assert!(caught.is_err());
        let next = json(&[1, 2]).unwrap();
        assert_eq!(&next[..], b"[1,2]");
    }

    /// Serialises another value from inside its own `Serialize`.
    struct Nested;
    impl Serialize for Nested {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let inner = json(&"inner").map_err(S::Error::custom)?;
            s.serialize_str(std::str::from_utf8(&inner).unwrap())
        }
    }

    #[test]
    fn serialising_from_inside_a_serialisation_works() {
        let outer = json(&Nested).unwrap();
        assert_eq!(&outer[..], br#""\"inner\"""#);
    }
}
