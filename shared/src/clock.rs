//! Wall-clock time as Iceberg and floe record it.
//!
//! Every timestamp floe keeps for itself (ledger entries, request creation,
//! look-back windows, maintenance ages) comes from [`now_ms`], so a test or
//! a simulation can move the whole process through hours or weeks with
//! [`shift`] (or `FLOE_CLOCK_SHIFT_MS` at start) and see every window and
//! seal that real time would cross, without waiting for it. Timestamps in
//! Iceberg metadata (snapshots) come from [`wall_ms`], the system clock:
//! iceberg-rust stamps the metadata updates it builds with it, and a table's
//! snapshot log must not run ahead of them.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};

/// Environment variable: milliseconds added to the system clock from start.
pub const SHIFT_ENV: &str = "FLOE_CLOCK_SHIFT_MS";

/// How far clocks of writers, committer and sources may disagree.
pub const SKEW_MS: i64 = 2 * 60 * 1000;

fn offset() -> &'static AtomicI64 {
    static OFFSET: OnceLock<AtomicI64> = OnceLock::new();
    OFFSET.get_or_init(|| {
        let start = std::env::var(SHIFT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0);
        AtomicI64::new(start)
    })
}

/// Milliseconds since the Unix epoch (0 for a clock before it), moved by
/// [`shift`].
pub fn now_ms() -> i64 {
    wall_ms().saturating_add(offset().load(Ordering::Relaxed))
}

/// The system clock in milliseconds since the Unix epoch, never shifted:
/// for timestamps in Iceberg metadata.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Moves this process's clock forward by `ms` (backward when negative);
/// returns the total shift. For tests and simulations: a process's clock
/// is shared by every task in it.
pub fn shift(ms: i64) -> i64 {
    offset().fetch_add(ms, Ordering::Relaxed) + ms
}
