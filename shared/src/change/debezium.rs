//! Debezium change events (JSON, with or without Kafka Connect's schema envelope), plus the
//! Kafka Connect pieces that flattened records share: Decimal columns and positions.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::row::{Row, RowWriter};

use super::{
    Change, ChangeOp, Kind, Path, RawObject, Text, canonical_unsigned, fault,
    is_unavailable_placeholder, kind, object, object_or_tombstone, scaled_integer, string,
};
use crate::error::RecordError;

/// Decodes a Debezium record: the Connect envelope's `payload`, or the bare event.
pub(super) fn decode(root: &RawObject<'_>) -> Result<Change, RecordError> {
    if root.get("op").is_none()
        && let Some(payload) = root.get("payload")
    {
        let path = Path::Root.key("payload");
        let event = object_or_tombstone(payload, path)?;
        return decode_payload(&event, root.get_non_null("schema"), path);
    }
    decode_payload(root, None, Path::Root)
}

/// Decodes the Debezium event object itself; `schema` is the Connect envelope's schema, if any.
pub(super) fn decode_payload(
    event: &RawObject<'_>,
    schema: Option<&RawValue>,
    path: Path<'_>,
) -> Result<Change, RecordError> {
    let op_path = path.key("op");
    let op_raw = event.get_non_null("op").ok_or_else(|| {
        fault(
            op_path,
            "missing: a Debezium change event always has `op` (c, u, d or r); this record is not one",
        )
    })?;
    let op_text = string(op_raw, op_path)?;
    let op = op_letter(&op_text, op_path)?;

    // A truncate has no row: it removes every row of the table.
    let (row, unchanged) = if op == ChangeOp::Truncate {
        (Row::default(), Vec::new())
    } else {
        row_image(event, schema, path, op, &op_text)?
    };

    let source_path = path.key("source");
    let source = match event.get_non_null("source") {
        Some(raw) => Some(object(raw, source_path)?),
        None => None,
    };
    let position = match &source {
        Some(source) => source_position(source, source_path)?,
        None => None,
    };
    // `source.ts_ms` is when the change happened in the database (Flink CDC's `op_ts`); the
    // envelope's `ts_ms` is only when the connector processed it, so it is the fallback.
    let ts_ms = match source.as_ref().and_then(|s| s.get_non_null("ts_ms")) {
        Some(raw) => Some(millis(raw, source_path.key("ts_ms"))?),
        None => match event.get_non_null("ts_ms") {
            Some(raw) => Some(millis(raw, path.key("ts_ms"))?),
            None => None,
        },
    };
    Ok(Change {
        op,
        row,
        position,
        ts_ms,
        unchanged,
    })
}

/// The row a change leaves (`after`), or for deletes the row it removed (`before`),
/// with the columns Debezium left out as unchanged.
fn row_image(
    event: &RawObject<'_>,
    schema: Option<&RawValue>,
    path: Path<'_>,
    op: ChangeOp,
    op_text: &str,
) -> Result<(Row, Vec<String>), RecordError> {
    // Deletes carry the old row in `before`; everything else the new row in `after`.
    let image = if op == ChangeOp::Delete {
        "before"
    } else {
        "after"
    };
    let image_path = path.key(image);
    let row_raw = match event.get_non_null(image) {
        Some(raw) => raw,
        None if op == ChangeOp::Delete => {
            return Err(fault(
                image_path,
                "delete event has no `before` image, so the deleted key is unknown; for Postgres run \
                 `ALTER TABLE … REPLICA IDENTITY FULL` (or give the table a primary key) so Debezium \
                 puts at least the key columns in `before`",
            ));
        }
        None => {
            return Err(fault(
                image_path,
                format!(
                    "missing or null on an `{op_text}` event; Debezium always sets it for creates, \
                     updates and reads, so the event was altered on the way"
                ),
            ));
        }
    };
    if kind(row_raw) == Kind::String {
        return Err(fault(
            image_path,
            "is a string, not an object: the Debezium MongoDB connector sends documents as extended \
             JSON text; add the `ExtractNewDocumentState` SMT so rows arrive as JSON objects",
        ));
    }
    let row_obj = object(row_raw, image_path)?;
    let decimals = match schema {
        Some(schema) => connect_decimals(schema, Some(image), Path::Root.key("schema"))?,
        None => Vec::new(),
    };
    let mut unchanged = Vec::new();
    let row = build_row(&row_obj, image_path, &[], &decimals, &mut unchanged)?;
    Ok((row, unchanged))
}

