//! A response body on an HTTP/2 stream, as DATA frames within the windows the client grants:
//! in memory, streamed by the handler, or read from a file piece by piece.
//!
//! Every wait for send capacity is a wait for the client (its stream or connection window is
//! used up, or the socket does not take what h2 queued), bounded like an HTTP/1.1 write: each
//! wait by `write_timeout`, all waits of an episode by `write_rate_grace + sent /
//! write_min_rate`. A stream past that is reset (`CANCEL`) and its buffered data dropped; if no
//! stream of the connection moved meanwhile and every other stream waits for the client too,
//! the whole connection is stalled and the driver closes it.

use super::limits::{Held, Pace, Watch};
use bytes::Bytes;
use futures_core::Stream;
use h2::SendStream;
use std::fs::File;
use std::future::poll_fn;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::Poll;
use tokio::time::Instant;

/// Why a response could not be sent completely.
pub(crate) enum SendError {
    /// The client reset the stream (or the connection went away).
    Reset,
    /// The handler's streamed body failed, or did not match its length: the stream was reset
    /// with `INTERNAL_ERROR`.
    Body,
    /// The client took nothing for longer than the write rules allow: the stream was reset
    /// with `CANCEL`.
    Stalled,
}

/// File bytes read per DATA piece, at most: a file body holds no more than this (and what h2
/// queued) in memory, whatever its size.
const FILE_CHUNK: usize = 64 * 1024;

/// One stream's sending half with its account of waits.
pub(super) struct Sender<'a> {
    stream: SendStream<Bytes>,
    watch: &'a Watch,
    pace: Pace,
    /// Whether the body's end ends the stream (`false`: trailers follow it).
    ends: bool,
}

impl<'a> Sender<'a> {
    pub(super) fn new(stream: SendStream<Bytes>, watch: &'a Watch) -> Self {
        Sender {
            stream,
            watch,
            pace: Pace::default(),
            ends: true,
        }
    }

    /// Keeps the stream open after the body, for the trailers ([`Sender::trailers`]).
    pub(super) fn keep_open(&mut self) {
        self.ends = false;
    }

    /// Sends the trailers as the last HEADERS frame (with `END_STREAM`), once they are known;
    /// a client's reset meanwhile ends the wait. A trailers future that panicked resets the
    /// stream (`INTERNAL_ERROR`): the response must not look complete.
    pub(super) async fn trailers(
        &mut self,
        pending: crate::trailers::PendingTrailers,
    ) -> Result<(), SendError> {
        let stream = &mut self.stream;
        let trailers = tokio::select! {
            t = pending.resolve() => t,
            _ = poll_fn(|cx| stream.poll_reset(cx)) => return Err(SendError::Reset),
        };
        let Some(trailers) = trailers else {
            self.stream.send_reset(h2::Reason::INTERNAL_ERROR);
            return Err(SendError::Body);
        };
        self.stream
            .send_trailers(trailers.to_header_map())
            .map_err(|_| SendError::Reset)
    }

    /// Send capacity for up to `want` bytes (at least 1), waiting for the client within the
    /// write rules.
    async fn capacity(&mut self, want: usize) -> Result<usize, SendError> {
        self.stream.reserve_capacity(want);
        loop {
            // Polled once without a timer first: a timer is armed only when the client holds
            // the stream up.
            let stream = &mut self.stream;
            let got = match poll_fn(|cx| Poll::Ready(stream.poll_capacity(cx))).await {
                Poll::Ready(got) => got,
                Poll::Pending => self.wait_capacity().await?,
            };
            match got {
                Some(Ok(0)) => continue,
                Some(Ok(n)) => {
                    self.watch.granted(n);
                    self.pace.sent = self.pace.sent.saturating_add(n as u64);
                    return Ok(n.min(want));
                }
                _ => return Err(SendError::Reset),
            }
        }
    }

    async fn wait_capacity(&mut self) -> Result<Option<Result<usize, h2::Error>>, SendError> {
        let start = Instant::now();
        let deadline = self.pace.deadline(start, &self.watch.rules);
        let grants = self.watch.grants();
        let waited = {
            let _waiting = self.watch.wait_guard();
            let stream = &mut self.stream;
            tokio::time::timeout_at(deadline, poll_fn(|cx| stream.poll_capacity(cx))).await
        };
        self.pace.waited = self.pace.waited.saturating_add(start.elapsed());
        match waited {
            Ok(got) => Ok(got),
            Err(_) => {
                // Reset drops what h2 queued for the stream and gives its capacity back.
                self.stream.send_reset(h2::Reason::CANCEL);
                if self.watch.grants() == grants {
                    self.watch.set_stalled();
                }
                tracing::debug!("HTTP/2 stream stalled past the write timeout; reset");
                Err(SendError::Stalled)
            }
        }
    }

    /// Ends the account of waits: everything so far was handed to h2, and what comes next
    /// waits for the handler, not the client.
    fn caught_up(&mut self) {
        self.pace = Pace::default();
    }

