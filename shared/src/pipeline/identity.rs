//! Which record of its batch's span each row came from: the data files'
//! footers name it, so a redelivery with other batch boundaries finds the
//! records a table already holds; a keyed change's position orders it
//! against the key's later changes.

use std::collections::HashMap;

use crate::change::Change;
use crate::source::{Pos, Position, Positions, SourceBatch, SourceKind, SourceSpan};
use crate::write::rows::{At, RowId};

/// Which record of its batch's span a row came from, for the data files'
/// footers and key files.
pub(super) struct Identity<'a> {
    span: Option<&'a SourceSpan>,
    ids: HashMap<&'a str, u32>,
    /// The ids are the records' positions in their shard (a Kinesis shard
    /// read in parallel), so they order its changes.
    ids_ordered: bool,
}

impl<'a> Identity<'a> {
    pub(super) fn of(batch: &'a SourceBatch) -> Self {
        let span = batch.spans.first();
        let ids = match span.map(|s| &s.positions) {
            Some(Positions::Ids { ids }) => ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i as u32))
                .collect(),
            _ => HashMap::new(),
        };
        Self {
            span,
            ids,
            ids_ordered: batch.source.kind == SourceKind::Kinesis,
        }
    }

    /// The row's record; `None` when the span names no records (an HTTP key).
    pub(super) fn row(&self, pos: Pos<'_>) -> Option<RowId> {
        let at = match (pos, self.span.map(|s| &s.positions)) {
            (Pos::Line(n), Some(Positions::Range { .. })) => At::Num(n),
            (Pos::Item(p), Some(Positions::Range { .. })) => At::position(p),
            (Pos::Item(p), Some(Positions::Ids { .. })) => At::Index(*self.ids.get(p)?),
            _ => return None,
        };
        Some(RowId { span: 0, at })
    }

    /// Where a key's change sits in its source's order: the record's
    /// position on an ordered span (or on a Kinesis shard read in parallel,
    /// whose ids are positions), else the change's own (a DynamoDB sequence
    /// number, ordered per key).
    pub(super) fn key_position(&self, pos: Pos<'_>, change: &Change) -> Option<Position> {
        match (pos, self.span.map(|s| &s.positions)) {
            (Pos::Line(n), Some(Positions::Range { .. })) => Some(Position::from(n)),
            (Pos::Item(p), Some(Positions::Range { .. })) => Position::parse(p),
            (Pos::Item(p), Some(Positions::Ids { .. })) if self.ids_ordered => Position::parse(p),
            _ => change.position.as_deref().and_then(Position::parse),
        }
    }
}
