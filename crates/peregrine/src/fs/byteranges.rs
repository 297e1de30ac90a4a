//! A `multipart/byteranges` body (RFC 9110 §14.6) for a request with several satisfiable
//! ranges: one part per range with its own `Content-Type` and `Content-Range`, separated by a
//! random boundary. Up to `max_in_memory` in total it is read into one buffer; past it, it is
//! streamed part by part (the file read in [`PIECE`]-sized `pread`s on the blocking pool), so
//! no answer holds more than one piece of the file, whatever the ranges add up to.

use super::open::{self, blocking, miss_response, Opened};
use super::range::{self, ByteRange};
use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::{Response, ResponseBody};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;

/// Bytes of the file read at a time for a streamed multipart body: what one slow client can
/// make the server hold.
pub(super) const PIECE: u64 = 64 * 1024;

/// A `multipart/byteranges` body (RFC 9110 §14.6) for several ranges, with `Content-Length`.
pub(super) async fn multipart(
    mut res: Response,
    file: Opened,
    ranges: &[ByteRange],
    len: u64,
    ctype: &[u8],
    etag: &str,
    max_in_memory: u64,
) -> Response {
    let boundary = boundary(etag);
    let mut pieces = VecDeque::with_capacity(2 * ranges.len() + 1);
    for &(a, b) in ranges {
        let mut h = format!("\r\n--{boundary}\r\nContent-Type: ").into_bytes();
        h.extend_from_slice(ctype);
        h.extend_from_slice(format!("\r\nContent-Range: bytes {a}-{b}/{len}\r\n\r\n").as_bytes());
        pieces.push_back(Piece::Head(Bytes::from(h)));
        pieces.push_back(Piece::File {
            offset: a,
            len: b - a + 1,
        });
    }
    pieces.push_back(Piece::Head(Bytes::from(
        format!("\r\n--{boundary}--\r\n").into_bytes(),
    )));
    res.status = 206;
    res.headers.push((
        Cow::Borrowed("content-type"),
        Cow::Owned(format!("multipart/byteranges; boundary={boundary}").into_bytes()),
    ));
    let total: u64 = pieces.iter().map(Piece::len).sum();
    if range::total(ranges) <= max_in_memory {
        let built = blocking(move || {
            let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
            for p in &pieces {
                match p {
                    Piece::Head(h) => out.extend_from_slice(h),
                    Piece::File { offset, len } => {
                        out.extend_from_slice(&open::read_at(&file.file, *offset, *len)?)
                    }
                }
            }
            Ok(out)
        })
        .await;
        return match built {
            Ok(out) => {
                res.body = ResponseBody::Full(Bytes::from(out));
                res
            }
            Err(miss) => miss_response(miss),
        };
    }
    res.body = ResponseBody::SizedStream {
        len: total,
        stream: Box::pin(Parts {
            file: Arc::new(file.file),
            pieces,
            reading: None,
        }),
    };
    res
}

/// One piece of a multipart body: a part's head (or the closing delimiter), or a range of the
/// file still to be read.
enum Piece {
    Head(Bytes),
    File { offset: u64, len: u64 },
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Head(h) => h.len() as u64,
            Piece::File { len, .. } => *len,
        }
    }
}

/// The streamed multipart body: heads as they are, file ranges in reads of at most [`PIECE`]
/// bytes, one read in flight at a time. The engine polls for the next piece only once the
/// previous one is written (or buffered up to its output bound), so a client that reads slowly
/// holds one piece.
struct Parts {
    file: Arc<File>,
    pieces: VecDeque<Piece>,
    reading: Option<JoinHandle<io::Result<Vec<u8>>>>,
}

impl Stream for Parts {
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(read) = &mut this.reading {
            let done = match Pin::new(read).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(done) => done,
            };
            this.reading = None;
            return Poll::Ready(Some(match done {
                Ok(Ok(data)) => Ok(Bytes::from(data)),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(io::Error::other(e)),
            }));
        }
        match this.pieces.pop_front() {
            None => Poll::Ready(None),
            Some(Piece::Head(h)) => Poll::Ready(Some(Ok(h))),
            Some(Piece::File { offset, len }) => {
                let n = len.min(PIECE);
                if len > n {
                    this.pieces.push_front(Piece::File {
                        offset: offset + n,
                        len: len - n,
                    });
                }
                let file = this.file.clone();
                this.reading = Some(tokio::task::spawn_blocking(move || {
                    open::read_at(&file, offset, n)
                }));
                // Poll the read once now, so its completion wakes this task.
                Pin::new(this).poll_next(cx)
            }
        }
    }
}

/// A boundary unlikely to occur in the file: 64 random bits (std's per-process random keys).
fn boundary(etag: &str) -> String {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(etag);
    format!("peregrine-{r:016x}")
}
