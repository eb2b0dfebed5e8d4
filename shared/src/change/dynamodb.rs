//! DynamoDB Streams records (one element of a Lambda event's `Records`; the same shape also
//! arrives through Kinesis Data Streams for DynamoDB), with typed attributes unmarshalled to
//! plain JSON.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::value::RawValue;

use super::{
    Change, ChangeOp, Kind, Path, RawObject, array, canonical_unsigned, fault, is_json_number,
    kind, object, parse_timestamp_ms, scaled_integer, string,
};
use crate::error::RecordError;
use crate::row::{RowWriter, write_json_string};

/// DynamoDB allows 32 levels of nesting; anything deeper is not a real item.
const MAX_DEPTH: usize = 64;

/// Decodes one DynamoDB stream record.
pub(super) fn decode(root: &RawObject<'_>) -> Result<Change, RecordError> {
    let name_path = Path::Root.key("eventName");
    let name_raw = root.get_non_null("eventName").ok_or_else(|| {
        fault(
            name_path,
            "missing: a DynamoDB stream record says INSERT, MODIFY or REMOVE",
        )
    })?;
    let name = string(name_raw, name_path)?;
    let op = match &*name {
        "INSERT" => ChangeOp::Insert,
        "MODIFY" => ChangeOp::Update,
        "REMOVE" => ChangeOp::Delete,
        other => {
            return Err(fault(
                name_path,
                format!("unknown DynamoDB event `{other}`; expected INSERT, MODIFY or REMOVE"),
            ));
        }
    };

    let ddb_path = Path::Root.key("dynamodb");
    let ddb_raw = root.get_non_null("dynamodb").ok_or_else(|| {
        fault(
            ddb_path,
            "missing: the stream record's change is under `dynamodb`",
        )
    })?;
    let ddb = object(ddb_raw, ddb_path)?;

    let (image_key, image_raw) = image(&ddb, ddb_path, op, &name)?;
    let image_path = ddb_path.key(image_key);
    let image = object(image_raw, image_path)?;
    let mut row = RowWriter::with_capacity(image_raw.get().len());
    for (name, attribute) in image.iter() {
        write_attribute(row.field(name), attribute, image_path.key(name), 1)?;
    }
    let row = row.finish();

    let position = sequence_number(&ddb, ddb_path)?;
    let time_path = ddb_path.key("ApproximateCreationDateTime");
    let ts_ms = match ddb.get_non_null("ApproximateCreationDateTime") {
        Some(raw) => Some(creation_time_ms(raw, &ddb, time_path)?),
        None => None,
    };

    Ok(Change {
        op,
        row,
        position,
        ts_ms,
        unchanged: Vec::new(),
    })
}

/// The image the row comes from, and its key under `dynamodb`: the new
/// image, or for a REMOVE the old item when the stream has old images, else
/// at least its key.
fn image<'a>(
    ddb: &RawObject<'a>,
    ddb_path: Path<'_>,
    op: ChangeOp,
    name: &str,
) -> Result<(&'static str, &'a RawValue), RecordError> {
    if op == ChangeOp::Delete {
        return match (ddb.get_non_null("OldImage"), ddb.get_non_null("Keys")) {
            (Some(raw), _) => Ok(("OldImage", raw)),
            (None, Some(raw)) => Ok(("Keys", raw)),
            (None, None) => Err(fault(
                ddb_path.key("Keys"),
                "REMOVE record has neither `OldImage` nor `Keys`, so the deleted item is unknown",
            )),
        };
    }
    match ddb.get_non_null("NewImage") {
        Some(raw) => Ok(("NewImage", raw)),
        None => {
            let view = ddb
                .get_non_null("StreamViewType")
                .and_then(|v| string(v, ddb_path).ok())
                .map(|v| format!(" (this stream is {v})"))
                .unwrap_or_default();
            Err(fault(
                ddb_path.key("NewImage"),
                format!(
                    "{name} record has no new image{view}; set the table's stream view type to \
                     NEW_AND_OLD_IMAGES (or NEW_IMAGE)"
                ),
            ))
        }
    }
}

