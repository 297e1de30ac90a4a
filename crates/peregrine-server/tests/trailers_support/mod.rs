//! The service the trailer tests send requests to, over every protocol:
//! * `/stream`: a streamed body `ab`, `cd` whose trailers (`x-pieces: 2`) are known only once
//!   the stream ended (the stream itself hands them over then);
//! * `/full`: `hello` with trailers known up front (`x-checksum: 5`);
//! * `/empty`: no body, trailers only (`x-status: 0`);
//! * `/echo`: reads the request body to its end and answers `body=...;trailers=name:value,...`
//!   (the request's trailers as `Body::trailers` gives them, names lowercased).
#![allow(dead_code)]

use bytes::Bytes;
use futures_core::Stream;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Service, Trailers};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// Pieces handed out one per poll; at the end, the count goes to the trailers' future.
struct Counted {
    pieces: VecDeque<&'static str>,
    sent: usize,
    done: Option<oneshot::Sender<usize>>,
}

impl Stream for Counted {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.pieces.pop_front() {
            Some(p) => {
                self.sent += 1;
                Poll::Ready(Some(Ok(Bytes::from_static(p.as_bytes()))))
            }
            None => {
                let sent = self.sent;
                if let Some(done) = self.done.take() {
                    let _ = done.send(sent);
                }
                Poll::Ready(None)
            }
        }
    }
}

/// The body's trailers, listed as `name:value` pairs joined by `,` (names lowercased).
fn listed(trailers: Option<&Trailers>) -> String {
    trailers.map_or_else(String::new, |t| {
        t.iter()
            .map(|(n, v)| format!("{}:{}", n.to_ascii_lowercase(), String::from_utf8_lossy(v)))
            .collect::<Vec<_>>()
            .join(",")
    })
}

async fn handle(mut req: Request) -> Response {
    match req.path() {
        "/stream" => {
            let (done, count) = oneshot::channel();
            let body = Counted {
                pieces: VecDeque::from(["ab", "cd"]),
                sent: 0,
                done: Some(done),
            };
            Response::new(200)
                .with_body(ResponseBody::Stream(Box::pin(body)))
                .with_trailers_later(async move {
                    // Unknown until the stream ended: the engine awaits this after the body.
                    let n = count.await.expect("the stream ended");
                    Trailers::new().with("x-pieces", n.to_string()).unwrap()
                })
        }
        "/full" => {
            Response::text("hello").with_trailers(Trailers::new().with("x-checksum", "5").unwrap())
        }
        "/empty" => {
            Response::new(200).with_trailers(Trailers::new().with("x-status", "0").unwrap())
        }
        "/echo" => {
            let body = req.body_mut().to_bytes(1 << 20).await;
            let Ok(body) = body else {
                return Response::new(400);
            };
            Response::text(format!(
                "body={};trailers={}",
                String::from_utf8_lossy(&body),
                listed(req.body().trailers())
            ))
        }
        _ => Response::new(404),
    }
}

/// The service above.
pub fn service() -> impl Service {
    service_fn(handle)
}
