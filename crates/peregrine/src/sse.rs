//! Server-sent events (`text/event-stream`, WHATWG HTML §9.2): events with `id`, `event`,
//! `data` (split on newlines) and `retry`, keep-alive comments while idle, and an end when the
//! client goes (the producer's `send` fails).
//!
//! ```
//! use peregrine::sse::{Event, Sse};
//! use peregrine::{get, App, Error, Request};
//!
//! /// Order status updates; resumes after the client's `Last-Event-ID`.
//! async fn order_events(req: Request) -> Result<Sse, Error> {
//!     let from: u32 = req.header("last-event-id").and_then(|v| v.parse().ok()).unwrap_or(0);
//!     let (tx, sse) = Sse::channel(16);
//!     tokio::task::spawn_local(async move {
//!         for (id, status) in [(1, "paid"), (2, "packed"), (3, "shipped")] {
//!             if id <= from {
//!                 continue;
//!             }
//!             let ev = Event::data(status).event("status").id(id.to_string());
//!             if tx.send(ev).await.is_err() {
//!                 return; // the client went away
//!             }
//!         }
//!     });
//!     Ok(sse)
//! }
//!
//! let client = App::new().route("/orders/{id}/events", get(order_events)).test();
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let res = client.get("/orders/9/events").header("last-event-id", "2").send().await;
//! assert_eq!(res.header("content-type"), Some("text/event-stream"));
//! assert_eq!(res.header("cache-control"), Some("no-cache"));
//! assert_eq!(res.text(), "id: 3\nevent: status\ndata: shipped\n\n");
//! # });
//! ```

use crate::response::{Disconnected, IntoResponse};
use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::{Response, ResponseBody};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// One event. Field values are written as the format requires: `data` is split into one
/// `data:` line per line (`\n`, `\r\n` or `\r`), and a line break in `id` or `event` (which
/// would end the field early and inject another) is replaced by a space; `id` also loses NUL,
/// which makes clients ignore the field.
///
/// ```
/// use peregrine::sse::Event;
/// let e = Event::data("line 1\nline 2").event("update").id("7").retry(std::time::Duration::from_secs(3));
/// assert_eq!(e.to_bytes(), "id: 7\nevent: update\nretry: 3000\ndata: line 1\ndata: line 2\n\n");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Event {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    retry: Option<Duration>,
    comment: Option<String>,
}

impl Event {
    /// An event carrying `data` (the `message` type unless [`Event::event`] names another).
    /// Each line of `data` becomes its own `data:` line; the client joins them back with `\n`.
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// assert_eq!(Event::data("hello").to_bytes(), "data: hello\n\n");
    /// assert_eq!(Event::data("a\r\nb").to_bytes(), "data: a\ndata: b\n\n");
    /// ```
    pub fn data(data: impl Into<String>) -> Self {
        Event {
            data: Some(data.into()),
            ..Event::default()
        }
    }
    /// An event whose data is `value` as JSON.
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// let e = Event::json(&serde_json::json!({ "user": "ada", "online": true }))?.event("presence");
    /// assert_eq!(e.to_bytes(), "event: presence\ndata: {\"online\":true,\"user\":\"ada\"}\n\n");
    /// # Ok::<(), peregrine::Error>(())
    /// ```
    pub fn json<T: serde::Serialize>(value: &T) -> Result<Self, crate::Error> {
        Ok(Event::data(
            serde_json::to_string(value).map_err(crate::Error::internal_from)?,
        ))
    }
    /// A comment line (`: text`): ignored by clients, keeps proxies from timing out.
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// assert_eq!(Event::comment("connected").to_bytes(), ": connected\n\n");
    /// ```
    pub fn comment(text: impl Into<String>) -> Self {
        Event {
            comment: Some(text.into()),
            ..Event::default()
        }
    }
    /// Sets the event id (the client sends it back as `Last-Event-ID` when it reconnects).
    /// A line break in it becomes a space, so it cannot start another field.
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// assert_eq!(Event::data("x").id("41").to_bytes(), "id: 41\ndata: x\n\n");
    /// assert_eq!(Event::data("x").id("1\ndata: forged").to_bytes(), "id: 1 data: forged\ndata: x\n\n");
    /// ```
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    /// Sets the event type (`addEventListener(type, ..)` on the client).
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// let e = Event::data("{\"user\":\"ada\"}").event("joined");
    /// assert_eq!(e.to_bytes(), "event: joined\ndata: {\"user\":\"ada\"}\n\n");
    /// ```
    pub fn event(mut self, event: impl Into<String>) -> Self {
        self.event = Some(event.into());
        self
    }
    /// Asks the client to wait this long before reconnecting (sent in milliseconds).
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// use std::time::Duration;
    /// let e = Event::comment("server busy").retry(Duration::from_secs(10));
    /// assert_eq!(e.to_bytes(), ": server busy\nretry: 10000\n\n");
    /// ```
    pub fn retry(mut self, after: Duration) -> Self {
        self.retry = Some(after);
        self
    }

