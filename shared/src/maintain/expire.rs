//! Snapshot expiry, as the Iceberg spec's retention rules say: every ref
//! keeps what it needs, and only snapshots no ref needs that are older than
//! `history.expire.max-snapshot-age-ms` go.
//!
//! - A branch (`main` and any other engine's, such as a write-audit-publish
//!   branch) keeps the newest `min-snapshots-to-keep` of its lineage and
//!   every ancestor younger than its `max-snapshot-age-ms`; each defaults to
//!   the table property (`history.expire.min-snapshots-to-keep`, 1;
//!   `history.expire.max-snapshot-age-ms`, 24 h).
//! - A tag keeps its snapshot.
//! - A ref other than `main` whose snapshot is older than its
//!   `max-ref-age-ms` (default `history.expire.max-ref-age-ms`, never) is
//!   removed first; `main` never is.
//! - A snapshot younger than the table's age limit stays, whoever made it,
//!   unless the table keeps more than `floe.expire.max-snapshots`: then the
//!   oldest of those go, down to that count, though never a ref's snapshot
//!   or a branch's `min-snapshots-to-keep`. Age alone lets a table committed
//!   every second keep 86,400 snapshots a day, all rewritten into every
//!   metadata file; the count bounds that.
//!
//! Manifest lists, manifests and data files go with the expired snapshots
//! unless a kept snapshot still needs them, and so do metadata files older
//! than the oldest kept snapshot.
//!
//! The idempotency ledger lives in its own files (named by the `floe.ledger`
//! table property), so expiry takes nothing from it; a table whose ledger is
//! still in snapshot summaries (an earlier build's) is given ledger files
//! before expiry runs.

use std::collections::{BTreeMap, HashSet};

use iceberg::spec::{
    MAIN_BRANCH, Snapshot, SnapshotRef, SnapshotReference, SnapshotRetention, TableMetadata,
};

/// Snapshot age beyond which a snapshot expires (Redpanda Connect's `commit.max_snapshot_age`).
pub const MAX_AGE_PROPERTY: &str = "history.expire.max-snapshot-age-ms";
/// Snapshots of each branch's lineage always kept.
pub const MIN_KEEP_PROPERTY: &str = "history.expire.min-snapshots-to-keep";
/// Age of a ref's snapshot beyond which the ref (never `main`) is removed.
pub const MAX_REF_AGE_PROPERTY: &str = "history.expire.max-ref-age-ms";
/// Most snapshots a table keeps after expiry, refs' minimums aside (floe's;
/// Iceberg's expiry knows only ages and minimums).
pub const MAX_SNAPSHOTS_PROPERTY: &str = "floe.expire.max-snapshots";
/// Default maximum snapshot age: 24 hours.
pub const DEFAULT_MAX_AGE_MS: i64 = 24 * 60 * 60 * 1000;

/// The expiry rule of a table: the defaults of refs that set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryRule {
    /// Snapshots older than this expire unless a ref keeps them.
    pub max_age_ms: i64,
    /// This many of the newest snapshots of each branch never expire.
    pub min_keep: usize,
    /// Refs (not `main`) whose snapshot is older than this are removed;
    /// `None`: refs never expire.
    pub max_ref_age_ms: Option<i64>,
    /// At most this many snapshots stay, besides what refs require;
    /// `None`: age alone decides.
    pub max_snapshots: Option<usize>,
}

/// What one expiry removes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expiry {
    /// Snapshots to remove, oldest first.
    pub snapshots: Vec<i64>,
    /// Refs past their `max-ref-age-ms`, by name.
    pub refs: Vec<String>,
}

impl Expiry {
    /// True when nothing goes.
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty() && self.refs.is_empty()
    }
}

