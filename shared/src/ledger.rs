//! The idempotency ledger, kept in the table itself: every snapshot floe commits
//! names the batch ids it contains and, per ordered source, the highest position
//! committed. A request whose batch id is in the current snapshot's lineage is
//! already in the table and must not be committed again.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{SnapshotRef, TableMetadata};

use crate::request::CommitRequest;
use crate::source::{Position, SourceSpan};

/// Snapshot summary key listing the batch ids a snapshot contains, comma-separated.
pub const BATCH_IDS: &str = "floe.batch-ids";
/// Snapshot summary key prefix for per-source high-water marks (`floe.hwm.<source>`).
pub const HWM_PREFIX: &str = "floe.hwm.";
/// Snapshot summary key: number of commit requests coalesced into the snapshot.
pub const REQUESTS: &str = "floe.requests";
/// Snapshot summary key prefix for source state recorded with a commit
/// (`floe.state.<key>`, e.g. a Postgres snapshot's progress); the latest wins.
pub const STATE_PREFIX: &str = "floe.state.";

/// What the table already holds, read from the summaries of the current lineage.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    batch_ids: HashSet<String>,
    high_water: HashMap<String, Position>,
}

impl Ledger {
    /// Reads the ledger from the ancestors of the table's current snapshot.
    pub fn from_metadata(metadata: &TableMetadata) -> Self {
        let mut ledger = Ledger::default();
        for snapshot in lineage(metadata) {
            let props = &snapshot.summary().additional_properties;
            if let Some(ids) = props.get(BATCH_IDS) {
                ledger
                    .batch_ids
                    .extend(ids.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
            }
            for (key, value) in props {
                let (Some(source), Some(pos)) =
                    (key.strip_prefix(HWM_PREFIX), Position::parse(value))
                else {
                    continue;
                };
                ledger.raise(source, &pos);
            }
        }
        ledger
    }

    /// Every ordered source's highest committed position.
    pub fn high_water_marks(&self) -> impl Iterator<Item = (&String, &Position)> {
        self.high_water.iter()
    }

    /// True when the batch is already in the table.
    pub fn contains(&self, batch_id: &str) -> bool {
        self.batch_ids.contains(batch_id)
    }

    /// The highest committed position of an ordered source.
    pub fn high_water_mark(&self, source: &str) -> Option<&Position> {
        self.high_water.get(source)
    }

    fn raise(&mut self, source: &str, pos: &Position) {
        match self.high_water.get(source) {
            Some(cur) if cur >= pos => {}
            _ => {
                self.high_water.insert(source.to_owned(), pos.clone());
            }
        }
    }
}

/// The source state `key` as the latest snapshot of the current lineage that
/// recorded it has it.
pub fn state(metadata: &TableMetadata, key: &str) -> Option<String> {
    let key = format!("{STATE_PREFIX}{key}");
    lineage(metadata)
        .into_iter()
        .find_map(|s| s.summary().additional_properties.get(&key).cloned())
}

/// The source-state keys recorded anywhere in the current lineage.
pub fn state_keys(metadata: &TableMetadata) -> Vec<String> {
    let mut keys: Vec<String> = lineage(metadata)
        .into_iter()
        .flat_map(|s| s.summary().additional_properties.keys())
        .filter_map(|k| k.strip_prefix(STATE_PREFIX).map(str::to_owned))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The current snapshot and its ancestors, newest first. Expiry may remove
/// ancestors in between; the older snapshots left then follow by sequence
/// number, so what they record still counts.
fn lineage(metadata: &TableMetadata) -> Vec<&SnapshotRef> {
    let mut out = Vec::new();
    let mut next = metadata.current_snapshot_id();
    while let Some(snapshot) = next.and_then(|id| metadata.snapshot_by_id(id)) {
        out.push(snapshot);
        next = snapshot.parent_snapshot_id();
    }
    if let (Some(_), Some(last)) = (next, out.last()) {
        let floor = last.sequence_number();
        let mut older: Vec<&SnapshotRef> = metadata
            .snapshots()
            .filter(|s| s.sequence_number() < floor)
            .collect();
        older.sort_by_key(|s| std::cmp::Reverse(s.sequence_number()));
        out.extend(older);
    }
    out
}

/// The ledger entries of one snapshot holding these requests, with the source
/// state they record (a later request's value for a key wins).
pub fn summary_entries<'a>(
    requests: impl IntoIterator<Item = &'a CommitRequest>,
) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    let mut marks = Ledger::default();
    let mut states = std::collections::BTreeMap::new();
    for r in requests {
        ids.push(r.batch_id.as_str());
        states.extend(r.state.iter());
        let spans: &[SourceSpan] = &r.sources;
        for span in spans {
            if let Some(last) = span.last() {
                marks.raise(&span.source, last);
            }
        }
    }
    let mut out = vec![
        (BATCH_IDS.to_string(), ids.join(",")),
        (REQUESTS.to_string(), ids.len().to_string()),
    ];
    let mut marks: Vec<_> = marks.high_water.into_iter().collect();
    marks.sort();
    out.extend(
        marks
            .into_iter()
            .map(|(source, pos)| (format!("{HWM_PREFIX}{source}"), pos.to_string())),
    );
    out.extend(
        states
            .into_iter()
            .map(|(k, v)| (format!("{STATE_PREFIX}{k}"), v.clone())),
    );
    out
}