    /// The event as it goes on the wire: comment, `id`, `event`, `retry`, `data`, then the
    /// blank line that ends it.
    ///
    /// ```
    /// use peregrine::sse::Event;
    /// let wire = Event::data("42").retry(std::time::Duration::from_millis(1500)).id("a").to_bytes();
    /// assert_eq!(wire, "id: a\nretry: 1500\ndata: 42\n\n");
    /// ```
    pub fn to_bytes(&self) -> String {
        let mut out = String::with_capacity(16 + self.data.as_ref().map_or(0, |d| d.len() + 8));
        if let Some(c) = &self.comment {
            for line in split_lines(c) {
                out.push_str(": ");
                out.push_str(line);
                out.push('\n');
            }
        }
        if let Some(id) = &self.id {
            out.push_str("id: ");
            out.extend(id.chars().filter(|&c| c != '\0').map(one_line));
            out.push('\n');
        }
        if let Some(ev) = &self.event {
            out.push_str("event: ");
            out.extend(ev.chars().map(one_line));
            out.push('\n');
        }
        if let Some(r) = self.retry {
            out.push_str("retry: ");
            out.push_str(itoa::Buffer::new().format(r.as_millis()));
            out.push('\n');
        }
        if let Some(d) = &self.data {
            for line in split_lines(d) {
                out.push_str("data: ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push('\n');
        out
    }
}

fn one_line(c: char) -> char {
    if c == '\n' || c == '\r' {
        ' '
    } else {
        c
    }
}

/// Lines split on `\r\n`, `\n` or `\r` (an empty string is one empty line).
fn split_lines(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.find(['\r', '\n']) {
            None => {
                rest = None;
                Some(r)
            }
            Some(i) => {
                let skip = if r[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&r[i + skip..]);
                Some(&r[..i])
            }
        }
    })
}

/// A `text/event-stream` response from a stream of [`Event`]s, with a keep-alive comment
/// after every `keep_alive` of silence (15 s by default). The response ends when the stream
/// does; when the client goes, the engine drops the response, and a [`SseSender`] then fails.
///
/// ```
/// use peregrine::sse::{Event, Sse};
/// use peregrine::{get, App, Request};
///
/// async fn ticks(_req: Request) -> Sse {
///     let (tx, sse) = Sse::channel(8);
///     tokio::task::spawn_local(async move {
///         for i in 0..3 {
///             if tx.send(Event::data(format!("tick {i}")).id(i.to_string())).await.is_err() {
///                 return; // the client went away
///             }
///         }
///     });
///     sse
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = App::new().route("/ticks", get(ticks)).test().get("/ticks").send().await;
/// assert_eq!(res.header("content-type"), Some("text/event-stream"));
/// assert_eq!(res.text(), "id: 0\ndata: tick 0\n\nid: 1\ndata: tick 1\n\nid: 2\ndata: tick 2\n\n");
/// # });
/// ```
pub struct Sse {
    events: Pin<Box<dyn Stream<Item = Event>>>,
    keep_alive: Option<Duration>,
}

impl Sse {
    /// Events from any stream.
    ///
    /// ```
    /// use peregrine::sse::{Event, Sse};
    /// use peregrine::{get, App, Request};
    ///
    /// async fn prices(_req: Request) -> Sse {
    ///     let events = futures_util::stream::iter([
    ///         Event::comment("prices in cents"),
    ///         Event::data("1999").event("price").id("1"),
    ///     ]);
    ///     Sse::new(events).keep_alive(None) // ends when the stream does
    /// }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = App::new().route("/prices", get(prices)).test().get("/prices").send().await;
    /// assert_eq!(res.text(), ": prices in cents\n\nid: 1\nevent: price\ndata: 1999\n\n");
    /// # });
    /// ```
    pub fn new(events: impl Stream<Item = Event> + 'static) -> Self {
        Sse {
            events: Box::pin(events),
            keep_alive: Some(Duration::from_secs(15)),
        }
    }
    /// Events sent through a bounded channel (`send` waits while `capacity` are queued). The
    /// response ends when every sender is dropped.
    ///
    /// ```
    /// use peregrine::sse::{Event, Sse};
    /// use peregrine::{get, App, Request};
    ///
    /// async fn progress(_req: Request) -> Sse {
    ///     let (tx, sse) = Sse::channel(4);
    ///     tokio::task::spawn_local(async move {
    ///         for pct in [25, 50, 100] {
    ///             let _ = tx.send(Event::data(pct.to_string()).event("progress")).await;
    ///         }
    ///         // `tx` dropped here: the stream ends.
    ///     });
    ///     sse
    /// }
    ///
    /// let client = App::new().route("/jobs/{id}/progress", get(progress)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/jobs/1/progress").send().await;
    /// assert_eq!(res.text().matches("event: progress").count(), 3);
    /// assert!(res.text().ends_with("data: 100\n\n"));
    /// # });
    /// ```
    pub fn channel(capacity: usize) -> (SseSender, Sse) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        (SseSender(tx), Sse::new(Receiver(rx)))
    }
    /// The keep-alive interval; `None` sends none.
    ///
    /// ```
    /// use peregrine::sse::{Event, Sse};
    /// use peregrine::{get, App, Request};
    /// use std::time::Duration;
    ///
    /// async fn slow(_req: Request) -> Sse {
    ///     let (tx, sse) = Sse::channel(1);
    ///     tokio::task::spawn_local(async move {
    ///         tokio::time::sleep(Duration::from_millis(250)).await; // quiet for a while
    ///         let _ = tx.send(Event::data("done")).await;
    ///     });
    ///     sse.keep_alive(Some(Duration::from_millis(100)))
    /// }
    ///
    /// let client = App::new().route("/slow", get(slow)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
    /// let text = client.get("/slow").send().await.text().to_owned();
    /// assert!(text.starts_with(": keep-alive\n\n"), "{text}");
    /// assert!(text.ends_with("data: done\n\n"));
    /// # });
    /// ```
    pub fn keep_alive(mut self, every: Option<Duration>) -> Self {
        self.keep_alive = every;
        self
    }
}

