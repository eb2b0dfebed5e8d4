//! Turns one change-data-capture record (Debezium, AWS DMS, DynamoDB Streams, or a flat
//! record with an `_op` field) into a normalized [`Change`].
//!
//! Rows are never round-tripped through `serde_json::Value`: without the
//! `arbitrary_precision` feature that would turn `123456789012345678901234.5678` into an
//! `f64` and reject `1e400` outright. Instead objects are split into borrowed
//! [`RawValue`]s and the row is re-assembled from the exact source text.

mod debezium;
mod dms;
mod dynamodb;
mod op_field;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::RecordError;
use crate::field_path::Path;
use crate::row::{Row, RowWriter};

/// What a change does to the row with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    /// A new row (Debezium `c`, DMS `insert`, DynamoDB `INSERT`).
    Insert,
    /// A new version of an existing row (Debezium `u`, DMS `update`, DynamoDB `MODIFY`).
    Update,
    /// The row with this key is gone (Debezium `d`, DMS `delete`, DynamoDB `REMOVE`).
    Delete,
    /// A snapshot read (Debezium `r`, DMS `load`): an upsert.
    Read,
    /// Every row of the table is gone (Debezium `t`, Postgres TRUNCATE); the row is `{}`.
    Truncate,
}

/// One change, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What the change does.
    pub op: ChangeOp,
    /// The row after the change as a JSON object text (for Delete: the row before, or at least its key columns), ready for a JSON→columns shredder.
    pub row: Row,
    /// Source position for ordering, a decimal string without leading zeros (Debezium `source.lsn`/`pos`/`scn`/`change_lsn`/`sequence`, DynamoDB `SequenceNumber`; DMS has none).
    pub position: Option<String>,
    /// Event time, ms since epoch (Debezium `source.ts_ms` else `ts_ms`, DMS `metadata.timestamp`, DynamoDB `ApproximateCreationDateTime`, `_ts`).
    pub ts_ms: Option<i64>,
    /// Columns the event says were left out because unchanged (Postgres TOAST placeholders, removed from `row`); the writer must keep their old values.
    pub unchanged: Vec<String>,
}

/// Which record format [`decode`] expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChangeFormat {
    /// Pick the format from the record's shape.
    #[default]
    Auto,
    /// Debezium JSON, with or without the Kafka Connect `{"schema":…,"payload":…}` envelope.
    Debezium,
    /// AWS DMS Kinesis/Kafka target JSON (`{"data":…,"metadata":…}`).
    Dms,
    /// One element of a DynamoDB Streams Lambda event's `Records`.
    DynamoDb,
    /// A flat row with an optional `_op` field.
    OpField,
}

/// `reason` as the fault of the field at `path`.
fn fault(path: Path<'_>, reason: impl Into<String>) -> RecordError {
    RecordError::change(path.render(), reason)
}

/// The field that marks a log-compaction tombstone (a Kafka record with a
/// null value) the event decoder kept for its key: `{"__floe_tombstone": KEY}`
/// where KEY is the record key as JSON (an object of key fields, or a scalar).
pub const TOMBSTONE: &str = "__floe_tombstone";

/// How a tombstone record starts: `{"__floe_tombstone":`.
const TOMBSTONE_PREFIX: &str = "{\"__floe_tombstone\":";

/// The record a tombstone with record key `key` (its bytes) becomes.
pub fn tombstone_record(key: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(key);
    let key = text.trim();
    let json = if serde_json::from_str::<&RawValue>(key).is_ok() {
        key.to_string()
    } else {
        serde_json::Value::String(key.to_string()).to_string()
    };
    format!("{TOMBSTONE_PREFIX}{json}}}").into_bytes()
}

/// The key of a tombstone record; `None` for any other record.
pub fn tombstone_key(record: &[u8]) -> Option<&str> {
    // Every record of every batch is asked: compare bytes, allocate nothing,
    // and check UTF-8 only of a tombstone's key.
    let key = record
        .strip_prefix(TOMBSTONE_PREFIX.as_bytes())?
        .strip_suffix(b"}")?;
    std::str::from_utf8(key).ok()
}

