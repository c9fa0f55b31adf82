//! The wall clock, once: Unix milliseconds now.
//!
//! What must stay true: this is the only place outside the dispatcher's own [`Clock`]
//! (tokio's, virtual under paused time) that reads the system time for a timestamp; a
//! clock before 1970 reads as 0 and one past the end of `i64` as `i64::MAX`, never a
//! panic.
//!
//! [`Clock`]: crate::dispatch::Clock

use std::time::{SystemTime, UNIX_EPOCH};

use crate::UnixMillis;

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
