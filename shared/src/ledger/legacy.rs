//! Tables committed before the ledger had files kept it in snapshot
//! summaries (`floe.batch-ids`, `floe.hwm.*`, `floe.state.*`). The first
//! commit of this build starts the head from what the current lineage still
//! records there, so nothing those snapshots hold is committed again.

use iceberg::spec::{SnapshotRef, TableMetadata};

use super::head::{Entry, Head};
use super::marks::Marks;
use super::{BATCH_IDS, HWM_PREFIX, STATE_PREFIX};
use crate::source::Position;

/// The head a table's summaries describe.
pub fn head(metadata: &TableMetadata) -> Head {
    let mut head = Head {
        version: super::head::FORMAT,
        ..Default::default()
    };
    // Oldest first, so the newest state wins and entries keep commit order.
    for snapshot in lineage(metadata).into_iter().rev() {
        let ms = snapshot.timestamp_ms();
        let props = &snapshot.summary().additional_properties;
        if let Some(ids) = props.get(BATCH_IDS) {
            head.recent.extend(batch_entries(ids, ms));
        }
        for (key, value) in props {
            if let Some(k) = key.strip_prefix(STATE_PREFIX) {
                head.state.insert(k.to_string(), value.clone());
            }
            let (Some(source), Some(pos)) = (key.strip_prefix(HWM_PREFIX), Position::parse(value))
            else {
                continue;
            };
            // The old ledger knew only the highest position: everything at or
            // below it counts as committed, as a Kafka consumer's offset does.
            let marks = head.sources.entry(source.to_string()).or_insert(Marks {
                ms,
                ..Default::default()
            });
            let hi = match marks.settled.take() {
                Some((_, hi)) => hi.max(pos),
                None => pos,
            };
            marks.settled = Some((Position::from(0), hi));
            marks.ms = marks.ms.max(ms);
        }
    }
    head
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

/// The entries a snapshot's `floe.batch-ids` summary names, committed at `ms`.
pub(super) fn batch_entries(ids: &str, ms: i64) -> impl Iterator<Item = Entry> + '_ {
    ids.split(',')
        .filter(|s| !s.is_empty())
        .map(move |id| Entry {
            ms,
            id: id.to_string(),
            at: ms,
            spans: Vec::new(),
            keys: Default::default(),
            kf: None,
        })
}