/// The record's `SequenceNumber`, a string or a number, as canonical decimal.
fn sequence_number(ddb: &RawObject<'_>, ddb_path: Path<'_>) -> Result<Option<String>, RecordError> {
    let seq_path = ddb_path.key("SequenceNumber");
    let Some(raw) = ddb.get_non_null("SequenceNumber") else {
        return Ok(None);
    };
    let text = match kind(raw) {
        Kind::Number => Cow::Borrowed(raw.get()),
        _ => string(raw, seq_path)?,
    };
    Ok(Some(canonical_unsigned(&text).ok_or_else(|| {
        fault(
            seq_path,
            format!("`{text}` is not a decimal sequence number"),
        )
    })?))
}

/// `ApproximateCreationDateTime` is epoch seconds in DynamoDB Streams, but milliseconds or
/// microseconds (per the destination's precision setting) through Kinesis Data Streams.
fn creation_time_ms(
    raw: &RawValue,
    ddb: &RawObject<'_>,
    path: Path<'_>,
) -> Result<i64, RecordError> {
    let invalid = |shown: &str| {
        fault(
            path,
            format!("`{shown}` is not an epoch time or ISO 8601 timestamp"),
        )
    };
    match kind(raw) {
        Kind::Number => {
            let text = raw.get();
            let precision = ddb
                .get_non_null("ApproximateCreationDateTimePrecision")
                .and_then(|p| string(p, path).ok());
            let pow10 = match precision.as_deref() {
                Some("MILLISECOND") => 0,
                Some("MICROSECOND") => -3,
                // No unit given: seconds until year 5138, so larger values must be ms or µs.
                _ => match scaled_integer(text, 0).map(i64::unsigned_abs) {
                    Some(whole) if whole < 100_000_000_000 => 3,
                    Some(whole) if whole < 100_000_000_000_000 => 0,
                    _ => -3,
                },
            };
            scaled_integer(text, pow10).ok_or_else(|| invalid(text))
        }
        // SDKs that re-serialize records write the time as an ISO string.
        Kind::String => {
            let text = string(raw, path)?;
            parse_timestamp_ms(&text).ok_or_else(|| invalid(&text))
        }
        _ => Err(super::wrong_kind(path, "an epoch time", raw)),
    }
}

/// Writes an item (a map of attribute name to typed attribute) as a plain JSON object.
fn write_item(
    out: &mut Vec<u8>,
    raw: &RawValue,
    path: Path<'_>,
    depth: usize,
) -> Result<(), RecordError> {
    let item = object(raw, path)?;
    out.push(b'{');
    for (i, (name, attribute)) in item.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(out, name);
        out.push(b':');
        write_attribute(out, attribute, path.key(name), depth + 1)?;
    }
    out.push(b'}');
    Ok(())
}