/// The sending half of [`Sse::channel`]. Clone it to send from several tasks.
///
/// ```
/// use peregrine::sse::{Event, Sse, SseSender};
/// use peregrine::{get, App, Request};
///
/// // Two producers feeding one stream.
/// async fn feed(_req: Request) -> Sse {
///     let (tx, sse) = Sse::channel(8);
///     for source in ["sensor-a", "sensor-b"] {
///         let tx: SseSender = tx.clone();
///         tokio::task::spawn_local(async move {
///             let _ = tx.send(Event::data(source).event("reading")).await;
///         });
///     }
///     sse // the original `tx` is dropped here; the clones keep the stream open
/// }
///
/// let client = App::new().route("/feed", get(feed)).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let text = client.get("/feed").send().await.text().to_owned();
/// assert!(text.contains("data: sensor-a\n") && text.contains("data: sensor-b\n"));
/// # });
/// ```
#[derive(Clone)]
pub struct SseSender(tokio::sync::mpsc::Sender<Event>);

impl SseSender {
    /// Sends one event; fails once the client is gone (the response was dropped).
    ///
    /// ```
    /// use peregrine::sse::{Event, Sse};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (tx, sse) = Sse::channel(1);
    /// drop(sse); // what the engine does when the client disconnects
    /// assert!(tx.send(Event::data("anyone?")).await.is_err());
    /// # });
    /// ```
    pub async fn send(&self, event: Event) -> Result<(), Disconnected> {
        self.0.send(event).await.map_err(|_| Disconnected)
    }
    /// Whether the client is gone, without sending (to stop expensive work early).
    ///
    /// ```
    /// use peregrine::sse::Sse;
    /// let (tx, sse) = Sse::channel(1);
    /// assert!(!tx.is_closed());
    /// drop(sse);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

struct Receiver(tokio::sync::mpsc::Receiver<Event>);

impl Stream for Receiver {
    type Item = Event;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.0.poll_recv(cx)
    }
}

