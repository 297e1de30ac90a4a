//! Streamed response bodies: [`StreamBody`] from any stream of byte chunks, or from a channel
//! whose sending half ([`BodySender`]) a task fills while the response is being written.

use crate::response::into_response::{IntoResponse, OCTET_STREAM};
use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::{Response, ResponseBody, Trailers};
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A streamed response body, sent with chunked encoding as the stream yields.
///
/// ```
/// use peregrine::{Request, StreamBody};
///
/// async fn lines(_req: Request) -> StreamBody {
///     let (tx, body) = StreamBody::channel(8);
///     tokio::spawn(async move {
///         for i in 0..3 {
///             if tx.send(format!("line {i}\n")).await.is_err() {
///                 break; // client went away
///             }
///         }
///     });
///     body.content_type("text/plain; charset=utf-8")
/// }
/// let app = peregrine::App::new().route("/lines", peregrine::get(lines));
/// # let _ = app;
/// ```
pub struct StreamBody {
    stream: peregrine_server::response::BodyStream,
    content_type: Cow<'static, [u8]>,
    trailers: Option<Pin<Box<dyn Future<Output = Trailers> + 'static>>>,
}

impl StreamBody {
    /// Wraps any stream of byte chunks. Content type defaults to `application/octet-stream`.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use peregrine::{get, App, Request, StreamBody};
    ///
    /// async fn digits(_req: Request) -> StreamBody {
    ///     StreamBody::new(futures_util::stream::iter((0..3).map(|i| Ok(Bytes::from(i.to_string())))))
    /// }
    /// let client = App::new().route("/digits", get(digits)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/digits").send().await;
    /// assert_eq!(res.text(), "012");
    /// assert_eq!(res.header("content-type"), Some("application/octet-stream"));
    /// # });
    /// ```
    pub fn new<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + 'static,
    {
        StreamBody {
            stream: Box::pin(stream),
            content_type: Cow::Borrowed(OCTET_STREAM),
            trailers: None,
        }
    }

    /// A body fed through a bounded channel: the sender side may live in another task; its
    /// `send` waits while `capacity` chunks are queued (backpressure from the client).
    ///
    /// ```
    /// use peregrine::{get, App, Request, StreamBody};
    ///
    /// async fn countdown(_req: Request) -> StreamBody {
    ///     let (tx, body) = StreamBody::channel(1); // `send` waits until the previous chunk is taken
    ///     tokio::spawn(async move {
    ///         for i in (1..=3).rev() {
    ///             let _ = tx.send(format!("{i} ")).await;
    ///         }
    ///     });
    ///     body
    /// }
    /// let client = App::new().route("/", get(countdown)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/").send().await.text(), "3 2 1 ");
    /// # });
    /// ```
    pub fn channel(capacity: usize) -> (BodySender, StreamBody) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        (BodySender(tx), StreamBody::new(ChannelStream(rx)))
    }

    /// Sets the content type.
    ///
    /// ```
    /// use peregrine::{get, App, Request, StreamBody};
    ///
    /// async fn export(_req: Request) -> StreamBody {
    ///     let (tx, body) = StreamBody::channel(4);
    ///     tokio::spawn(async move { let _ = tx.send("id,name\n1,ada\n").await; });
    ///     body.content_type("text/csv")
    /// }
    /// let client = App::new().route("/export.csv", get(export)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/export.csv").send().await;
    /// assert_eq!(res.header("content-type"), Some("text/csv"));
    /// assert_eq!(res.text(), "id,name\n1,ada\n");
    /// # });
    /// ```
    pub fn content_type(mut self, ct: impl Into<Cow<'static, str>>) -> Self {
        self.content_type = match ct.into() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
        self
    }
}