    /// Sends `data`, ending the stream after it if `end`.
    pub(super) async fn data(&mut self, data: Bytes, end: bool) -> Result<(), SendError> {
        self.data_held(data, end, None).await
    }

    async fn data_held(
        &mut self,
        mut data: Bytes,
        end: bool,
        mut held: Option<&mut Held<'_>>,
    ) -> Result<(), SendError> {
        let end = end && self.ends;
        if data.is_empty() {
            if end {
                return self
                    .stream
                    .send_data(data, true)
                    .map_err(|_| SendError::Reset);
            }
            return Ok(());
        }
        while !data.is_empty() {
            let n = self.capacity(data.len()).await?;
            let piece = data.split_to(n.min(data.len()));
            let len = piece.len();
            self.stream
                .send_data(piece, end && data.is_empty())
                .map_err(|_| SendError::Reset)?;
            if let Some(held) = held.as_deref_mut() {
                held.sent(len);
            }
        }
        Ok(())
    }

    /// Sends a handler's streamed body; with `len`, exactly that many bytes (fewer or more
    /// resets the stream, the HTTP/2 form of cutting the response short).
    pub(super) async fn stream(
        &mut self,
        mut body: crate::response::BodyStream,
        len: Option<u64>,
    ) -> Result<(), SendError> {
        let mut left = len;
        if left == Some(0) {
            return self.data(Bytes::new(), true).await;
        }
        loop {
            self.caught_up();
            // No more is pulled while the connection holds `max_pending_output` unsent bytes
            // (a client's reset meanwhile ends the wait).
            let (watch, stream) = (self.watch, &mut self.stream);
            tokio::select! {
                // A reset seen in the same turn as the room wins: nothing is pulled for it.
                biased;
                _ = poll_fn(|cx| stream.poll_reset(cx)) => return Err(SendError::Reset),
                _ = watch.room() => {}
            }
            // A panicking stream is treated like a failing one (the HTTP/1.1 driver does the
            // same).
            let next = poll_fn(|cx| {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    Pin::new(&mut body).poll_next(cx)
                })) {
                    Ok(p) => p,
                    Err(_) => Poll::Ready(Some(Err(std::io::Error::other("panic")))),
                }
            });
            // Waits for the next chunk, or for the client to reset the stream meanwhile.
            let stream = &mut self.stream;
            let next = tokio::select! {
                next = next => next,
                _ = poll_fn(|cx| stream.poll_reset(cx)) => return Err(SendError::Reset),
            };
            // A piece h2 may hold while the client's window is closed: see `detach_small`.
            let next = next.map(|piece| piece.map(crate::response::detach_small));
            match (next, left) {
                (None, None) => return self.data(Bytes::new(), true).await,
                (None, Some(_)) => return Err(self.fail("ended before its length")),
                (Some(Ok(chunk)), None) => {
                    let mut held = self.watch.hold(chunk.len());
                    self.data_held(chunk, false, Some(&mut held)).await?;
                }
                (Some(Ok(chunk)), Some(l)) => {
                    if chunk.len() as u64 > l {
                        return Err(self.fail("yielded more than its length"));
                    }
                    let l = l - chunk.len() as u64;
                    left = Some(l);
                    let mut held = self.watch.hold(chunk.len());
                    self.data_held(chunk, l == 0, Some(&mut held)).await?;
                    if l == 0 {
                        return Ok(());
                    }
                }
                (Some(Err(e)), _) => {
                    tracing::warn!(error = %e, "response body stream failed; resetting the stream");
                    self.stream.send_reset(h2::Reason::INTERNAL_ERROR);
                    return Err(SendError::Body);
                }
            }
        }
    }

    /// Sends `len` bytes of `file` from `offset`, read piece by piece as the client's windows
    /// open (never more than [`FILE_CHUNK`] at a time).
    pub(super) async fn file(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
    ) -> Result<(), SendError> {
        if offset.checked_add(len).is_none() {
            return Err(self.fail("file range overflows"));
        }
        if len == 0 {
            return self.data(Bytes::new(), true).await;
        }
        let (mut at, mut left) = (offset, len);
        while left > 0 {
            let want = left.min(FILE_CHUNK as u64) as usize;
            let n = self.capacity(want).await?;
            let mut buf = vec![0u8; n];
            if let Err(e) = file.read_exact_at(&mut buf, at) {
                // A file shorter than announced reads as UnexpectedEof.
                tracing::warn!(error = %e, "response file could not be read; resetting the stream");
                self.stream.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(SendError::Body);
            }
            at += n as u64;
            left -= n as u64;
            self.stream
                .send_data(Bytes::from(buf), left == 0 && self.ends)
                .map_err(|_| SendError::Reset)?;
        }
        Ok(())
    }

    /// The body cannot be sent as announced: the stream is reset (`INTERNAL_ERROR`).
    fn fail(&mut self, why: &'static str) -> SendError {
        tracing::warn!(
            why,
            "response body does not match its length; resetting the stream"
        );
        self.stream.send_reset(h2::Reason::INTERNAL_ERROR);
        SendError::Body
    }
}
