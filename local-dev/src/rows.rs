//! How many rows a table holds, from its current snapshot's totals: what
//! was written less what delete files removed, so a keyed table that took
//! four changes to two keys says 2, not 4.

use floe_core::iceberg::spec::{Snapshot, TableMetadata};
use serde::Serialize;

/// A table's row counts at its current snapshot.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Rows {
    /// Rows in the live data files (`total-records`).
    pub written: u64,
    /// Of those, rows removed by position deletes or deletion vectors.
    pub deleted: u64,
    /// Equality deletes not yet applied: each removes every older row with
    /// its key, so the live count is only bounded until compaction.
    pub equality_deletes: u64,
}

impl Rows {
    /// The current snapshot's totals (all zero for an empty table).
    pub fn of(m: &TableMetadata) -> Self {
        let Some(s) = m.current_snapshot() else {
            return Self::default();
        };
        Self {
            written: summary_u64(s, "total-records"),
            deleted: summary_u64(s, "total-position-deletes"),
            equality_deletes: summary_u64(s, "total-equality-deletes"),
        }
    }

    /// The live rows when exact; at most this many while equality deletes wait.
    pub fn live(&self) -> u64 {
        self.written.saturating_sub(self.deleted)
    }

    /// True when [`Rows::live`] is exact.
    pub fn exact(&self) -> bool {
        self.equality_deletes == 0
    }

    /// `2 rows`, `2 rows (4 written, 2 deleted)` or `at most 4 rows (…, 2
    /// equality deletes pending until compaction)`.
    pub fn describe(&self) -> String {
        let live = self.live();
        match (self.deleted, self.exact()) {
            (0, true) => format!("{live} rows"),
            (d, true) => format!("{live} rows ({} written, {d} deleted)", self.written),
            (d, false) => format!(
                "at most {live} rows ({} written, {d} deleted, {} equality deletes pending until `floe maintain`)",
                self.written, self.equality_deletes
            ),
        }
    }
}

/// A snapshot summary's number under `key` (0 when absent).
pub fn summary_u64(s: &Snapshot, key: &str) -> u64 {
    s.summary()
        .additional_properties
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
