//! The worker's periodic ticks (head-cache refresh, idle sweep) off tokio's timer wheel.
//!
//! With a timer in the wheel, tokio's time driver computes a park timeout (a clock read and a
//! wheel scan) before every `epoll_wait` and processes the wheel after it; without pending
//! timers it only reads the clock once. Without pipelining every request is a park, so two
//! `interval`s cost about 250 user-space instructions per request at c=1 (cachegrind,
//! `bench/instructions.sh`, see docs/performance.md). On Linux a tick is therefore a `timerfd`
//! registered with the reactor like a socket: one `read(2)` per tick, nothing per park.

use std::time::Duration;

/// A periodic tick: the first one `period` after creation (the caller did the work for time
/// zero), then every `period`; ticks missed while the worker was busy are merged into one.
pub(super) struct Ticker {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    #[cfg(not(target_os = "linux"))]
    interval: tokio::time::Interval,
}

#[cfg(target_os = "linux")]
impl Ticker {
    /// Must be called inside the worker's runtime (the timer is registered with its reactor).
    pub(super) fn new(period: Duration) -> std::io::Result<Self> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: plain system calls; the descriptor is owned by `OwnedFd` as soon as it exists.
        let fd = unsafe {
            let raw = libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            );
            if raw < 0 {
                return Err(std::io::Error::last_os_error());
            }
            OwnedFd::from_raw_fd(raw)
        };
        let period = period.max(Duration::from_millis(1));
        let spec = libc::timespec {
            tv_sec: period.as_secs() as libc::time_t,
            tv_nsec: period.subsec_nanos() as libc::c_long,
        };
        let it = libc::itimerspec {
            it_interval: spec,
            it_value: spec,
        };
        use std::os::fd::AsRawFd;
        // SAFETY: `fd` is a valid timerfd and `it` a valid `itimerspec`.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &it, std::ptr::null_mut()) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `OwnedFd` keeps the descriptor open and unchanged for the `AsyncFd`'s life.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        Ok(Ticker { fd })
    }

    /// Waits for the next tick.
    pub(super) async fn tick(&mut self) {
        use std::os::fd::AsRawFd;
        loop {
            let Ok(mut ready) = self.fd.readable().await else {
                // The reactor is gone (the runtime shuts down): no more ticks.
                return std::future::pending().await;
            };
            let read = ready.try_io(|fd| {
                let mut expirations = 0u64;
                // SAFETY: reads 8 bytes into a `u64` from a valid timerfd.
                let n = unsafe {
                    libc::read(
                        fd.as_raw_fd(),
                        (&mut expirations as *mut u64).cast(),
                        std::mem::size_of::<u64>(),
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            // `Err`: the timer had not expired (spurious readiness, now cleared): wait again.
            if read.is_ok() {
                return;
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Ticker {
    pub(super) fn new(period: Duration) -> std::io::Result<Self> {
        let start = tokio::time::Instant::now() + period;
        let mut interval = tokio::time::interval_at(start, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Ticker { interval })
    }

    pub(super) async fn tick(&mut self) {
        self.interval.tick().await;
    }
}

#[cfg(test)]
mod tests {
    use super::Ticker;
    use std::time::{Duration, Instant};

    #[test]
    fn ticks_once_per_period_after_the_first_period() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // `start` before the timer is armed: the third tick needs the third expiration,
            // 60 ms after arming, however late this thread runs (measured after arming, a
            // delay merged the first expirations into an immediate tick: seen at load 9).
            let start = Instant::now();
            let mut t = Ticker::new(Duration::from_millis(20)).unwrap();
            t.tick().await;
            t.tick().await;
            t.tick().await;
            assert!(start.elapsed() >= Duration::from_millis(60));
        });
    }
}