/// The delete a tombstone makes on a keyed table with identifier fields
/// `key_names`: the key's fields (unwrapped from a Kafka Connect
/// `schema`/`payload` envelope), or, for a key that is one value, that value
/// as the only identifier field.
pub fn tombstone_change(key: &str, key_names: &[String]) -> Result<Change, RecordError> {
    let at = |reason: String| RecordError::change("", reason);
    let row = match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(key) {
        Ok(mut fields) => match (fields.remove("payload"), fields.contains_key("schema")) {
            (Some(serde_json::Value::Object(payload)), true) => Row::from_map(&payload),
            (payload, _) => {
                if let Some(p) = payload {
                    fields.insert("payload".into(), p);
                }
                Row::from_map(&fields)
            }
        },
        Err(_) => match key_names {
            [only] => {
                let value: &RawValue = serde_json::from_str(key)
                    .map_err(|e| at(format!("tombstone key is not JSON: {e}")))?;
                let mut row = RowWriter::with_capacity(key.len() + only.len() + 4);
                row.raw(only, value.get().as_bytes());
                row.finish()
            }
            _ => {
                return Err(at(format!(
                    "a tombstone's key {key} is one value, but the table's key has {} fields; send the key as a JSON object of them",
                    key_names.len()
                )));
            }
        },
    };
    Ok(Change {
        op: ChangeOp::Delete,
        row,
        position: None,
        ts_ms: None,
        unchanged: Vec::new(),
    })
}

/// How a DynamoDB stream record becomes a row of an append-only table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemRow {
    /// `REMOVE` records become rows of their old image (or key), else nothing.
    pub keep_removes: bool,
    /// Prefix the item with `_event_name`, `_sequence_number` and
    /// `_approximate_creation_time`.
    pub metadata: bool,
}

/// The names of the columns [`ItemRow`] adds, in order.
pub const ITEM_METADATA: [&str; 3] = [
    "_event_name",
    "_sequence_number",
    "_approximate_creation_time",
];

/// The row an append-only table takes from one DynamoDB Streams record:
/// the item (`NewImage` for INSERT and MODIFY, `OldImage` or the key for a
/// kept REMOVE) with its attribute values unmarshalled; `None` for a
/// REMOVE that `opts` skips. A kept REMOVE, or `opts.metadata`, adds the
/// event name so a reader can tell removes from puts.
pub fn dynamodb_item(record: &[u8], opts: ItemRow) -> Result<Option<Vec<u8>>, RecordError> {
    let change = decode(record, ChangeFormat::DynamoDb)?;
    if change.op == ChangeOp::Delete && !opts.keep_removes {
        return Ok(None);
    }
    if !opts.metadata && !opts.keep_removes {
        return Ok(Some(change.row.into_bytes()));
    }
    let name = match change.op {
        ChangeOp::Insert => "INSERT",
        ChangeOp::Delete => "REMOVE",
        _ => "MODIFY",
    };
    let mut row = RowWriter::with_capacity(change.row.as_bytes().len() + 128);
    row.string(ITEM_METADATA[0], name);
    if opts.metadata {
        // Sequence numbers run past 64 bits: kept as text.
        if let Some(seq) = &change.position {
            row.string(ITEM_METADATA[1], seq);
        }
        if let Some(ms) = change.ts_ms {
            row.string(ITEM_METADATA[2], &crate::shred::format_utc_millis(ms));
        }
    }
    // The item's own attributes follow.
    row.copy(&change.row, |_| true);
    Ok(Some(row.finish().into_bytes()))
}

/// True when `record` is one element of a DynamoDB Streams event (its
/// `eventSource` says `aws:dynamodb`), a cheap test before [`dynamodb_item`].
pub fn is_dynamodb_record(record: &[u8]) -> bool {
    memchr::memmem::find(record, b"\"aws:dynamodb\"").is_some()
        && memchr::memmem::find(record, b"\"dynamodb\"").is_some()
}

/// `change` in floe's flat `_op` form (what [`decode`] reads back as the
/// same change): its op, time and position, its row's columns, and each
/// unchanged column as Debezium's placeholder.
pub fn flat_line(change: &Change) -> Vec<u8> {
    let mut out = RowWriter::with_capacity(change.row.as_bytes().len() + 64);
    out.string("_op", op_field::word(change.op));
    if let Some(ts) = change.ts_ms {
        out.raw("_ts", ts.to_string().as_bytes());
    }
    match &change.position {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            out.raw("_pos", p.as_bytes())
        }
        Some(p) => out.string("_pos", p),
        None => {}
    }
    out.copy(&change.row, |_| true);
    for column in &change.unchanged {
        out.string(column, PLACEHOLDER);
    }
    out.finish().into_bytes()
}

