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
/// // 10 requests per second per client, bursts of up to 20.
/// let app = App::new()
///     .route("/", get(|_r: Request| async { "hi" }))
///     .hook(RateLimit::per_second(10).burst(20));
/// # let _ = app;
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
    pub fn per_second(n: u32) -> Self {
        Self::with_quota(Quota::per_second(nonzero(n)))
    }

    /// One request per `period` per client (burst 1); see [`RateLimit::burst`].
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn every(period: Duration) -> Self {
        Self::with_quota(Quota::with_period(period).expect("a non-zero period"))
    }

    /// Allows bursts of up to `n` requests (0 is taken as 1).
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