/// Maps Debezium's one-letter `op`.
fn op_letter(op: &str, path: Path<'_>) -> Result<ChangeOp, RecordError> {
    match op {
        "c" => Ok(ChangeOp::Insert),
        "u" => Ok(ChangeOp::Update),
        "d" => Ok(ChangeOp::Delete),
        "r" => Ok(ChangeOp::Read),
        "t" => Ok(ChangeOp::Truncate),
        "m" => Err(fault(
            path,
            "`m` is a logical decoding message (pg_logical_emit_message), not a row change; route \
             or skip it before decoding",
        )),
        other => Err(fault(
            path,
            format!("unknown Debezium op `{other}`; expected c, u, d or r"),
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Rows.

/// Copies `obj` into a row text, skipping `skip` keys, moving TOAST placeholders to
/// `unchanged`, and turning Connect Decimal bytes into exact decimal numbers.
pub(super) fn build_row(
    obj: &RawObject<'_>,
    path: Path<'_>,
    skip: &[&str],
    decimals: &[ConnectDecimal<'_>],
    unchanged: &mut Vec<String>,
) -> Result<Row, RecordError> {
    let size: usize = obj.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum();
    let mut row = RowWriter::with_capacity(size);
    for (key, value) in obj.iter() {
        if skip.contains(&key) {
            continue;
        }
        // The placeholder must never reach the table: the writer keeps the old value instead.
        if is_unavailable_placeholder(value) {
            unchanged.push(key.to_owned());
            continue;
        }
        match decimals.iter().find(|d| d.column == key) {
            Some(decimal) => write_decimal(&mut row, key, value, decimal.scale, path.key(key))?,
            None => row.raw(key, value.get().as_bytes()),
        }
    }
    Ok(row.finish())
}

// ---------------------------------------------------------------------------------------
// Kafka Connect decimals.

const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
/// ~2,400 digits; far beyond any Iceberg decimal, and it bounds the quadratic conversion.
const MAX_DECIMAL_BYTES: usize = 1024;

/// A column whose JSON value is Connect's base64 two's-complement encoding of a decimal.
pub(super) struct ConnectDecimal<'a> {
    column: std::borrow::Cow<'a, str>,
    /// `Some(scale)` for `Decimal`; `None` for `VariableScaleDecimal`, whose value carries its scale.
    scale: Option<i32>,
}

/// The parts of a Kafka Connect JSON schema this module reads; everything else is skipped
/// unparsed (so a `default` like `1e400` cannot fail it).
#[derive(Deserialize)]
struct SchemaNode<'a> {
    #[serde(borrow, default)]
    field: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    fields: Option<Vec<SchemaNode<'a>>>,
    #[serde(borrow, default)]
    parameters: Option<RawObject<'a>>,
}

/// Finds the Decimal columns of the struct `image` (`after`/`before`) in a Connect schema, or of
/// the schema itself when `image` is None (rows flattened by ExtractNewRecordState).
pub(super) fn connect_decimals<'a>(
    schema: &'a RawValue,
    image: Option<&str>,
    path: Path<'_>,
) -> Result<Vec<ConnectDecimal<'a>>, RecordError> {
    let text = schema.get();
    // Most schemas have no decimals; skip parsing what is often larger than the row itself.
    if !text.contains(DECIMAL) && !text.contains(VARIABLE_SCALE_DECIMAL) {
        return Ok(Vec::new());
    }
    let root: SchemaNode<'a> = serde_json::from_str(text)
        .map_err(|e| fault(path, format!("not a Kafka Connect JSON schema: {e}")))?;
    let columns = match image {
        Some(image) => root
            .fields
            .unwrap_or_default()
            .into_iter()
            .find(|f| f.field.as_ref().is_some_and(|name| name.0 == image))
            .and_then(|f| f.fields),
        None => root.fields,
    };
    let mut decimals = Vec::new();
    for column in columns.unwrap_or_default() {
        let (Some(Text(column_name)), Some(Text(type_name))) = (column.field, column.name) else {
            continue;
        };
        let scale = match &*type_name {
            DECIMAL => {
                let scale_raw = column
                    .parameters
                    .as_ref()
                    .and_then(|p| p.get_non_null("scale"));
                let scale = scale_raw.and_then(|raw| match kind(raw) {
                    Kind::String => string(raw, path).ok().and_then(|s| s.parse::<i32>().ok()),
                    Kind::Number => raw.get().parse::<i32>().ok(),
                    _ => None,
                });
                match scale {
                    Some(scale) => Some(scale),
                    None => {
                        return Err(fault(
                            path,
                            format!(
                                "Decimal column `{column_name}` has no integer `parameters.scale`, \
                                 so its bytes cannot be read as a number"
                            ),
                        ));
                    }
                }
            }
            VARIABLE_SCALE_DECIMAL => None,
            _ => continue,
        };
        decimals.push(ConnectDecimal {
            column: column_name,
            scale,
        });
    }
    Ok(decimals)
}

fn write_decimal(
    row: &mut RowWriter,
    key: &str,
    value: &RawValue,
    scale: Option<i32>,
    path: Path<'_>,
) -> Result<(), RecordError> {
    let text = match (kind(value), scale) {
        // Null, or JsonConverter's `decimal.format=NUMERIC`, which already writes the number.
        (Kind::Null | Kind::Number, _) => {
            row.raw(key, value.get().as_bytes());
            return Ok(());
        }
        (Kind::String, Some(scale)) => decimal_from_base64(&string(value, path)?, scale, path)?,
        (Kind::Object, None) => {
            let obj = object(value, path)?;
            let scale_path = path.key("scale");
            let scale = obj
                .get_non_null("scale")
                .filter(|s| kind(s) == Kind::Number)
                .and_then(|s| s.get().parse::<i32>().ok())
                .ok_or_else(|| {
                    fault(scale_path, "VariableScaleDecimal needs an integer `scale`")
                })?;
            let value_path = path.key("value");
            let bytes = obj
                .get_non_null("value")
                .ok_or_else(|| fault(value_path, "VariableScaleDecimal needs a base64 `value`"))?;
            decimal_from_base64(&string(bytes, value_path)?, scale, value_path)?
        }
        (_, Some(_)) => {
            return Err(super::wrong_kind(
                path,
                "a base64 string for a Decimal column",
                value,
            ));
        }
        (_, None) => {
            return Err(super::wrong_kind(
                path,
                "a {\"scale\",\"value\"} object for a VariableScaleDecimal column",
                value,
            ));
        }
    };
    row.field(key).extend_from_slice(text.as_bytes());
    Ok(())
}

fn decimal_from_base64(encoded: &str, scale: i32, path: Path<'_>) -> Result<String, RecordError> {
    let bytes = BASE64.decode(encoded).map_err(|e| {
        fault(
            path,
            format!(
                "Decimal value is not valid base64 ({e}); Connect encodes decimals as base64 bytes"
            ),
        )
    })?;
    if bytes.len() > MAX_DECIMAL_BYTES {
        return Err(fault(
            path,
            format!(
                "Decimal value has {} bytes (limit {MAX_DECIMAL_BYTES}); no Iceberg column can hold it — \
                 use `decimal.handling.mode=string`",
                bytes.len()
            ),
        ));
    }
    Ok(decimal_text(&bytes, scale))
}

/// Renders a big-endian two's-complement unscaled integer with `scale` as an exact JSON number.
pub(super) fn decimal_text(unscaled: &[u8], scale: i32) -> String {
    const LIMB: u64 = 1_000_000_000;
    let negative = unscaled.first().is_some_and(|b| b & 0x80 != 0);
    let mut magnitude = unscaled.to_vec();
    if negative {
        // Two's-complement negation: invert, then add one from the least significant byte.
        for b in &mut magnitude {
            *b = !*b;
        }
        for b in magnitude.iter_mut().rev() {
            let (sum, carry) = b.overflowing_add(1);
            *b = sum;
            if !carry {
                break;
            }
        }
    }
    // Little-endian base-10^9 limbs; schoolbook multiply-add per byte.
    let mut limbs: Vec<u64> = Vec::new();
    for &byte in &magnitude {
        let mut carry = u64::from(byte);
        for limb in &mut limbs {
            let v = *limb * 256 + carry;
            *limb = v % LIMB;
            carry = v / LIMB;
        }
        while carry > 0 {
            limbs.push(carry % LIMB);
            carry /= LIMB;
        }
    }
    let mut digits = String::new();
    match limbs.split_last() {
        None => digits.push('0'),
        Some((top, rest)) => {
            let _ = write!(digits, "{top}");
            for limb in rest.iter().rev() {
                let _ = write!(digits, "{limb:09}");
            }
        }
    }
    let is_zero = digits == "0";
    let mut out = String::with_capacity(digits.len() + 8);
    if negative && !is_zero {
        out.push('-');
    }
    // Oversized scales use exponent form so a hostile scale cannot blow up the text.
    match usize::try_from(scale) {
        Ok(0) => out.push_str(&digits),
        Ok(scale) if scale <= 1000 => {
            if digits.len() > scale {
                let (int, frac) = digits.split_at(digits.len() - scale);
                out.push_str(int);
                out.push('.');
                out.push_str(frac);
            } else {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', scale - digits.len()));
                out.push_str(&digits);
            }
        }
        Ok(scale) => {
            let _ = write!(out, "{digits}e-{scale}");
        }
        Err(_) => {
            out.push_str(&digits);
            let zeros = scale.unsigned_abs();
            if !is_zero && zeros <= 64 {
                out.extend(std::iter::repeat_n('0', zeros as usize));
            } else if !is_zero {
                let _ = write!(out, "e{zeros}");
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Positions and times.

/// Where each connector puts its log position: Postgres `lsn`, MySQL `pos`, Oracle `scn`,
/// SQL Server / Db2 `change_lsn`, and Postgres' `sequence` as a last resort.
const POSITION_KEYS: [&str; 5] = ["lsn", "pos", "scn", "change_lsn", "sequence"];

fn source_position(source: &RawObject<'_>, path: Path<'_>) -> Result<Option<String>, RecordError> {
    for key in POSITION_KEYS {
        if let Some(raw) = source.get_non_null(key) {
            return position_value(raw, path.key(key)).map(Some);
        }
    }
    Ok(None)
}

/// Reads one position value as a canonical decimal string.
pub(super) fn position_value(raw: &RawValue, path: Path<'_>) -> Result<String, RecordError> {
    let not_a_position = |shown: &str| {
        fault(
            path,
            format!("`{shown}` cannot order changes; expected an unsigned integer log position"),
        )
    };
    match kind(raw) {
        Kind::Number => canonical_unsigned(raw.get()).ok_or_else(|| not_a_position(raw.get())),
        Kind::String => {
            let text = string(raw, path)?;
            if let Some(position) = canonical_unsigned(&text) {
                return Ok(position);
            }
            // Postgres `sequence`: a JSON array text `["<last commit lsn>","<lsn>"]`.
            if text.starts_with('[') {
                let parsed: Result<Vec<Option<Text<'_>>>, _> = serde_json::from_str(&text);
                if let Some(last) = parsed
                    .ok()
                    .and_then(|items| items.into_iter().flatten().last())
                    && let Some(position) = canonical_unsigned(&last.0)
                {
                    return Ok(position);
                }
            }
            // SQL Server / Db2 LSNs: fixed-width hex groups, `0000002b:00000260:0002`.
            if let Some(position) = hex_lsn(&text) {
                return Ok(position);
            }
            let shown: String = text.chars().take(64).collect();
            Err(not_a_position(&shown))
        }
        other => Err(fault(
            path,
            format!(
                "expected an unsigned integer log position, found {}",
                other.name()
            ),
        )),
    }
}

/// Zero-padded colon-separated hex groups concatenate into one big-endian number.
fn hex_lsn(text: &str) -> Option<String> {
    if !text.contains(':') {
        return None;
    }
    let mut hex = String::with_capacity(text.len());
    for group in text.split(':') {
        if group.is_empty() || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        hex.push_str(group);
    }
    let hex = hex.trim_start_matches('0');
    if hex.is_empty() {
        return Some("0".to_owned());
    }
    if hex.len() > 32 {
        return None;
    }
    u128::from_str_radix(hex, 16).ok().map(|n| n.to_string())
}

/// Reads a millisecond timestamp; fractional milliseconds are floored.
pub(super) fn millis(raw: &RawValue, path: Path<'_>) -> Result<i64, RecordError> {
    let text = match kind(raw) {
        Kind::Number => std::borrow::Cow::Borrowed(raw.get()),
        // Some producers quote 64-bit numbers to survive JavaScript.
        Kind::String => string(raw, path)?,
        _ => return Err(super::wrong_kind(path, "milliseconds since the epoch", raw)),
    };
    scaled_integer(text.trim(), 0).ok_or_else(|| {
        fault(
            path,
            format!("`{text}` is not a millisecond timestamp (a number within the range of i64)"),
        )
    })
}