/// Writes one typed attribute (`{"S":"x"}`, `{"N":"1.5"}`, …) as its plain JSON value.
fn write_attribute(
    out: &mut Vec<u8>,
    raw: &RawValue,
    path: Path<'_>,
    depth: usize,
) -> Result<(), RecordError> {
    if depth > MAX_DEPTH {
        return Err(fault(
            path,
            format!("nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    if kind(raw) != Kind::Object {
        return Err(super::wrong_kind(
            path,
            "a typed attribute like {\"S\": \"text\"}",
            raw,
        ));
    }
    let attribute = object(raw, path)?;
    let mut entries = attribute.iter();
    let (Some((type_name, value)), None) = (entries.next(), entries.next()) else {
        return Err(fault(
            path,
            format!(
                "a typed attribute has exactly one type key like {{\"S\": \"text\"}}; found {} keys",
                attribute.len()
            ),
        ));
    };
    let value_path = path.key(type_name);
    match type_name {
        "S" => {
            expect_kind(value, Kind::String, value_path)?;
            out.extend_from_slice(value.get().as_bytes());
        }
        "N" => write_number(out, value, value_path)?,
        "B" => write_binary(out, value, value_path)?,
        "BOOL" => {
            expect_kind(value, Kind::Bool, value_path)?;
            out.extend_from_slice(value.get().as_bytes());
        }
        "NULL" => {
            expect_kind(value, Kind::Bool, value_path)?;
            out.extend_from_slice(b"null");
        }
        "M" => write_item(out, value, value_path, depth)?,
        "L" => write_list(out, value, value_path, |out, item, path| {
            write_attribute(out, item, path, depth + 1)
        })?,
        "SS" => write_list(out, value, value_path, |out, item, path| {
            expect_kind(item, Kind::String, path)?;
            out.extend_from_slice(item.get().as_bytes());
            Ok(())
        })?,
        "NS" => write_list(out, value, value_path, write_number)?,
        "BS" => write_list(out, value, value_path, write_binary)?,
        other => {
            return Err(fault(
                value_path,
                format!(
                    "unknown DynamoDB attribute type `{other}`; expected S, N, B, BOOL, NULL, M, L, SS, NS or BS"
                ),
            ));
        }
    }
    Ok(())
}

fn write_list(
    out: &mut Vec<u8>,
    raw: &RawValue,
    path: Path<'_>,
    mut write_element: impl FnMut(&mut Vec<u8>, &RawValue, Path<'_>) -> Result<(), RecordError>,
) -> Result<(), RecordError> {
    let items = array(raw, path)?;
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_element(out, item, path.index(i))?;
    }
    out.push(b']');
    Ok(())
}

fn expect_kind(raw: &RawValue, expected: Kind, path: Path<'_>) -> Result<(), RecordError> {
    if kind(raw) == expected {
        Ok(())
    } else {
        Err(super::wrong_kind(path, expected.name(), raw))
    }
}

/// `N` values are strings holding the number; they become JSON numbers with the same digits.
fn write_number(out: &mut Vec<u8>, raw: &RawValue, path: Path<'_>) -> Result<(), RecordError> {
    let text = string(raw, path)?;
    let number = normalize_number(text.trim()).ok_or_else(|| {
        let shown: String = text.chars().take(64).collect();
        fault(path, format!("`{shown}` is not a number"))
    })?;
    out.extend_from_slice(number.as_bytes());
    Ok(())
}

/// `B` values stay base64 text; they are checked so a corrupt one is caught here, not later.
fn write_binary(out: &mut Vec<u8>, raw: &RawValue, path: Path<'_>) -> Result<(), RecordError> {
    let text = string(raw, path)?;
    BASE64
        .decode(text.as_bytes())
        .map_err(|e| fault(path, format!("binary attribute is not valid base64 ({e})")))?;
    out.extend_from_slice(raw.get().as_bytes());
    Ok(())
}

/// The number's text if it already is a JSON number; otherwise the forms DynamoDB accepts but
/// JSON does not (`+5`, `.5`, `5.`, `007`) rewritten with the same value and digits.
fn normalize_number(text: &str) -> Option<Cow<'_, str>> {
    if is_json_number(text) {
        return Some(Cow::Borrowed(text));
    }
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'-') => ("-", &text[1..]),
        Some(b'+') => ("", &text[1..]),
        _ => ("", text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    let int_part = int_part.trim_start_matches('0');
    let mut out = String::with_capacity(text.len() + 2);
    out.push_str(sign);
    out.push_str(if int_part.is_empty() { "0" } else { int_part });
    if !frac_part.is_empty() {
        out.push('.');
        out.push_str(frac_part);
    }
    if let Some(exponent) = exponent {
        out.push('e');
        out.push_str(exponent);
    }
    is_json_number(&out).then_some(Cow::Owned(out))
}
