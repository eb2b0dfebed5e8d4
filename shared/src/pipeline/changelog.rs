//! Changelog tables: every change of a batch, unfolded and in source order, as
//! an append-only row carrying what happened (`_op`), where in the source
//! (`_position`) and when (`_ts`) ahead of the row's own columns. An audit
//! trail beside a keyed table, or instead of it.

use std::borrow::Cow;

use iceberg::TableIdent;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use crate::change::{Change, ChangeOp};
use crate::config::CHANGELOG_SUFFIX;
use crate::row::RowWriter;
use crate::shred::format_utc_millis;
use crate::source::Pos;

/// The operation column.
pub const OP: &str = "_op";
/// The source position column (an LSN, offset or line number, as decimal text).
pub const POSITION: &str = "_position";
/// The event time column.
pub const TS: &str = "_ts";

/// The changelog table kept beside `table`.
pub fn table_of(table: &TableIdent) -> TableIdent {
    TableIdent::new(
        table.namespace().clone(),
        format!("{}{CHANGELOG_SUFFIX}", table.name()),
    )
}

/// The word written to `_op`.
pub fn op_name(op: ChangeOp) -> &'static str {
    match op {
        ChangeOp::Insert => "insert",
        ChangeOp::Update => "update",
        ChangeOp::Delete => "delete",
        ChangeOp::Read => "read",
        ChangeOp::Truncate => "truncate",
    }
}

/// The changelog row of one change: its metadata, then the row's columns as
/// their exact source text.
pub fn row(change: &Change, pos: Pos<'_>) -> Vec<u8> {
    let position = match (&change.position, pos) {
        (Some(p), _) => Cow::Borrowed(p.as_str()),
        (None, Pos::Line(n)) => Cow::Owned(n.to_string()),
        (None, Pos::Item(p)) => Cow::Borrowed(p),
        (None, Pos::Change(_)) => Cow::Borrowed(""),
    };
    let mut out = RowWriter::with_capacity(change.row.as_bytes().len() + 96);
    out.string(OP, op_name(change.op));
    out.string(POSITION, &position);
    if let Some(ts) = change.ts_ms {
        out.string(TS, &format_utc_millis(ts));
    }
    out.copy(&change.row, |_| true);
    out.finish().into_bytes()
}

/// The changelog table's schema for a keyed table's: the metadata columns,
/// then every column of `main` as optional, with no identifier fields.
pub fn schema(main: &Schema) -> iceberg::Result<Schema> {
    let next = main.highest_field_id();
    let meta = [
        (OP, PrimitiveType::String),
        (POSITION, PrimitiveType::String),
        (TS, PrimitiveType::Timestamptz),
    ];
    let mut fields: Vec<_> = meta
        .into_iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            NestedField::optional(next + 1 + i as i32, name, Type::Primitive(ty)).into()
        })
        .collect();
    fields.extend(main.as_struct().fields().iter().map(|f| {
        let mut f = f.as_ref().clone();
        f.required = false;
        f.into()
    }));
    Schema::builder().with_fields(fields).build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Row;

    #[test]
    fn rows_carry_op_position_and_time_before_the_exact_row() {
        let change = Change {
            op: ChangeOp::Update,
            row: {
                let mut w = RowWriter::with_capacity(0);
                w.raw("id", b"1");
                w.raw("n", b"12345678901234567890.5");
                w.finish()
            },
            position: Some("42".into()),
            ts_ms: Some(0),
            unchanged: vec![],
        };
        assert_eq!(
            std::str::from_utf8(&row(&change, Pos::Line(3))).unwrap(),
            r#"{"_op":"update","_position":"42","_ts":"1970-01-01T00:00:00.000Z","id":1,"n":12345678901234567890.5}"#
        );
        let truncate = Change {
            op: ChangeOp::Truncate,
            row: Row::default(),
            position: None,
            ts_ms: None,
            unchanged: vec![],
        };
        assert_eq!(
            std::str::from_utf8(&row(&truncate, Pos::Line(7))).unwrap(),
            r#"{"_op":"truncate","_position":"7"}"#
        );
    }
}
