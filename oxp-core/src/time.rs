//! Time, for everything that keeps or judges a record: milliseconds since the Unix epoch on the
//! clock replicas agree on, and durations turned into the milliseconds stores and wires count in.
//!
//! It sits at the bottom of the crate and imports nothing of it, so that what keeps time
//! (sealed request states, the `call_id` and task stores, the MCP front's tasks and lists) all
//! read one clock from below, and none of them reaches into another for it.
//!
//! The time replicas agree on is this process's wall clock, corrected by how far it is from the
//! shared store's clock (Redis's `TIME`) when there is one. Leases and task records are judged
//! on the store's clock itself; what only a time can carry (a sealed request state's expiry,
//! which a client brings back to any replica) is judged on this, so a replica whose clock is
//! off by minutes or days still agrees with the others on when a state expires.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far the store's clock is ahead of this process's, in milliseconds (0 without a store
/// that says).
static STORE_AHEAD_MS: AtomicI64 = AtomicI64::new(0);

/// This process's wall clock, in milliseconds since the Unix epoch.
fn local_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

/// The shared time now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    local_ms().saturating_add_signed(STORE_AHEAD_MS.load(Ordering::Relaxed))
}

/// Notes that the shared store's clock read `store_ms` just now.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn store_read(store_ms: u64) {
    let ahead = i128::from(store_ms) - i128::from(local_ms());
    let ahead = i64::try_from(ahead).unwrap_or(0);
    STORE_AHEAD_MS.store(ahead, Ordering::Relaxed);
}

/// `duration` in whole milliseconds, the unit stores and wires count in; a duration too long for
/// a `u64` (half a billion years) saturates rather than wraps.
#[doc(hidden)]
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    /// Read only: the shared time is process-wide, and other tests seal states by it.
    #[test]
    fn the_shared_time_is_the_local_time_until_a_store_says_otherwise() {
        let (local, shared) = (super::local_ms(), super::now_ms());
        assert!(
            shared.abs_diff(local) < 60_000,
            "no store has said: {shared} vs {local}"
        );
    }

    #[test]
    fn millis_saturates_instead_of_wrapping() {
        use std::time::Duration;
        assert_eq!(super::millis(Duration::from_millis(1500)), 1500);
        assert_eq!(super::millis(Duration::MAX), u64::MAX);
    }
}
