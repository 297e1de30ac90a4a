use super::Hook;
use crate::error::Error;
use crate::request::Request;
use crate::response::IntoResponse;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use peregrine_server::Response;
use std::borrow::Cow;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Forget clients idle long enough to be back at a full burst once per this many checks, so
/// the table holds only recent clients (governor's `retain_recent`).
const SWEEP_EVERY: u64 = 4096;

/// A per-client rate limiter (GCRA, from the `governor` crate), keyed by
/// [`Request::client_addr`] (so behind trusted proxies it limits clients, not the proxy).
/// Over the limit it answers `429 Too Many Requests` with `Retry-After` (whole seconds,
/// rounded up) and counts the refusal in `peregrine_rejections_total{reason="rate_limited"}`.
///
/// A synchronous [`Hook`]: add it with [`App::hook`](crate::App::hook). It is shared by every
/// worker (one table, lock-sharded by `governor`'s `DashMap`), so the limit is per process.
///
/// ```
/// use peregrine::middleware::RateLimit;
/// use peregrine::{get, App, Request};
/// use std::time::Duration;
///
/// // Each client may send 20 requests at once, then one a minute.
/// let client = App::new()
///     .route("/", get(|_r: Request| async { "hi" }))
///     .hook(RateLimit::every(Duration::from_secs(60)).burst(20))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// for _ in 0..20 {
///     assert_eq!(client.get("/").send().await.status(), 200);
/// }
/// let refused = client.get("/").send().await; // the 21st at once
/// assert_eq!(refused.status(), 429);
/// assert_eq!(refused.header("retry-after"), Some("60"));
/// # });
/// ```
pub struct RateLimit {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    quota: Quota,
    clock: DefaultClock,
    checks: AtomicU64,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("quota", &self.quota)
            .finish()
    }
}

impl RateLimit {
    /// `n` requests per second per client (burst `n`). `n` of 0 is taken as 1.
    ///
    /// ```
    /// use peregrine::middleware::RateLimit;
    /// use peregrine::{post, App, Request};
    ///
    /// // Logins: one attempt a second per client, the rest of the app unlimited.
    /// let login = peregrine::Router::new()
    ///     .route("/login", post(|_r: Request| async { "welcome" }))
    ///     .hook(RateLimit::per_second(1));
    /// let client = App::new().merge(login).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let mut got = Vec::new();
    /// for _ in 0..2 {
    ///     got.push(client.post("/login").send().await.status());
    /// }
    /// assert_eq!(got, [200, 429]);
    /// # });
    /// ```
    pub fn per_second(n: u32) -> Self {
        Self::with_quota(Quota::per_second(nonzero(n)))
    }

    /// One request per `period` per client (burst 1); see [`RateLimit::burst`].
    ///
    /// # Panics
    /// If `period` is zero.
    ///
    /// ```
    /// use peregrine::middleware::RateLimit;
    /// use peregrine::{post, App, Request};
    /// use std::time::Duration;
    ///
    /// // One password-reset mail per client per minute.
    /// let client = App::new()
    ///     .route("/password-reset", post(|_r: Request| async { "mail sent" }))
    ///     .hook(RateLimit::every(Duration::from_secs(60)))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// assert_eq!(client.post("/password-reset").send().await.status(), 200);
    /// let again = client.post("/password-reset").send().await;
    /// assert_eq!((again.status(), again.header("retry-after")), (429, Some("60")));
    /// # });
    /// ```
    pub fn every(period: Duration) -> Self {
        Self::with_quota(Quota::with_period(period).expect("a non-zero period"))
    }

    /// Allows bursts of up to `n` requests (0 is taken as 1).
    ///
    /// ```
    /// use peregrine::middleware::RateLimit;
    /// use peregrine::{get, App, Request};
    /// use std::time::Duration;
    ///
    /// // On average one request every 10 s, but a page load may fetch 5 at once.
    /// let client = App::new()
    ///     .route("/quota", get(|_r: Request| async { "ok" }))
    ///     .hook(RateLimit::every(Duration::from_secs(10)).burst(5))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// for _ in 0..5 {
    ///     assert_eq!(client.get("/quota").send().await.status(), 200);
    /// }
    /// assert_eq!(client.get("/quota").send().await.status(), 429);
    /// # });
    /// ```
    pub fn burst(self, n: u32) -> Self {
        Self::with_quota(self.quota.allow_burst(nonzero(n)))
    }

    fn with_quota(quota: Quota) -> Self {
        RateLimit {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            quota,
            clock: DefaultClock::default(),
            checks: AtomicU64::new(0),
        }
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

impl Hook for RateLimit {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        let client = req.client_addr();
        match self.limiter.check_key(&client) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                // Whole seconds, rounded up, at least 1: `Retry-After: 0` invites a retry storm.
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let secs = secs.max(1);
                metrics::counter!("peregrine_rejections_total", "reason" => "rate_limited")
                    .increment(1);
                tracing::debug!(%client, retry_after = secs, "rate limited");
                Err(Error::new(429)
                    .with_header("retry-after", Cow::Owned(secs.to_string().into_bytes()))
                    .into_response())
            }
        }
    }
}
