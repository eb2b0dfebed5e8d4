//! Snapshot expiry: snapshots older than `history.expire.max-snapshot-age-ms`
//! go, except the newest `history.expire.min-snapshots-to-keep` of the main
//! lineage. Their manifest lists,
//! manifests and data files go with them unless a kept snapshot still needs
//! them, and so do metadata files older than the oldest kept snapshot.
//!
//! The ledger's batch ids expire with their snapshots: the age must exceed the
//! longest window in which a source may redeliver a batch (SQS retention, a
//! Kafka consumer's rewind). High-water marks and source state are restated
//! by the maintenance snapshot before expiry (see [`super::compact`]), so
//! they never expire.

use std::collections::HashSet;

use iceberg::spec::{MAIN_BRANCH, TableMetadata};

/// Snapshot age beyond which a snapshot expires (Redpanda Connect's `commit.max_snapshot_age`).
pub const MAX_AGE_PROPERTY: &str = "history.expire.max-snapshot-age-ms";
/// Snapshots of the main lineage always kept.
pub const MIN_KEEP_PROPERTY: &str = "history.expire.min-snapshots-to-keep";
/// Default maximum snapshot age: 24 hours.
pub const DEFAULT_MAX_AGE_MS: i64 = 24 * 60 * 60 * 1000;

/// The expiry rule of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryRule {
    /// Snapshots older than this expire.
    pub max_age_ms: i64,
    /// This many of the newest main-lineage snapshots never expire.
    pub min_keep: usize,
}

impl ExpiryRule {
    /// The rule from table properties, with the defaults (24 h, 1 snapshot).
    pub fn of(metadata: &TableMetadata) -> Self {
        let get = |k: &str| metadata.properties().get(k).and_then(|v| v.parse().ok());
        Self {
            max_age_ms: get(MAX_AGE_PROPERTY).unwrap_or(DEFAULT_MAX_AGE_MS),
            min_keep: get(MIN_KEEP_PROPERTY)
                .map(|n: i64| n.max(1) as usize)
                .unwrap_or(1),
        }
    }

    /// The snapshots to expire at `now_ms`, oldest first.
    pub fn expired(&self, metadata: &TableMetadata, now_ms: i64) -> Vec<i64> {
        // floe writes only `main`; iceberg-rust exposes no list of other refs.
        let mut keep: HashSet<i64> = HashSet::new();
        let mut next = metadata
            .snapshot_for_ref(MAIN_BRANCH)
            .map(|s| s.snapshot_id());
        let mut n = 0;
        while let Some(s) = next.and_then(|id| metadata.snapshot_by_id(id)) {
            if n < self.min_keep {
                keep.insert(s.snapshot_id());
            }
            n += 1;
            next = s.parent_snapshot_id();
        }
        let cutoff = now_ms.saturating_sub(self.max_age_ms);
        let mut out: Vec<(i64, i64)> = metadata
            .snapshots()
            .filter(|s| !keep.contains(&s.snapshot_id()) && s.timestamp_ms() < cutoff)
            .map(|s| (s.timestamp_ms(), s.snapshot_id()))
            .collect();
        out.sort();
        out.into_iter().map(|(_, id)| id).collect()
    }
}
