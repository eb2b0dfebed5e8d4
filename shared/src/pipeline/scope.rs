//! The part of a source batch bound for one table, as its dead letters and
//! errors name it: the table, the (sub-)batch id and the source. A table's
//! `Part` rejects through it; routing, and a table that is missing, use it
//! before there is a part.

use crate::dlq::Rejected;
use crate::source::{Pos, SourceBatch};

/// What names a record rejected from one table's part of a batch.
pub(super) struct Scope<'b> {
    table: &'b str,
    batch_id: &'b str,
    batch: &'b SourceBatch,
}

impl<'b> Scope<'b> {
    /// The part of `batch` with id `batch_id` bound for `table` (empty when
    /// no table could be chosen).
    pub(super) fn new(table: &'b str, batch_id: &'b str, batch: &'b SourceBatch) -> Self {
        Self {
            table,
            batch_id,
            batch,
        }
    }

    /// The dead letter of the record at `pos`, refused for `reason` (at
    /// `field`, empty when the whole record is at fault).
    pub(super) fn reject(
        &self,
        pos: Pos<'_>,
        field: &str,
        reason: &str,
        record: &[u8],
    ) -> Rejected {
        // A record that stayed binary Avro is kept as the JSON the registry
        // path writes for it; one that does not render, as it came. A
        // change its source decoded is kept in the flat `_op` form, which
        // replays as the same change.
        let flat = pos.change().map(crate::change::flat_line);
        let json = crate::avro::json_of(self.batch.avro.as_deref(), record);
        let record = match &flat {
            Some(line) => line,
            None => json.as_deref().unwrap_or(record),
        };
        let pos = pos.plain();
        let (text, base64) = Rejected::encode_record(record);
        // A replayed record rejected again keeps its first source and position.
        let origin = match (pos, self.batch.records.replayed()) {
            (Pos::Item(id), Some(replayed)) => replayed.origin(id),
            _ => None,
        };
        let (source, position, replays) = match origin {
            Some(o) => (o.source.clone(), o.position.clone(), o.replays + 1),
            None => (
                // A span names the source as the ledger does (`sqs:queue`).
                self.batch
                    .spans
                    .first()
                    .map(|s| s.source.clone())
                    .unwrap_or_else(|| self.batch.source.name.clone()),
                pos.to_string(),
                0,
            ),
        };
        Rejected {
            table: self.table.to_string(),
            batch_id: self.batch_id.to_string(),
            source,
            position,
            field: field.to_string(),
            reason: reason.to_string(),
            record: text,
            record_base64: base64,
            replays,
        }
    }
}