impl StreamBody {
    /// Sends trailer fields after the body, known only once it ended (a gRPC-style status, a
    /// checksum): `trailers` is awaited after the last chunk was handed to the connection.
    /// HTTP/2 and HTTP/3 always carry them; HTTP/1.1 only to a client that sent `TE: trailers`
    /// (elsewhere they are dropped, see [`peregrine_server::trailers`]). A field a trailer
    /// section may not carry is refused when the [`Trailers`] are built.
    ///
    /// ```
    /// use peregrine::{get, App, Request, StreamBody, Trailers};
    ///
    /// async fn export(_req: Request) -> StreamBody {
    ///     let (tx, body) = StreamBody::channel(4);
    ///     let (done, outcome) = tokio::sync::oneshot::channel::<usize>();
    ///     tokio::spawn(async move {
    ///         let mut rows = 0;
    ///         for row in ["1,ada\n", "2,grace\n"] {
    ///             if tx.send(row).await.is_err() {
    ///                 return;
    ///             }
    ///             rows += 1;
    ///         }
    ///         let _ = done.send(rows);
    ///     });
    ///     body.content_type("text/csv").trailers(async move {
    ///         let rows = outcome.await.unwrap_or(0);
    ///         Trailers::new().with("x-rows", rows.to_string()).unwrap_or_default()
    ///     })
    /// }
    /// let client = App::new().route("/export.csv", get(export)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.get("/export.csv").send().await.text(), "1,ada\n2,grace\n");
    /// # });
    /// ```
    pub fn trailers(mut self, trailers: impl Future<Output = Trailers> + 'static) -> Self {
        self.trailers = Some(Box::pin(trailers));
        self
    }
}

impl IntoResponse for StreamBody {
    fn into_response(self) -> Response {
        let r = Response::new(200)
            .with_header("content-type", self.content_type)
            .with_body(ResponseBody::Stream(self.stream));
        match self.trailers {
            Some(trailers) => r.with_trailers_later(trailers),
            None => r,
        }
    }
}

/// The sending half of [`StreamBody::channel`].
///
/// ```
/// use peregrine::{get, App, Request, StreamBody};
///
/// // Cloned, it lets several tasks feed one body; the body ends when every sender is dropped.
/// async fn merged(_req: Request) -> StreamBody {
///     let (tx, body) = StreamBody::channel(4);
///     let tx2 = tx.clone();
///     tokio::spawn(async move {
///         let _ = tx.send("first;").await;
///         let _ = tx2.send("second;").await;
///     });
///     body
/// }
/// let client = App::new().route("/", get(merged)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert_eq!(client.get("/").send().await.text(), "first;second;");
/// # });
/// ```
#[derive(Clone)]
pub struct BodySender(tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>);

/// The receiver (the response) is gone: the client disconnected or the response was dropped.
///
/// ```
/// use peregrine::{Disconnected, StreamBody};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let (tx, body) = StreamBody::channel(1);
/// drop(body); // the response is gone (the client went away)
/// assert_eq!(tx.send("late").await, Err(Disconnected));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected;

impl std::fmt::Display for Disconnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("response body receiver dropped")
    }
}
impl std::error::Error for Disconnected {}

impl BodySender {
    /// Sends one chunk, waiting while the channel is full.
    ///
    /// ```
    /// use peregrine::StreamBody;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (tx, body) = StreamBody::channel(2);
    /// assert_eq!(tx.send("one").await, Ok(())); // queued: the channel has room for 2
    /// drop(body);
    /// assert!(tx.send("two").await.is_err());
    /// # });
    /// ```
    pub async fn send(&self, chunk: impl Into<Bytes>) -> Result<(), Disconnected> {
        self.0
            .send(Ok(chunk.into()))
            .await
            .map_err(|_| Disconnected)
    }
    /// Ends the body with an error: the engine aborts the response (the client sees a
    /// truncated chunked body, never a falsely complete one).
    ///
    /// ```
    /// use peregrine::{get, App, Request, StreamBody};
    ///
    /// async fn report(_req: Request) -> StreamBody {
    ///     let (tx, body) = StreamBody::channel(4);
    ///     tokio::spawn(async move {
    ///         let _ = tx.send("page 1\n").await;
    ///         tx.abort(std::io::Error::other("renderer crashed")).await;
    ///     });
    ///     body
    /// }
    /// let client = App::new().route("/report", get(report)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/report").send().await;
    /// assert_eq!(res.text(), "page 1\n");
    /// assert_eq!(res.stream_error(), Some("renderer crashed"));
    /// # });
    /// ```
    pub async fn abort(self, error: std::io::Error) {
        let _ = self.0.send(Err(error)).await;
    }
}

struct ChannelStream(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl Stream for ChannelStream {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
