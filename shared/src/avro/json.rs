//! A datum decoded by `apache-avro` written out as the JSON text the
//! shredder reads exactly: decimals as their digits, dates and timestamps as
//! ISO text, bytes as base64. This is the registry path for schemas the
//! direct decoder has no plan for, for records the writer needs as JSON
//! (routing by a field, keyed tables, dead letters), and the oracle the
//! direct decoder is tested against.

use std::collections::{BTreeMap, HashMap};

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::Name;
use apache_avro::types::Value as AvroValue;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::types::{nullable, resolve};
use crate::calendar::{format_date, format_utc_micros};
use crate::error::RecordError;
use crate::field_path::Path;

/// Writes `value` (of `schema`) as JSON text the shredder reads exactly.
///
/// Long because it is one match with an arm per Avro value and logical
/// type, each the oracle `render.rs` and the direct decoder are tested against.
pub(super) fn write_json(
    value: &AvroValue,
    schema: &AvroSchema,
    names: &HashMap<Name, AvroSchema>,
    path: Path<'_>,
    out: &mut Vec<u8>,
) -> Result<(), RecordError> {
    use std::io::Write as _;
    let schema = resolve(schema, names).map_err(|e| RecordError::envelope(path.render(), e))?;
    let mismatch = || {
        RecordError::envelope(
            path.render(),
            format!("the Avro value {value:?} does not match its schema"),
        )
    };
    // Writing into a Vec cannot fail: the results of `write!` are dropped.
    match value {
        AvroValue::Null => out.extend_from_slice(b"null"),
        AvroValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        AvroValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        AvroValue::Long(i) => {
            let _ = write!(out, "{i}");
        }
        // `{:?}` is the shortest text that reads back as the same float,
        // with an exponent where one is shorter.
        AvroValue::Float(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        AvroValue::Double(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        AvroValue::Float(f) => string(&special(f64::from(*f)), out),
        AvroValue::Double(f) => string(&special(*f), out),
        AvroValue::String(s) | AvroValue::Enum(_, s) => string(s, out),
        AvroValue::Bytes(b) | AvroValue::Fixed(_, b) => string(&BASE64.encode(b), out),
        AvroValue::Uuid(u) => string(&u.as_hyphenated().to_string(), out),
        AvroValue::Date(days) => string(&format_date(i64::from(*days)), out),
        AvroValue::TimeMillis(ms) => string(&time_of_day(i64::from(*ms) * 1000), out),
        AvroValue::TimeMicros(us) => string(&time_of_day(*us), out),
        AvroValue::TimestampMillis(ms) => string(&timestamp(path, *ms, 1000)?, out),
        AvroValue::TimestampMicros(us) => string(&timestamp(path, *us, 1)?, out),
        AvroValue::LocalTimestampMillis(ms) => {
            let text = timestamp(path, *ms, 1000)?;
            string(text.trim_end_matches('Z'), out)
        }
        AvroValue::LocalTimestampMicros(us) => {
            let text = timestamp(path, *us, 1)?;
            string(text.trim_end_matches('Z'), out)
        }
        AvroValue::TimestampNanos(ns) | AvroValue::LocalTimestampNanos(ns) => {
            let _ = write!(out, "{ns}");
        }
        AvroValue::Duration(d) => {
            let (m, dd, ms) = (
                u32::from(d.months()),
                u32::from(d.days()),
                u32::from(d.millis()),
            );
            out.extend_from_slice(
                format!(r#"{{"months":{m},"days":{dd},"millis":{ms}}}"#).as_bytes(),
            );
        }
        AvroValue::Decimal(d) => {
            let AvroSchema::Decimal(ds) = schema else {
                return Err(mismatch());
            };
            let bytes: Vec<u8> = d.try_into().map_err(|e| {
                RecordError::envelope(path.render(), format!("a decimal that does not read: {e}"))
            })?;
            let digits = decimal_text(&bytes, ds.scale).ok_or_else(|| {
                RecordError::envelope(
                    path.render(),
                    format!("a decimal of {} bytes, wider than 38 digits", bytes.len()),
                )
            })?;
            if ds.precision <= 38 {
                out.extend_from_slice(digits.as_bytes());
            } else {
                string(&digits, out);
            }
        }
        AvroValue::BigDecimal(d) => string(&d.to_string(), out),
        AvroValue::Union(i, inner) => {
            let AvroSchema::Union(u) = schema else {
                return Err(mismatch());
            };
            let branch = u.variants().get(*i as usize).ok_or_else(mismatch)?;
            if nullable(u).is_some() {
                write_json(inner, branch, names, path, out)?;
            } else if matches!(**inner, AvroValue::Null) {
                out.extend_from_slice(b"null");
            } else {
                // No one Iceberg type: the branch's JSON, as text.
                let mut text = Vec::new();
                write_json(inner, branch, names, path, &mut text)?;
                string(&String::from_utf8_lossy(&text), out);
            }
        }
        AvroValue::Array(items) => {
            let AvroSchema::Array(a) = schema else {
                return Err(mismatch());
            };
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, &a.items, names, path.index(i), out)?;
            }
            out.push(b']');
        }
        AvroValue::Map(map) => {
            let AvroSchema::Map(m) = schema else {
                return Err(mismatch());
            };
            // Sorted, so the same map always writes the same text.
            let sorted: BTreeMap<&String, &AvroValue> = map.iter().collect();
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(k, out);
                out.push(b':');
                write_json(v, &m.types, names, path.key(k), out)?;
            }
            out.push(b'}');
        }
        AvroValue::Record(fields) => {
            let AvroSchema::Record(r) = schema else {
                return Err(mismatch());
            };
            out.push(b'{');
            for (i, ((name, v), f)) in fields.iter().zip(&r.fields).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(name, out);
                out.push(b':');
                write_json(v, &f.schema, names, path.key(name), out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

pub(super) fn string(s: &str, out: &mut Vec<u8>) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The text the shredder reads as a non-finite float.
pub(super) fn special(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f > 0.0 {
        "Infinity".into()
    } else {
        "-Infinity".into()
    }
}

pub(super) fn timestamp(path: Path<'_>, v: i64, to_micros: i64) -> Result<String, RecordError> {
    let us = v.checked_mul(to_micros).ok_or_else(|| {
        RecordError::envelope(
            path.render(),
            format!("timestamp {v} is outside the range of microsecond timestamps"),
        )
    })?;
    Ok(format_utc_micros(us))
}

/// `HH:MM:SS.ffffff` of microseconds after midnight.
pub(super) fn time_of_day(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        us.rem_euclid(1_000_000)
    )
}

/// The decimal text of a big-endian two's-complement unscaled value at
/// `scale`; `None` when it is wider than an i128 (38 digits need 16 bytes).
pub(super) fn decimal_text(bytes: &[u8], scale: usize) -> Option<String> {
    if bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = if negative { [0xffu8; 16] } else { [0u8; 16] };
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    let unscaled = i128::from_be_bytes(buf);
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return Some(format!("{sign}{digits}"));
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    Some(format!("{sign}{int}.{frac}"))
}
