use super::{has_header, Middleware, Next};
use crate::handler::BoxFuture;
use crate::request::Request;
use peregrine_server::Response;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// The id of the current request, stored as a request extension by [`RequestIdLayer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Gives every request an id: the incoming `x-request-id` when it is a sane token (1 to 128
/// visible ASCII characters), otherwise a new one. The id is stored as a [`RequestId`]
/// extension for handlers and echoed in the `x-request-id` response header.
///
/// New ids are a random per-process prefix plus a counter: unique within and across
/// processes with overwhelming probability, and cheap (no system call per request).
///
/// ```
/// use peregrine::middleware::RequestIdLayer;
/// let app = peregrine::App::new().layer(RequestIdLayer::new());
/// # let _ = app;
/// ```
#[derive(Debug)]
pub struct RequestIdLayer {
    header: &'static str,
    prefix: u64,
    counter: AtomicU64,
}

impl Default for RequestIdLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestIdLayer {
    /// Uses the `x-request-id` header.
    pub fn new() -> Self {
        Self::with_header("x-request-id")
    }
    /// Uses another header name (e.g. `x-correlation-id`).
    pub fn with_header(header: &'static str) -> Self {
        RequestIdLayer {
            header,
            prefix: random_u64(),
            counter: AtomicU64::new(0),
        }
    }

    fn next_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{:08x}", self.prefix, n)
    }
}

/// 64 random bits from the standard library's per-process hash keys (seeded by the OS), so
/// no extra dependency is needed for a non-cryptographic id prefix.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

fn acceptable(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| (0x21..0x7f).contains(&b))
}

impl Middleware for RequestIdLayer {
    fn call(&self, mut req: Request, next: Next) -> BoxFuture<Response> {
        let id = match req.header(self.header) {
            Some(v) if acceptable(v) => v.to_owned(),
            _ => self.next_id(),
        };
        // Into the request's span when a `Trace` layer outside this one opened it.
        tracing::Span::current().record("request_id", id.as_str());
        req.insert_extension(RequestId(id.clone()));
        let header = self.header;
        let fut = next.run(req);
        Box::pin(async move {
            let mut res = fut.await;
            if !has_header(&res, header) {
                res.headers
                    .push((Cow::Borrowed(header), Cow::Owned(id.into_bytes())));
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let l = RequestIdLayer::new();
        let a = l.next_id();
        let b = l.next_id();
        assert_ne!(a, b);
        assert!(acceptable(&a) && a.len() == 24);
    }

    #[test]
    fn incoming_ids_are_checked() {
        assert!(acceptable("abc-123"));
        assert!(!acceptable(""));
        assert!(!acceptable("has space"));
        assert!(!acceptable(&"x".repeat(129)));
    }
}
