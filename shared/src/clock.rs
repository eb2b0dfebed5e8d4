//! Wall-clock time as Iceberg and floe record it.

/// Milliseconds since the Unix epoch (0 for a clock before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How far clocks of writers, committer and sources may disagree.
pub const SKEW_MS: i64 = 2 * 60 * 1000;
