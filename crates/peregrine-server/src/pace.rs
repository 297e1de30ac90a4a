//! How long a slow peer may make the engine wait: one rule for request bodies and responses,
//! HTTP/1.1, HTTP/2 and upgraded connections alike. Each wait may last `timeout`; all the waits
//! of one episode together may last `total`, and no more than `grace` plus the time the bytes
//! moved so far take at `min_rate` (mod_reqtimeout's `MinRate`: every `min_rate` bytes buy one
//! more second), so a peer that moves a byte before every timeout cannot hold a connection
//! forever.

use crate::ServerConfig;
use std::time::Duration;
use tokio::time::Instant;

/// Longest time a deadline is put ahead: a configured `Duration` of any size (even
/// `Duration::MAX`) means "practically never", never an `Instant` overflow.
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// `from + d`, saturated at [`FAR_FUTURE`] ahead.
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Instant {
    from + d.min(FAR_FUTURE)
}

/// Time `bytes` take at `rate` bytes per second (saturating; `rate` > 0).
pub(crate) fn time_at_rate(bytes: u64, rate: u32) -> Duration {
    let rate = u64::from(rate);
    // (bytes % rate) < 2^32, so the product stays below 2^62.
    Duration::from_secs(bytes / rate)
        .saturating_add(Duration::from_nanos((bytes % rate) * 1_000_000_000 / rate))
}

/// The limits on one kind of wait, from [`ServerConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PaceRules {
    /// One wait, at most.
    pub(crate) timeout: Duration,
    /// All the waits of an episode, at most (`Duration::MAX`: no such bound).
    pub(crate) total: Duration,
    /// Bytes per second the peer must keep up after `grace` (0: no rate rule).
    pub(crate) min_rate: u32,
    pub(crate) grace: Duration,
}

impl PaceRules {
    /// Waits for a peer to read what it is sent: `write_timeout`, `write_min_rate`,
    /// `write_rate_grace` (no total bound).
    pub(crate) fn write(config: &ServerConfig) -> PaceRules {
        PaceRules {
            timeout: config.timeouts.write,
            total: Duration::MAX,
            min_rate: config.timeouts.write_min_rate,
            grace: config.timeouts.write_rate_grace,
        }
    }

    /// Waits for a request body: `body_timeout`, `body_total_timeout`, `body_min_rate`,
    /// `body_rate_grace`.
    pub(crate) fn body(config: &ServerConfig) -> PaceRules {
        PaceRules {
            timeout: config.timeouts.body,
            total: config.timeouts.body_total,
            min_rate: config.timeouts.body_min_rate,
            grace: config.timeouts.body_rate_grace,
        }
    }

    /// When a wait starting `now` must end, after the episode's earlier waits (`waited`) and
    /// the bytes moved during it (`moved`).
    pub(crate) fn deadline(&self, now: Instant, waited: Duration, moved: u64) -> Instant {
        let mut budget = self.timeout.min(self.total.saturating_sub(waited));
        if self.min_rate > 0 {
            let allowance = self
                .grace
                .saturating_add(time_at_rate(moved, self.min_rate));
            budget = budget.min(allowance.saturating_sub(waited));
        }
        deadline_after(now, budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_shortens_the_wait() {
        let rules = PaceRules {
            timeout: Duration::from_secs(10),
            total: Duration::MAX,
            min_rate: 1000,
            grace: Duration::from_secs(2),
        };
        let now = Instant::now();
        assert_eq!(
            rules.deadline(now, Duration::ZERO, 0),
            now + Duration::from_secs(2)
        );
        // 2000 bytes buy 2 s more; 3 s were already waited.
        let waited = Duration::from_secs(3);
        assert_eq!(
            rules.deadline(now, waited, 2000),
            now + Duration::from_secs(1)
        );
        let off = PaceRules {
            min_rate: 0,
            ..rules
        };
        assert_eq!(
            off.deadline(now, waited, 2000),
            now + Duration::from_secs(10)
        );
        let total = PaceRules {
            total: Duration::from_secs(4),
            ..off
        };
        assert_eq!(
            total.deadline(now, waited, 2000),
            now + Duration::from_secs(1)
        );
        let never = PaceRules {
            timeout: Duration::MAX,
            total: Duration::MAX,
            min_rate: 0,
            grace: Duration::MAX,
        };
        assert_eq!(never.deadline(now, Duration::ZERO, 0), now + FAR_FUTURE);
    }

    #[test]
    fn time_at_rate_is_exact_and_saturates() {
        assert_eq!(time_at_rate(1500, 1000), Duration::from_millis(1500));
        assert_eq!(time_at_rate(u64::MAX, 1), Duration::from_secs(u64::MAX));
    }
}
