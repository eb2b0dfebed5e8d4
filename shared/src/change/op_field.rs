//! Flat rows with an optional `_op` field (HTTP/SQS producers), which also covers rows
//! flattened by Debezium's `ExtractNewRecordState` SMT (`__op`, `__deleted`, …).

use serde_json::value::RawValue;

use super::debezium::{build_row, connect_decimals, millis, position_value};
use super::{Change, ChangeOp, Kind, Path, RawObject, fault, kind, string};
use crate::error::RecordError;

/// The fields of floe's own convention; they are metadata, so they are not written to the row.
const OWN_FIELDS: [&str; 3] = ["_op", "_ts", "_pos"];

/// Decodes a flat row; `schema` is the Kafka Connect envelope's schema, if the row came in one.
pub(super) fn decode(
    obj: &RawObject<'_>,
    schema: Option<&RawValue>,
    path: Path<'_>,
) -> Result<Change, RecordError> {
    let op_path = path.key("_op");
    let op = match obj.get_non_null("_op") {
        Some(raw) => op_word(&string(raw, op_path)?, op_path)?,
        None => unwrapped_debezium_op(obj, path)?,
    };

    // The SMT's `__source_ts_ms` / `__ts_ms` / `__lsn` stay in the row: the user asked for
    // them with `add.fields` and may well have columns for them.
    let ts_ms = match first_present(obj, &["_ts", "__source_ts_ms", "__ts_ms"]) {
        Some((key, raw)) => Some(millis(raw, path.key(key))?),
        None => None,
    };
    let position = match first_present(obj, &["_pos", "__lsn", "__source_lsn"]) {
        Some((key, raw)) => Some(position_value(raw, path.key(key))?),
        None => None,
    };

    let decimals = match schema {
        Some(schema) => connect_decimals(schema, None, Path::Root.key("schema"))?,
        None => Vec::new(),
    };
    let mut unchanged = Vec::new();
    let row = build_row(obj, path, &OWN_FIELDS, &decimals, &mut unchanged)?;
    Ok(Change {
        op,
        row,
        position,
        ts_ms,
        unchanged,
    })
}

fn first_present<'k, 'a>(obj: &RawObject<'a>, keys: &[&'k str]) -> Option<(&'k str, &'a RawValue)> {
    keys.iter()
        .find_map(|&key| obj.get_non_null(key).map(|raw| (key, raw)))
}

/// Without `_op`, honour what ExtractNewRecordState leaves behind: `__deleted: "true"` marks a
/// rewritten delete (treating it as an upsert would resurrect the row), `__op` the Debezium op.
/// A plain row is an upsert.
fn unwrapped_debezium_op(obj: &RawObject<'_>, path: Path<'_>) -> Result<ChangeOp, RecordError> {
    if let Some(raw) = obj.get_non_null("__deleted") {
        let deleted_path = path.key("__deleted");
        let deleted = match kind(raw) {
            Kind::Bool => raw.get() == "true",
            Kind::String => match &*string(raw, deleted_path)? {
                "true" => true,
                "false" => false,
                other => {
                    return Err(fault(
                        deleted_path,
                        format!("`{other}` is neither \"true\" nor \"false\""),
                    ));
                }
            },
            _ => {
                return Err(super::wrong_kind(
                    deleted_path,
                    "\"true\" or \"false\"",
                    raw,
                ));
            }
        };
        if deleted {
            return Ok(ChangeOp::Delete);
        }
    }
    if let Some(raw) = obj.get_non_null("__op") {
        let op_path = path.key("__op");
        return op_word(&string(raw, op_path)?, op_path);
    }
    Ok(ChangeOp::Insert)
}

/// Accepts Debezium letters, Iceberg Kafka Connect's `I`/`U`/`D`, and spelled-out words, in any case.
/// The word [`op_word`] reads as `op`.
pub(super) fn word(op: ChangeOp) -> &'static str {
    match op {
        ChangeOp::Insert => "c",
        ChangeOp::Update => "u",
        ChangeOp::Delete => "d",
        ChangeOp::Read => "r",
        ChangeOp::Truncate => "truncate",
    }
}

fn op_word(word: &str, path: Path<'_>) -> Result<ChangeOp, RecordError> {
    match word.to_ascii_lowercase().as_str() {
        "c" | "i" | "insert" | "create" => Ok(ChangeOp::Insert),
        "u" | "update" | "upsert" => Ok(ChangeOp::Update),
        "d" | "delete" => Ok(ChangeOp::Delete),
        "r" | "read" => Ok(ChangeOp::Read),
        "t" | "truncate" => Ok(ChangeOp::Truncate),
        _ => Err(fault(
            path,
            format!(
                "unknown op `{word}`; expected c/i/insert, u/update/upsert, d/delete, r/read or t/truncate"
            ),
        )),
    }
}
