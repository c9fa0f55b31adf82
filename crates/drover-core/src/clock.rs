//! The wall clock, once: Unix milliseconds now.
//!
//! What must stay true: this is the only place outside the dispatcher's own [`Clock`]
//! (tokio's, virtual under paused time) that reads the system time for a timestamp; a
//! clock before 1970 reads as 0 and one past the end of `i64` as `i64::MAX`, never a
//! panic. Durations become milliseconds only through [`millis`] (saturating): no
//! `secs as i64 * 1000` anywhere, which wraps for a large value.
//!
//! [`Clock`]: crate::dispatch::Clock

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::UnixMillis;

/// A duration in milliseconds, saturating at `i64::MAX` (never a wrapped, negative count).
pub fn millis(d: Duration) -> UnixMillis {
    UnixMillis::try_from(d.as_millis()).unwrap_or(UnixMillis::MAX)
}

/// Seconds (from config or a request) as a [`Duration`]'s milliseconds, saturating.
pub fn secs_millis(secs: u64) -> UnixMillis {
    millis(Duration::from_secs(secs))
}

/// `at` plus `d`, saturating: a deadline past the end of time is the end of time.
pub fn after(at: UnixMillis, d: Duration) -> UnixMillis {
    at.saturating_add(millis(d))
}

/// Now, in Unix milliseconds.
pub fn now_millis() -> UnixMillis {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        UnixMillis::try_from(d.as_millis()).unwrap_or(UnixMillis::MAX)
    })
}

/// Now, in Unix microseconds (for latency measurements).
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
