//! What one table makes of its records: rows as they came (an append-only
//! table), changes (a keyed table, a changelog) and the changelog's rows.

use std::borrow::Cow;

use super::changelog;
use super::part::Part;
use crate::change::{self, Change, ChangeFormat, ItemRow};
use crate::config::Changelog;
use crate::dlq::Rejected;
use crate::source::Pos;

/// A record with its position, borrowed from the batch unless rewritten.
pub(super) type Row<'a> = (Pos<'a>, Cow<'a, [u8]>);

/// How a table takes its records.
pub(super) struct Shape<'k> {
    /// Changes are folded per key.
    pub keyed: bool,
    /// Whether a changelog takes every change, beside or instead of the table.
    pub changelog: Changelog,
    /// The table's identifier fields, which a tombstone's key fills.
    pub key_names: &'k [String],
    /// How DynamoDB stream records become items of an append-only table.
    pub items: Option<ItemRow>,
}

/// A table's records sorted by what becomes of them.
#[derive(Default)]
pub(super) struct Classified<'a> {
    /// Rows for the table itself when it is not keyed.
    pub rows: Vec<Row<'a>>,
    /// Decoded changes for a keyed table, in source order.
    pub changes: Vec<(Pos<'a>, Change)>,
    /// The record each of `changes` came from, for its dead letter.
    pub change_records: Vec<Cow<'a, [u8]>>,
    /// Rows for the changelog table.
    pub log_rows: Vec<Row<'a>>,
}

/// `records` with those that stayed binary Avro as their JSON text (what
/// change decoding reads); one that does not render goes to `rejected`.
pub(super) fn as_json<'a>(
    records: Vec<Row<'a>>,
    part: &Part<'_>,
    rejected: &mut Vec<Rejected>,
) -> Vec<Row<'a>> {
    let Some(avro) = part.avro.as_deref() else {
        return records;
    };
    let mut out = Vec::with_capacity(records.len());
    for (pos, r) in records {
        match avro.json(&r) {
            Ok(Cow::Borrowed(_)) => out.push((pos, r)),
            Ok(Cow::Owned(json)) => out.push((pos, Cow::Owned(json))),
            Err(e) => rejected.push(part.reject(pos, &e.field, &e.reason, &r)),
        }
    }
    out
}

/// Sorts `records` for a table of `shape`; records that cannot be decoded
/// go to `rejected`.
pub(super) fn classify<'a>(
    records: Vec<Row<'a>>,
    shape: &Shape<'_>,
    part: &Part<'_>,
    rejected: &mut Vec<Rejected>,
) -> Classified<'a> {
    if !shape.keyed && shape.changelog == Changelog::Off {
        let rows = plain(records, shape.items, part, rejected);
        return Classified {
            rows,
            ..Classified::default()
        };
    }
    let mut out = Classified::default();
    for (pos, record) in &records {
        let decoded = match (pos.change(), change::tombstone_key(record)) {
            (Some(c), _) => Ok(c.clone()),
            (None, Some(key)) => change::tombstone_change(key, shape.key_names),
            (None, None) => change::decode(record, ChangeFormat::Auto),
        };
        match decoded {
            Ok(c) => {
                if shape.changelog != Changelog::Off {
                    out.log_rows
                        .push((*pos, Cow::Owned(changelog::row(&c, *pos))));
                }
                out.changes.push((*pos, c));
                out.change_records.push(record.clone());
            }
            Err(e) => rejected.push(part.reject(*pos, &e.field, &e.reason, record)),
        }
    }
    if shape.changelog == Changelog::Only {
        out.rows = std::mem::take(&mut out.log_rows);
    } else if !shape.keyed {
        // A changelog beside an append-only table: the table takes the
        // records as they came.
        out.rows = plain(records, shape.items, part, rejected);
    }
    out
}

/// The rows of an append-only table: tombstones (deletes of a Kafka key)
/// have nothing to delete there, and a DynamoDB stream record becomes its item.
fn plain<'a>(
    records: Vec<Row<'a>>,
    items: Option<ItemRow>,
    part: &Part<'_>,
    rejected: &mut Vec<Rejected>,
) -> Vec<Row<'a>> {
    let mut rows = Vec::with_capacity(records.len());
    for (pos, r) in records {
        // A change its source decoded goes in as its flat `_op` form, as
        // the record would have come from any other source.
        if let Some(c) = pos.change() {
            rows.push((pos, Cow::Owned(change::flat_line(c))));
            continue;
        }
        // Registry Avro is a row as it is: never a tombstone, never a
        // DynamoDB stream record (whose bytes it may happen to hold).
        if part.avro.as_deref().is_some_and(|a| a.binary(&r).is_some()) {
            rows.push((pos, r));
            continue;
        }
        if change::tombstone_key(&r).is_some() {
            continue;
        }
        let Some(opts) = items.filter(|_| change::is_dynamodb_record(&r)) else {
            rows.push((pos, r));
            continue;
        };
        match change::dynamodb_item(&r, opts) {
            Ok(Some(item)) => rows.push((pos, Cow::Owned(item))),
            Ok(None) => {}
            Err(e) => rejected.push(part.reject(pos, &e.field, &e.reason, &r)),
        }
    }
    rows
}