impl ExpiryRule {
    /// The rule from table properties, with the defaults (24 h, 1 snapshot,
    /// refs kept forever).
    pub fn of(metadata: &TableMetadata) -> Self {
        let get = |k: &str| metadata.properties().get(k).and_then(|v| v.parse().ok());
        Self {
            max_age_ms: get(MAX_AGE_PROPERTY).unwrap_or(DEFAULT_MAX_AGE_MS),
            min_keep: get(MIN_KEEP_PROPERTY)
                .map(|n: i64| n.max(1) as usize)
                .unwrap_or(1),
            max_ref_age_ms: get(MAX_REF_AGE_PROPERTY),
            max_snapshots: get(MAX_SNAPSHOTS_PROPERTY).map(|n: i64| n.max(1) as usize),
        }
    }

    /// What expires at `now_ms` given the table's `refs` (see [`super::refs::of`]).
    pub fn plan(
        &self,
        metadata: &TableMetadata,
        refs: &BTreeMap<String, SnapshotReference>,
        now_ms: i64,
    ) -> Expiry {
        // What refs require (tags, each branch's minimum) never goes; what
        // is only young enough goes when there is too much of it.
        let mut keep: HashSet<i64> = HashSet::new();
        let mut young: HashSet<i64> = HashSet::new();
        let mut gone_refs = Vec::new();
        for (name, r) in refs {
            // A ref naming no snapshot keeps nothing; it is not ours to mend.
            let Some(head) = metadata.snapshot_by_id(r.snapshot_id) else {
                continue;
            };
            if self.ref_expired(name, r, head, now_ms) {
                gone_refs.push(name.clone());
                continue;
            }
            match &r.retention {
                SnapshotRetention::Tag { .. } => {
                    keep.insert(r.snapshot_id);
                }
                SnapshotRetention::Branch {
                    min_snapshots_to_keep,
                    max_snapshot_age_ms,
                    ..
                } => {
                    let min_keep = min_snapshots_to_keep
                        .map(|n| n.max(1) as usize)
                        .unwrap_or(self.min_keep);
                    let cutoff =
                        now_ms.saturating_sub(max_snapshot_age_ms.unwrap_or(self.max_age_ms));
                    let (kept, recent) = lineage(metadata, head, min_keep, cutoff);
                    keep.extend(kept);
                    young.extend(recent);
                }
            }
        }
        let cutoff = now_ms.saturating_sub(self.max_age_ms);
        young.extend(
            metadata
                .snapshots()
                .filter(|s| s.timestamp_ms() >= cutoff)
                .map(|s| s.snapshot_id()),
        );
        young.retain(|id| !keep.contains(id));
        if let Some(max) = self.max_snapshots {
            young = newest_within(metadata, young, max.saturating_sub(keep.len()));
        }
        keep.extend(young);
        let mut out: Vec<(i64, i64)> = metadata
            .snapshots()
            .filter(|s| !keep.contains(&s.snapshot_id()))
            .map(|s| (s.timestamp_ms(), s.snapshot_id()))
            .collect();
        out.sort();
        Expiry {
            snapshots: out.into_iter().map(|(_, id)| id).collect(),
            refs: gone_refs,
        }
    }

    /// True when ref `name` (never `main`), whose snapshot is `head`, is older
    /// than its own `max-ref-age-ms`, else the table's.
    fn ref_expired(&self, name: &str, r: &SnapshotReference, head: &Snapshot, now_ms: i64) -> bool {
        let own_ref_age = match &r.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. }
            | SnapshotRetention::Tag { max_ref_age_ms } => *max_ref_age_ms,
        };
        name != MAIN_BRANCH
            && own_ref_age
                .or(self.max_ref_age_ms)
                .is_some_and(|age| now_ms.saturating_sub(head.timestamp_ms()) > age)
    }
}

/// A branch's lineage from `head`: the newest `min_keep` snapshots, which
/// stay, then the ancestors not older than `cutoff`, which are only young.
fn lineage(
    metadata: &TableMetadata,
    head: &SnapshotRef,
    min_keep: usize,
    cutoff: i64,
) -> (Vec<i64>, Vec<i64>) {
    let (mut keep, mut young) = (Vec::new(), Vec::new());
    let mut next = Some(head);
    let mut n = 0;
    while let Some(s) = next {
        if n >= min_keep && s.timestamp_ms() < cutoff {
            break;
        }
        if n < min_keep {
            keep.push(s.snapshot_id());
        } else {
            young.push(s.snapshot_id());
        }
        n += 1;
        next = s
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id));
    }
    (keep, young)
}

