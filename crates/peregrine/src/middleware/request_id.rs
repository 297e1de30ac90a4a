use super::{has_header, Middleware, Next};
use crate::handler::BoxFuture;
use crate::request::Request;
use peregrine_server::Response;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// The id of the current request, stored as a request extension by [`RequestIdLayer`].
///
/// ```
/// use peregrine::middleware::{RequestId, RequestIdLayer};
/// use peregrine::{get, App, Error, Request};
///
/// async fn charge(req: Request) -> Result<String, Error> {
///     let id = req.extension::<RequestId>().map_or("-", RequestId::as_str);
///     // Quote it in errors so a support ticket can be matched with the logs.
///     Err(Error::new(402).with_detail(format!("card declined (request {id})")))
/// }
///
/// let client = App::new().route("/charge", get(charge)).layer(RequestIdLayer::new()).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/charge").header("x-request-id", "req-42").send().await;
/// assert_eq!(res.json::<serde_json::Value>()["detail"], "card declined (request req-42)");
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// The id as text.
    ///
    /// ```
    /// use peregrine::middleware::{RequestId, RequestIdLayer};
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move {
    ///         req.extension::<RequestId>().map(|id| id.as_str().to_owned()).unwrap_or_default()
    ///     }))
    ///     .layer(RequestIdLayer::new())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").send().await;
    /// assert_eq!(res.text().len(), 24); // a new id: 16 hex digits of prefix, 8 of counter
    /// assert_eq!(res.header("x-request-id"), Some(res.text()));
    /// # });
    /// ```
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
/// use peregrine::{get, App, Request};
///
/// let client = App::new().route("/", get(|_r: Request| async { "hi" })).layer(RequestIdLayer::new()).test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // A sane incoming id is kept and echoed (the caller's trace continues)...
/// let kept = client.get("/").header("x-request-id", "lb-7f3a").send().await;
/// assert_eq!(kept.header("x-request-id"), Some("lb-7f3a"));
/// // ...anything else is replaced by a fresh one.
/// let fresh = client.get("/").header("x-request-id", "has spaces").send().await;
/// assert_ne!(fresh.header("x-request-id"), Some("has spaces"));
/// # });
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
    ///
    /// ```
    /// use peregrine::middleware::RequestIdLayer;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new().route("/", get(|_r: Request| async { "hi" })).layer(RequestIdLayer::new()).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let a = client.get("/").send().await.header("x-request-id").unwrap().to_owned();
    /// let b = client.get("/").send().await.header("x-request-id").unwrap().to_owned();
    /// assert_ne!(a, b);
    /// # });
    /// ```
    pub fn new() -> Self {
        Self::with_header("x-request-id")
    }
    /// Uses another header name (e.g. `x-correlation-id`).
    ///
    /// ```
    /// use peregrine::middleware::RequestIdLayer;
    /// use peregrine::{get, App, Request};
    ///
    /// let layer = RequestIdLayer::with_header("x-correlation-id");
    /// let client = App::new().route("/", get(|_r: Request| async { "hi" })).layer(layer).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("x-correlation-id", "c-19").send().await;
    /// assert_eq!(res.header("x-correlation-id"), Some("c-19"));
    /// assert_eq!(res.header("x-request-id"), None);
    /// # });
    /// ```
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