/// Decodes one source record into a normalized change.
pub fn decode(record: &[u8], format: ChangeFormat) -> Result<Change, RecordError> {
    let text = std::str::from_utf8(record)
        .map_err(|e| fault(Path::Root, format!("record is not valid UTF-8 ({e})")))?;
    let text = text.trim_matches(is_json_whitespace);
    if text.is_empty() || text == "null" {
        return Err(empty_record(format));
    }
    let root = parse_object(text, Path::Root)?;
    match format {
        ChangeFormat::Auto => decode_auto(&root),
        ChangeFormat::Debezium => debezium::decode(&root),
        ChangeFormat::Dms => dms::decode(&root),
        ChangeFormat::DynamoDb => dynamodb::decode(&root),
        ChangeFormat::OpField => match connect_envelope(&root) {
            Some((payload, schema)) => {
                let path = Path::Root.key("payload");
                let payload = object_or_tombstone(payload, path)?;
                op_field::decode(&payload, schema, path)
            }
            None => op_field::decode(&root, None, Path::Root),
        },
    }
}

/// The error for an empty or `null` record; for Kafka-borne formats that is a tombstone.
fn empty_record(format: ChangeFormat) -> RecordError {
    match format {
        ChangeFormat::Auto | ChangeFormat::Debezium | ChangeFormat::OpField => {
            tombstone(Path::Root)
        }
        ChangeFormat::Dms | ChangeFormat::DynamoDb => fault(
            Path::Root,
            "record is empty or `null`; there is no change to decode",
        ),
    }
}

fn tombstone(path: Path<'_>) -> RecordError {
    fault(
        path,
        "tombstone: an empty or `null` value is Kafka's log-compaction marker, not a change \
         (Debezium already sent the delete as its own event); skip it",
    )
}

fn decode_auto(root: &RawObject<'_>) -> Result<Change, RecordError> {
    if let Some((payload, schema)) = connect_envelope(root) {
        let path = Path::Root.key("payload");
        let payload = object_or_tombstone(payload, path)?;
        // Kafka Connect's JsonConverter wraps both raw Debezium envelopes and rows
        // flattened by ExtractNewRecordState; the payload's own shape tells them apart.
        return if looks_like_debezium(&payload) {
            debezium::decode_payload(&payload, schema, path)
        } else {
            op_field::decode(&payload, schema, path)
        };
    }
    if looks_like_debezium(root) {
        return debezium::decode_payload(root, None, Path::Root);
    }
    if looks_like_dms(root) {
        return dms::decode(root);
    }
    if root.get("eventName").is_some()
        && root
            .get("dynamodb")
            .is_some_and(|v| kind(v) == Kind::Object)
    {
        return dynamodb::decode(root);
    }
    if root.len() == 1 && root.get("Records").is_some_and(|v| kind(v) == Kind::Array) {
        // Writing a whole Lambda batch as one row with a `Records` column would be silent garbage.
        return Err(fault(
            Path::Root.key("Records"),
            "this is a whole Lambda/stream batch; decode each element of `Records` on its own",
        ));
    }
    op_field::decode(root, None, Path::Root)
}

/// Kafka Connect's JsonConverter (schemas.enable=true) emits exactly `{"schema":…,"payload":…}`;
/// requiring nothing else keeps a plain row that merely has a `payload` column out.
fn connect_envelope<'a>(root: &RawObject<'a>) -> Option<(&'a RawValue, Option<&'a RawValue>)> {
    let payload = root.get("payload")?;
    if root.iter().all(|(k, _)| k == "payload" || k == "schema")
        && matches!(kind(payload), Kind::Object | Kind::Null)
    {
        Some((
            payload,
            root.get("schema").filter(|s| kind(s) != Kind::Null),
        ))
    } else {
        None
    }
}

fn object_or_tombstone<'a>(
    raw: &'a RawValue,
    path: Path<'_>,
) -> Result<RawObject<'a>, RecordError> {
    if kind(raw) == Kind::Null {
        return Err(tombstone(path));
    }
    object(raw, path)
}

/// Debezium always sends `source` (and `before`/`after` for row events) next to a one-letter `op`.
fn looks_like_debezium(obj: &RawObject<'_>) -> bool {
    let op_is_letter = obj
        .get("op")
        .and_then(|op| string(op, Path::Root).ok())
        .is_some_and(|op| matches!(&*op, "c" | "u" | "d" | "r" | "t" | "m"));
    op_is_letter
        && ["before", "after", "source"]
            .iter()
            .any(|k| obj.get(k).is_some())
}