/// The newest `room` of the `young` snapshots; the older ones expire.
fn newest_within(metadata: &TableMetadata, mut young: HashSet<i64>, room: usize) -> HashSet<i64> {
    let mut by_age: Vec<(i64, i64)> = young
        .iter()
        .filter_map(|id| metadata.snapshot_by_id(*id))
        .map(|s| (s.timestamp_ms(), s.snapshot_id()))
        .collect();
    by_age.sort();
    let over = by_age.len().saturating_sub(room);
    for (_, id) in by_age.into_iter().take(over) {
        young.remove(&id);
    }
    young
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOUR: i64 = 60 * 60 * 1000;
    const NOW: i64 = 1_000 * HOUR;

    /// Snapshots `(id, parent, age in hours)` and refs as the spec's JSON.
    fn table(snapshots: &[(i64, Option<i64>, i64)], refs: serde_json::Value) -> TableMetadata {
        let snaps: Vec<_> = snapshots
            .iter()
            .enumerate()
            .map(|(i, (id, parent, age))| {
                let mut s = json!({
                    "snapshot-id": id,
                    "sequence-number": i + 1,
                    "timestamp-ms": NOW - age * HOUR,
                    "manifest-list": format!("file:///w/t/metadata/snap-{id}.avro"),
                    "summary": {"operation": "append"},
                    "schema-id": 0
                });
                if let Some(p) = parent {
                    s["parent-snapshot-id"] = json!(p);
                }
                s
            })
            .collect();
        let main = refs["main"]["snapshot-id"].as_i64();
        serde_json::from_value(json!({
            "format-version": 2,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "file:///w/t",
            "last-sequence-number": snapshots.len(),
            "last-updated-ms": NOW,
            "last-column-id": 1,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"}]}],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": main,
            "snapshots": snaps,
            "refs": refs,
        }))
        .unwrap()
    }

    fn rule(max_age_h: i64) -> ExpiryRule {
        ExpiryRule {
            max_age_ms: max_age_h * HOUR,
            min_keep: 1,
            max_ref_age_ms: None,
            max_snapshots: None,
        }
    }

    fn plan(meta: &TableMetadata, rule: ExpiryRule) -> Expiry {
        rule.plan(meta, &super::super::refs::of(meta).unwrap(), NOW)
    }

    #[test]
    fn refs_are_read_with_their_retention() {
        let meta = table(
            &[(1, None, 5), (2, Some(1), 4)],
            json!({"main": {"snapshot-id": 2, "type": "branch"},
                   "audit": {"snapshot-id": 1, "type": "tag", "max-ref-age-ms": 7}}),
        );
        let refs = super::super::refs::of(&meta).unwrap();
        assert_eq!(refs.keys().collect::<Vec<_>>(), ["audit", "main"]);
        assert_eq!(
            refs["audit"].retention,
            SnapshotRetention::Tag {
                max_ref_age_ms: Some(7)
            }
        );
        assert!(refs["main"].is_branch());
    }

    #[test]
    fn a_tag_and_a_branch_keep_their_snapshots_at_age_zero() {
        // 1 ← 2 ← 3 (main); 2 ← 4 ← 5 (branch wap); tag on 1.
        let meta = table(
            &[
                (1, None, 9),
                (2, Some(1), 8),
                (3, Some(2), 7),
                (4, Some(2), 6),
                (5, Some(4), 5),
            ],
            json!({"main": {"snapshot-id": 3, "type": "branch"},
                   "wap": {"snapshot-id": 5, "type": "branch"},
                   "audit-2024": {"snapshot-id": 1, "type": "tag"}}),
        );
        let e = plan(&meta, rule(0));
        assert_eq!(
            e.snapshots,
            [2, 4],
            "main keeps 3, wap keeps 5, the tag keeps 1"
        );
        assert!(e.refs.is_empty());
    }

    #[test]
    fn a_branch_keeps_its_own_minimum_and_age() {
        let meta = table(
            &[(1, None, 9), (2, Some(1), 8), (3, Some(2), 7), (4, None, 1)],
            json!({"main": {"snapshot-id": 4, "type": "branch"},
                   "b": {"snapshot-id": 3, "type": "branch", "min-snapshots-to-keep": 2}}),
        );
        assert_eq!(plan(&meta, rule(0)).snapshots, [1]);
        let meta = table(
            &[(1, None, 9), (2, Some(1), 8), (3, Some(2), 7), (4, None, 1)],
            json!({"main": {"snapshot-id": 4, "type": "branch"},
                   "b": {"snapshot-id": 3, "type": "branch", "max-snapshot-age-ms": 8 * HOUR + 1}}),
        );
        assert_eq!(
            plan(&meta, rule(0)).snapshots,
            [1],
            "2 is within b's own age"
        );
    }

    #[test]
    fn an_old_ref_goes_but_main_never_does() {
        let meta = table(
            &[(1, None, 9), (2, Some(1), 8), (3, Some(2), 7)],
            json!({"main": {"snapshot-id": 3, "type": "branch", "max-ref-age-ms": 1},
                   "old": {"snapshot-id": 1, "type": "tag", "max-ref-age-ms": HOUR},
                   "young": {"snapshot-id": 2, "type": "tag", "max-ref-age-ms": 100 * HOUR}}),
        );
        let e = plan(&meta, rule(0));
        assert_eq!(e.refs, ["old"]);
        assert_eq!(e.snapshots, [1], "young's snapshot stays, main's stays");
        // The table default applies to refs that set none.
        let meta = table(
            &[(1, None, 9), (2, Some(1), 1)],
            json!({"main": {"snapshot-id": 2, "type": "branch"},
                   "t": {"snapshot-id": 1, "type": "tag"}}),
        );
        let mut r = rule(0);
        r.max_ref_age_ms = Some(2 * HOUR);
        assert_eq!(plan(&meta, r).refs, ["t"]);
        assert_eq!(plan(&meta, rule(0)).refs, Vec::<String>::new());
    }

    #[test]
    fn a_count_limit_expires_the_oldest_young_snapshots_but_no_ref_needs() {
        // Ten young snapshots of main, 1 (oldest) tagged.
        let chain: Vec<(i64, Option<i64>, i64)> = (1..=10)
            .map(|id| (id, (id > 1).then(|| id - 1), 11 - id))
            .collect();
        let meta = table(
            &chain,
            json!({"main": {"snapshot-id": 10, "type": "branch"},
                   "audit": {"snapshot-id": 1, "type": "tag"}}),
        );
        assert!(
            plan(&meta, rule(24)).snapshots.is_empty(),
            "age alone keeps all"
        );
        let mut r = rule(24);
        r.max_snapshots = Some(4);
        assert_eq!(
            plan(&meta, r).snapshots,
            [2, 3, 4, 5, 6, 7],
            "the tag and the newest 3"
        );
        // A branch's minimum outranks the count.
        let meta = table(
            &chain,
            json!({"main": {"snapshot-id": 10, "type": "branch", "min-snapshots-to-keep": 5}}),
        );
        assert_eq!(plan(&meta, r).snapshots, [1, 2, 3, 4, 5]);
        r.min_keep = 2;
        r.max_snapshots = Some(1);
        let meta = table(
            &chain,
            json!({"main": {"snapshot-id": 10, "type": "branch"}}),
        );
        assert_eq!(plan(&meta, r).snapshots, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn young_snapshots_stay_and_main_keeps_its_minimum() {
        let meta = table(
            &[(1, None, 30), (2, Some(1), 20), (3, Some(2), 2)],
            json!({"main": {"snapshot-id": 3, "type": "branch"}}),
        );
        assert_eq!(plan(&meta, rule(24)).snapshots, [1]);
        assert_eq!(plan(&meta, rule(0)).snapshots, [1, 2]);
        let mut r = rule(0);
        r.min_keep = 2;
        assert_eq!(plan(&meta, r).snapshots, [1]);
    }
}
