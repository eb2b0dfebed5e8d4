//! Which record of its batch's span each row came from: the data files'
//! footers name it, so a redelivery with other batch boundaries finds the
//! records a table already holds; a keyed change's position orders it
//! against the key's later changes.

use std::collections::{BTreeMap, HashMap};

use crate::change::Change;
use crate::config::ChangeOrder;
use crate::dlq::{Origin, Replayed};
use crate::source::{Pos, Position, Positions, SourceBatch, SourceKind, SourceSpan};
use crate::write::rows::{At, RowId};

/// Which record of its batch's span a row came from, for the data files'
/// footers and key files.
pub(super) struct Identity<'a> {
    span: Option<&'a SourceSpan>,
    ids: HashMap<&'a str, u32>,
    /// What the ids say of the order of changes: a Kinesis shard read in
    /// parallel names records by their positions, a buffered POST's
    /// records begin with its receipt.
    ids_order: IdsOrder,
    /// Replayed dead letters, ordered by where they first came from.
    replayed: Option<&'a Replayed>,
    /// The key file's sources ([`key_sources`]), which
    /// [`Self::key_change`] indexes.
    key_sources: Vec<String>,
    /// What orders the table's changes across sources, when something does.
    order: Option<ChangeOrder>,
}

impl<'a> Identity<'a> {
    /// The identity of `batch`'s records, for a table whose changes `order`
    /// orders across sources (when set).
    pub(super) fn of(batch: &'a SourceBatch, order: Option<ChangeOrder>) -> Self {
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
            ids_order: match batch.source.kind {
                SourceKind::Kinesis => IdsOrder::Positions,
                SourceKind::Http => IdsOrder::Receipts,
                _ => IdsOrder::None,
            },
            replayed: batch.records.replayed(),
            key_sources: key_sources(batch, order),
            order,
        }
    }

    /// Which of [`Self::key_sources`] a key's change came from and where it
    /// sits in that source's order: a replayed dead letter's first source
    /// and position (so newer changes of that source still win), else the
    /// batch's own ([`Self::key_position`]).
    pub(super) fn key_change(&self, pos: Pos<'_>, change: &Change) -> (u16, Option<Position>) {
        if let Some(by) = self.order {
            // The table's own order, named last among the key file's sources.
            let last = u16::try_from(self.key_sources.len().saturating_sub(1)).unwrap_or(0);
            return (last, order_value(change, by));
        }
        let pos = pos.plain();
        let origin = match (pos, self.replayed) {
            (Pos::Item(id), Some(r)) => r.origin(id),
            _ => None,
        };
        let Some(o) = origin else {
            return (0, self.key_position(pos, change));
        };
        let src = self.key_sources.iter().position(|s| *s == o.source);
        let at =
            origin_position(o).or_else(|| change.position.as_deref().and_then(Position::parse));
        match src.and_then(|i| u16::try_from(i).ok()) {
            Some(i) => (i, at),
            None => (0, None),
        }
    }

    /// Whether key changes are placed in the table's change order.
    pub(super) fn ordered(&self) -> bool {
        self.order.is_some()
    }

    /// The row's record; `None` when the span names no records (an HTTP key).
    pub(super) fn row(&self, pos: Pos<'_>) -> Option<RowId> {
        let at = match (pos.plain(), self.span.map(|s| &s.positions)) {
            (Pos::Line(n), Some(Positions::Range { .. })) => At::Num(n),
            (Pos::Item(p), Some(Positions::Range { .. })) => At::position(p),
            (Pos::Item(p), Some(Positions::Ids { .. })) => At::Index(*self.ids.get(p)?),
            _ => return None,
        };
        Some(RowId { span: 0, at })
    }

    /// Where a key's change sits in its source's order: the record's
    /// position on an ordered span (or on a Kinesis shard read in parallel,
    /// whose ids are positions), the request's place in the order of
    /// receipts for HTTP, else the change's own (a DynamoDB sequence
    /// number, ordered per key).
    pub(super) fn key_position(&self, pos: Pos<'_>, change: &Change) -> Option<Position> {
        match (pos.plain(), self.span.map(|s| &s.positions)) {
            (_, Some(Positions::Key { order: Some(o), .. })) => Some(o.clone()),
            (Pos::Line(n), Some(Positions::Range { .. })) => Some(Position::from(n)),
            (Pos::Item(p), Some(Positions::Range { .. })) => Position::parse(p),
            (Pos::Item(p), Some(Positions::Ids { .. }))
                if self.ids_order == IdsOrder::Positions =>
            {
                Position::parse(p)
            }
            (Pos::Item(p), Some(Positions::Ids { .. })) if self.ids_order == IdsOrder::Receipts => {
                crate::source::receipt_of(p)
            }
            _ => change.position.as_deref().and_then(Position::parse),
        }
    }
}

/// What an unordered span's ids say of the order of its changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdsOrder {
    /// Nothing: each change's own position orders it.
    None,
    /// They are positions.
    Positions,
    /// They begin with the receipt of the request that carried them.
    Receipts,
}

/// The batch's span sources, then those replayed records first came from,
/// then the table's change order (when it has one): the sources its key
/// files name.
pub(super) fn key_sources(batch: &SourceBatch, order: Option<ChangeOrder>) -> Vec<String> {
    let mut out: Vec<String> = batch.spans.iter().map(|s| s.source.clone()).collect();
    out.extend(origin_spans(batch).into_iter().map(|s| s.source));
    out.extend(order.map(|by| by.source().to_string()));
    out
}

/// Where `change` sits in the order `by`: its source position, or its
/// event time; `None` when the change does not say.
pub(super) fn order_value(change: &Change, by: ChangeOrder) -> Option<Position> {
    match by {
        ChangeOrder::Position => change.position.as_deref().and_then(Position::parse),
        ChangeOrder::TsMs => change
            .ts_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Position::from),
    }
}

/// A replayed record's position in its first source, when that is ordered
/// (`line 5` of a file, a Kafka offset).
fn origin_position(o: &Origin) -> Option<Position> {
    let p = o.position.strip_prefix("line ").unwrap_or(&o.position);
    Position::parse(p)
}

/// For a replay of dead letters, one span per source its records first
/// came from (the range of their positions, or their ids when the source
/// has no order), sorted by source: the committer orders the replay after
/// the changes those sources committed later. Empty for other batches.
pub(super) fn origin_spans(batch: &SourceBatch) -> Vec<SourceSpan> {
    let Some(replayed) = batch.records.replayed() else {
        return Vec::new();
    };
    let mut by_source: BTreeMap<&str, Vec<&Origin>> = BTreeMap::new();
    for o in replayed.origins() {
        by_source.entry(&o.source).or_default().push(o);
    }
    by_source
        .into_iter()
        .map(|(source, origins)| {
            let ordered: Option<Vec<Position>> =
                origins.iter().map(|o| origin_position(o)).collect();
            let positions = match ordered {
                Some(p) if !p.is_empty() => Positions::Range {
                    first: p.iter().min().cloned().unwrap_or_else(|| Position::from(0)),
                    last: p.iter().max().cloned().unwrap_or_else(|| Position::from(0)),
                },
                _ => Positions::Ids {
                    ids: origins.iter().map(|o| o.position.clone()).collect(),
                },
            };
            SourceSpan {
                source: source.to_string(),
                positions,
                stream: false,
            }
        })
        .collect()
}
