//! Changelog tables: every change of a batch, unfolded and in source order, as
//! an append-only row carrying what happened (`_op`), where in the source
//! (`_position`) and when (`_ts`) ahead of the row's own columns. An audit
//! trail beside a keyed table, or instead of it.

use iceberg::TableIdent;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use crate::change::{Change, ChangeOp};
use crate::config::CHANGELOG_SUFFIX;
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
        (Some(p), _) => p.clone(),
        (None, Pos::Line(n)) => n.to_string(),
        (None, Pos::Item(p)) => p.to_string(),
    };
    let mut out = Vec::with_capacity(change.row.len() + 96);
    out.extend_from_slice(format!("{{\"{OP}\":\"{}\"", op_name(change.op)).as_bytes());
    out.extend_from_slice(format!(",\"{POSITION}\":").as_bytes());
    out.extend_from_slice(serde_json::Value::String(position).to_string().as_bytes());
    if let Some(ts) = change.ts_ms {
        out.extend_from_slice(format!(",\"{TS}\":\"{}\"", format_utc_millis(ts)).as_bytes());
    }
    // The row is a JSON object's text: splice its members in after ours.
    let inner = change
        .row
        .trim_ascii()
        .strip_prefix(b"{")
        .and_then(|r| r.strip_suffix(b"}"))
        .unwrap_or_default()
        .trim_ascii();
    if !inner.is_empty() {
        out.push(b',');
        out.extend_from_slice(inner);
    }
    out.push(b'}');
    out
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

    #[test]
    fn rows_carry_op_position_and_time_before_the_exact_row() {
        let change = Change {
            op: ChangeOp::Update,
            row: br#"{"id":1,"n":12345678901234567890.5}"#.to_vec(),
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
            row: b"{}".to_vec(),
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