/// The wire stream: events, and a comment when the keep-alive timer fires first.
struct SseBody {
    events: Pin<Box<dyn Stream<Item = Event>>>,
    keep_alive: Option<(Duration, Pin<Box<tokio::time::Sleep>>)>,
}

impl Stream for SseBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.events.as_mut().poll_next(cx) {
            Poll::Ready(Some(ev)) => {
                if let Some((every, sleep)) = &mut this.keep_alive {
                    sleep.as_mut().reset(tokio::time::Instant::now() + *every);
                }
                return Poll::Ready(Some(Ok(crate::response::chunks::owned(
                    ev.to_bytes().into_bytes(),
                ))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if let Some((every, sleep)) = &mut this.keep_alive {
            if sleep.as_mut().poll(cx).is_ready() {
                sleep.as_mut().reset(tokio::time::Instant::now() + *every);
                // Register the timer's waker for the next interval.
                let _ = sleep.as_mut().poll(cx);
                return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
            }
        }
        Poll::Pending
    }
}

use std::future::Future;

impl IntoResponse for Sse {
    fn into_response(self) -> Response {
        let keep_alive = self
            .keep_alive
            .map(|every| (every, Box::pin(tokio::time::sleep(every))));
        Response::new(200)
            .with_header("content-type", &b"text/event-stream"[..])
            .with_header("cache-control", &b"no-cache"[..])
            // nginx and similar proxies buffer responses unless told not to.
            .with_header("x-accel-buffering", &b"no"[..])
            .with_body(ResponseBody::Stream(Box::pin(SseBody {
                events: self.events,
                keep_alive,
            })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_split_on_every_kind_of_newline() {
        assert_eq!(
            Event::data("a\r\nb\rc\nd").to_bytes(),
            "data: a\ndata: b\ndata: c\ndata: d\n\n"
        );
        assert_eq!(Event::data("").to_bytes(), "data: \n\n");
        assert_eq!(Event::data("x\n").to_bytes(), "data: x\ndata: \n\n");
    }

    #[test]
    fn id_and_event_cannot_inject_fields() {
        let e = Event::data("d")
            .id("1\ndata: evil\0")
            .event("a\r\nretry: 1");
        assert_eq!(
            e.to_bytes(),
            "id: 1 data: evil\nevent: a  retry: 1\ndata: d\n\n"
        );
        assert_eq!(Event::comment("hi\nthere").to_bytes(), ": hi\n: there\n\n");
    }
}