/// DMS data records have `data` + `metadata.operation`; control records have no `data`
/// but say `metadata.record-type`.
fn looks_like_dms(obj: &RawObject<'_>) -> bool {
    let Some(metadata) = obj.get("metadata").and_then(|m| object(m, Path::Root).ok()) else {
        return false;
    };
    metadata.get("operation").is_some()
        && (obj.get("data").is_some() || metadata.get("record-type").is_some())
}

// ---------------------------------------------------------------------------------------
// Borrowed JSON access.

/// A JSON string, borrowed from the input when it has no escapes.
struct Text<'a>(Cow<'a, str>);

// Generic over `'de: 'a` so `#[serde(borrow)]` fields of derived structs can hold it.
impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor(std::marker::PhantomData))
    }
}

/// A JSON object split one level deep: keys decoded, values kept as their exact source text.
pub(crate) struct RawObject<'a> {
    entries: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ObjectVisitor<'a> {
            type Value = RawObject<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Text(key)) = map.next_key::<Text<'a>>()? {
                    let value: &'a RawValue = map.next_value()?;
                    entries.push((key, value));
                }
                Ok(RawObject { entries })
            }
        }
        deserializer.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

impl<'a> RawObject<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Like `get`, but an explicit `null` counts as absent.
    fn get_non_null(&self, key: &str) -> Option<&'a RawValue> {
        self.get(key).filter(|v| kind(v) != Kind::Null)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> + '_ {
        self.entries.iter().map(|(k, v)| (&**k, *v))
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// A key that appears twice makes the row ambiguous (parsers disagree on which wins).
    fn duplicate_key(&self) -> Option<&str> {
        let keys: Vec<&str> = self.entries.iter().map(|(k, _)| &**k).collect();
        if keys.len() <= 32 {
            for (i, a) in keys.iter().enumerate() {
                if keys[i + 1..].contains(a) {
                    return Some(a);
                }
            }
            None
        } else {
            let mut sorted = keys;
            sorted.sort_unstable();
            sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
        }
    }
}

/// The JSON type of a raw value, read from its first byte (serde_json already validated it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

fn kind(raw: &RawValue) -> Kind {
    match raw.get().as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn parse_error(path: Path<'_>, e: serde_json::Error) -> RecordError {
    fault(path, format!("not valid JSON: {e}"))
}

fn wrong_kind(path: Path<'_>, expected: &str, raw: &RawValue) -> RecordError {
    fault(
        path,
        format!("expected {expected}, found {}", kind(raw).name()),
    )
}

/// Parses the top-level record text, which must be one JSON object.
fn parse_object<'a>(text: &'a str, path: Path<'_>) -> Result<RawObject<'a>, RecordError> {
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| parse_error(path, e))?;
    object(raw, path)
}

fn object<'a>(raw: &'a RawValue, path: Path<'_>) -> Result<RawObject<'a>, RecordError> {
    if kind(raw) != Kind::Object {
        return Err(wrong_kind(path, "a JSON object", raw));
    }
    let obj: RawObject<'a> = serde_json::from_str(raw.get()).map_err(|e| parse_error(path, e))?;
    if let Some(key) = obj.duplicate_key() {
        return Err(fault(
            path.key(key),
            "key appears more than once in the same object; which value is meant is ambiguous",
        ));
    }
    Ok(obj)
}

fn array<'a>(raw: &'a RawValue, path: Path<'_>) -> Result<Vec<&'a RawValue>, RecordError> {
    if kind(raw) != Kind::Array {
        return Err(wrong_kind(path, "an array", raw));
    }
    serde_json::from_str(raw.get()).map_err(|e| parse_error(path, e))
}

fn string<'a>(raw: &'a RawValue, path: Path<'_>) -> Result<Cow<'a, str>, RecordError> {
    if kind(raw) != Kind::String {
        return Err(wrong_kind(path, "a string", raw));
    }
    serde_json::from_str::<Text<'a>>(raw.get())
        .map(|t| t.0)
        .map_err(|e| parse_error(path, e))
}

// ---------------------------------------------------------------------------------------
// Postgres TOAST placeholders.

