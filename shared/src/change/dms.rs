//! AWS DMS records as its Kinesis and Kafka targets write them:
//! `{"data":{…},"metadata":{"operation":"insert","timestamp":"…",…}}`.

use super::{Change, ChangeOp, Path, RawObject, fault, object, parse_timestamp_ms, string};
use crate::error::RecordError;
use crate::row::RowWriter;

/// Decodes one DMS record.
pub(super) fn decode(root: &RawObject<'_>) -> Result<Change, RecordError> {
    let metadata_path = Path::Root.key("metadata");
    let metadata_raw = root.get_non_null("metadata").ok_or_else(|| {
        fault(
            metadata_path,
            "missing: every DMS record has a `metadata` object",
        )
    })?;
    let metadata = object(metadata_raw, metadata_path)?;

    let operation_path = metadata_path.key("operation");
    let operation = match metadata.get_non_null("operation") {
        Some(raw) => Some(string(raw, operation_path)?),
        None => None,
    };
    check_data_record(&metadata, metadata_path, operation.as_deref())?;

    let operation = operation.ok_or_else(|| {
        fault(
            operation_path,
            "missing: a DMS data record says insert, update, delete or load",
        )
    })?;
    let op = match operation.to_ascii_lowercase().as_str() {
        "insert" => ChangeOp::Insert,
        "update" => ChangeOp::Update,
        "delete" => ChangeOp::Delete,
        "load" => ChangeOp::Read,
        _ => {
            return Err(fault(
                operation_path,
                format!(
                    "unknown DMS operation `{operation}`; expected insert, update, delete or load"
                ),
            ));
        }
    };

    // `data` is the row after the change, and for deletes the deleted row; `before-image`
    // (BeforeImageSettings) only repeats old values and is ignored.
    let data_path = Path::Root.key("data");
    let data_raw = root.get_non_null("data").ok_or_else(|| {
        fault(
            data_path,
            format!("missing or null on a DMS `{operation}` record; it must hold the row"),
        )
    })?;
    let data = object(data_raw, data_path)?;
    let size: usize = data.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum();
    let mut row = RowWriter::with_capacity(size);
    for (key, value) in data.iter() {
        row.raw(key, value.get().as_bytes());
    }

    let ts_ms = timestamp_ms(&metadata, metadata_path)?;

    Ok(Change {
        op,
        row: row.finish(),
        position: None,
        ts_ms,
        unchanged: Vec::new(),
    })
}

/// Refuses a record whose `record-type` is not `data`: a control record
/// (named by its `operation`) carries no row.
fn check_data_record(
    metadata: &RawObject<'_>,
    metadata_path: Path<'_>,
    operation: Option<&str>,
) -> Result<(), RecordError> {
    let record_type_path = metadata_path.key("record-type");
    if let Some(raw) = metadata.get_non_null("record-type") {
        let record_type = string(raw, record_type_path)?;
        if record_type.eq_ignore_ascii_case("control") {
            let what = operation.unwrap_or("unknown");
            return Err(fault(
                record_type_path,
                format!(
                    "DMS control record (operation `{what}`) carries table/DDL events, not a row; \
                     handle or skip control records before decoding"
                ),
            ));
        }
        if !record_type.eq_ignore_ascii_case("data") {
            return Err(fault(
                record_type_path,
                format!("unknown DMS record type `{record_type}`; expected `data` or `control`"),
            ));
        }
    }
    Ok(())
}

/// The record's `timestamp`, in ms since the epoch.
fn timestamp_ms(
    metadata: &RawObject<'_>,
    metadata_path: Path<'_>,
) -> Result<Option<i64>, RecordError> {
    let timestamp_path = metadata_path.key("timestamp");
    Ok(match metadata.get_non_null("timestamp") {
        Some(raw) => {
            let text = string(raw, timestamp_path)?;
            Some(parse_timestamp_ms(&text).ok_or_else(|| {
                fault(
                    timestamp_path,
                    format!(
                        "`{text}` is not an ISO 8601 timestamp like 2026-11-30T10:00:00.123456Z"
                    ),
                )
            })?)
        }
        None => None,
    })
}