/// Debezium's default `unavailable.value.placeholder`.
const PLACEHOLDER: &str = "__debezium_unavailable_value";
/// The placeholder's bytes as a bytea column shows them: base64 (JsonConverter, `base64`,
/// `base64-url-safe`) and `hex` binary handling modes.
const PLACEHOLDER_BASE64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";
const PLACEHOLDER_HEX: &str = "5f5f646562657a69756d5f756e617661696c61626c655f76616c7565";
/// `uuid[]` columns carry `UUID.nameUUIDFromBytes(placeholder)` as their single element.
const PLACEHOLDER_UUID: &str = "b68a35a7-17ad-35b3-af2a-ae46edb4545a";
/// hstore in `json` handling mode is the map `{placeholder: placeholder}` as a JSON string.
const PLACEHOLDER_HSTORE_JSON: &str =
    "{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}";
/// PostGIS placeholders: WKB of `SRID=4326;POINT(-99999999 -99999999)` (geometry) and
/// `SRID=4326;POINT(179.999999 89.999999)` (geography), base64 as JsonConverter writes bytes.
const PLACEHOLDER_GEOMETRY_WKB: &str = "AQEAACDmEAAAAAAA/IPXl8EAAAD8g9eXwQ==";
const PLACEHOLDER_GEOGRAPHY_WKB: &str = "AQEAACDmEAAADCHn/f9/ZkAYQs77/39WQA==";
/// Debezium's `point` placeholder coordinates.
const PLACEHOLDER_POINT_COORD: f64 = -99_999_999.0;

/// Substrings every placeholder shape of a kind contains; checked before parsing anything,
/// since nearly every column is not a placeholder.
const STRING_MARKERS: [&str; 3] = ["__debezium", "X19kZWJl", "5f5f6465"];
const ARRAY_MARKERS: [&str; 5] = ["__debezium", "X19kZWJl", "5f5f6465", "b68a35a7", "95"];
const OBJECT_MARKERS: [&str; 3] = ["__debezium", "wkb", "9999999"];

/// Whether a top-level column value is one of the shapes Debezium gives an unchanged
/// TOASTed column (string, bytes, array, hstore and PostGIS forms of the placeholder).
fn is_unavailable_placeholder(raw: &RawValue) -> bool {
    let text = raw.get();
    let marked = |markers: &[&str]| markers.iter().any(|m| text.contains(m));
    // Every placeholder shape is short; the caps keep large real values from being parsed again.
    match kind(raw) {
        Kind::String if text.len() <= 96 && marked(&STRING_MARKERS) => string(raw, Path::Root)
            .is_ok_and(|s| {
                matches!(
                    &*s,
                    PLACEHOLDER | PLACEHOLDER_BASE64 | PLACEHOLDER_HEX | PLACEHOLDER_HSTORE_JSON
                )
            }),
        Kind::Array if text.len() <= 512 && marked(&ARRAY_MARKERS) => {
            array(raw, Path::Root).is_ok_and(|items| match items.as_slice() {
                [one] => string(one, Path::Root).is_ok_and(|s| {
                    matches!(
                        &*s,
                        PLACEHOLDER | PLACEHOLDER_BASE64 | PLACEHOLDER_HEX | PLACEHOLDER_UUID
                    )
                }),
                // Numeric arrays carry one element per placeholder byte (`[95,95,100,…]`).
                items if items.len() == PLACEHOLDER.len() => {
                    items.iter().zip(PLACEHOLDER.bytes()).all(|(item, byte)| {
                        kind(item) == Kind::Number
                            && item
                                .get()
                                .parse::<f64>()
                                .is_ok_and(|n| n == f64::from(byte))
                    })
                }
                _ => false,
            })
        }
        Kind::Object if text.len() <= 512 && marked(&OBJECT_MARKERS) => object(raw, Path::Root)
            .is_ok_and(|obj| {
                let str_is = |key: &str, expected: &[&str]| {
                    obj.get(key)
                        .and_then(|v| string(v, Path::Root).ok())
                        .is_some_and(|s| expected.contains(&&*s))
                };
                // Comparing as f64 is fine here: this only recognizes a constant, the value is dropped.
                let coord_is_placeholder = |key: &str| {
                    obj.get(key)
                        .filter(|v| kind(v) == Kind::Number)
                        .is_some_and(|v| {
                            v.get()
                                .parse::<f64>()
                                .is_ok_and(|n| n == PLACEHOLDER_POINT_COORD)
                        })
                };
                (obj.len() == 1 && str_is(PLACEHOLDER, &[PLACEHOLDER]))
                    || str_is(
                        "wkb",
                        &[PLACEHOLDER_GEOMETRY_WKB, PLACEHOLDER_GEOGRAPHY_WKB],
                    )
                    || (coord_is_placeholder("x") && coord_is_placeholder("y"))
            }),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Numbers and times, all without going through f64.

/// Whether `s` is exactly a JSON number (RFC 8259 grammar).
fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    i == b.len()
}

/// An unsigned decimal integer without leading zeros, so positions compare by (length, text).
fn canonical_unsigned(s: &str) -> Option<String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = s.trim_start_matches('0');
    Some(if trimmed.is_empty() {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    })
}

/// `floor(number × 10^pow10)` as i64, computed on the decimal digits; None if `text` is not
/// a JSON number or the result does not fit.
fn scaled_integer(text: &str, pow10: i32) -> Option<i64> {
    if !is_json_number(text) {
        return None;
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, "0"),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // Exponents beyond ±10^6 are clamped: anything that large over- or underflows i64 anyway.
    let exponent: i64 = {
        let (sign, digits) = match exponent.as_bytes().first() {
            Some(b'-') => (-1, &exponent[1..]),
            Some(b'+') => (1, &exponent[1..]),
            _ => (1, exponent),
        };
        let digits = digits.trim_start_matches('0');
        let magnitude = if digits.len() > 7 {
            10_000_000
        } else {
            digits.parse::<i64>().unwrap_or(0)
        };
        sign * magnitude
    };
    let digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    let shift = exponent - frac_part.len() as i64 + i64::from(pow10);
    let (kept, dropped) = if shift >= 0 {
        (digits.as_slice(), &[][..])
    } else {
        let keep = (digits.len() as i64 + shift).max(0) as usize;
        digits.split_at(keep)
    };
    let mut value: i128 = 0;
    for &d in kept {
        value = value.checked_mul(10)?.checked_add(i128::from(d))?;
    }
    if shift > 0 && value != 0 {
        for _ in 0..shift {
            value = value.checked_mul(10)?;
            if value > i128::from(i64::MAX) + 1 {
                return None;
            }
        }
    }
    if negative {
        value = -value;
        if dropped.iter().any(|&d| d != 0) {
            value -= 1;
        }
    }
    i64::try_from(value).ok()
}

/// Parses an RFC 3339 / ISO 8601 timestamp (`2026-11-30T10:00:00.123456Z`) to ms since the
/// epoch, truncating sub-millisecond digits. A missing offset means UTC (DMS writes UTC).
pub(crate) fn parse_timestamp_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |range| digits(b, range);
    let year = num(0..4)?;
    let month = num(5..7)?;
    let day = num(8..10)?;
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let hour = num(11..13)?;
    let minute = num(14..16)?;
    if b.get(13) != Some(&b':') {
        return None;
    }
    let mut i = 16;
    let mut second = 0;
    if b.get(16) == Some(&b':') {
        second = num(17..19)?;
        i = 19;
    }
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        (millis, i) = fraction_ms(b, i + 1)?;
    }
    let offset_minutes = offset_minutes(b, i)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1_000 + millis)
}

/// The decimal number in `b[range]`, all of it digits.
fn digits(b: &[u8], range: std::ops::Range<usize>) -> Option<i64> {
    let part = b.get(range)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        part.iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
    )
}

/// The fraction of a second whose digits start at `b[start]`, in whole ms
/// (digits past the third truncated), and the index after its last digit.
fn fraction_ms(b: &[u8], start: usize) -> Option<(i64, usize)> {
    let mut millis = 0;
    let mut i = start;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        if i - start < 3 {
            millis = millis * 10 + i64::from(b[i] - b'0');
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    for _ in (i - start)..3 {
        millis *= 10;
    }
    Some((millis, i))
}

/// The UTC offset that ends the timestamp at `b[i..]`, in minutes: none or
/// `Z` is UTC, else `±hh`, `±hhmm` or `±hh:mm`.
fn offset_minutes(b: &[u8], i: usize) -> Option<i64> {
    let num = |range| digits(b, range);
    match b.get(i) {
        None => Some(0),
        Some(b'Z' | b'z') if i + 1 == b.len() => Some(0),
        Some(&sign @ (b'+' | b'-')) => {
            let oh = num(i + 1..i + 3)?;
            let om = match b.len() - (i + 3) {
                0 => 0,
                2 => num(i + 3..i + 5)?,
                3 if b[i + 3] == b':' => num(i + 4..i + 6)?,
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            if sign == b'-' {
                Some(-(oh * 60 + om))
            } else {
                Some(oh * 60 + om)
            }
        }
        _ => None,
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
