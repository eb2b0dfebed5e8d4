//! One value of a datum written as the JSON text the registry path writes
//! for it (`json.rs`), byte for byte, read straight from the binary: for
//! the values the direct decoder cannot place in their column itself (a
//! union of several types, which a string column keeps as its JSON, or a
//! type the table holds differently), handed to the shredder's JSON reader.

use std::io::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::check::{branch, decimal_bytes, enum_symbol, map_entries, uuid};
use super::json::{decimal_text, special, string, time_of_day};
use super::plan::{Node, NodeId, Plan, Unit};
use super::read::{DecodeError, Reader};
use crate::calendar::{format_date, format_utc_micros};

/// Appends the JSON text of one value of `node` to `out`.
///
/// Long because it is one match with an arm per plan node, each writing
/// its type's JSON as `json.rs` does; the arms share nothing to factor out.
pub fn render(
    plan: &Plan,
    node: NodeId,
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    // Writing into a Vec cannot fail: the results of `write!` are dropped.
    match plan.node(node) {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Boolean => out.extend_from_slice(if r.boolean()? { b"true" } else { b"false" }),
        Node::Int => {
            let _ = write!(out, "{}", r.int()?);
        }
        Node::Long => {
            let _ = write!(out, "{}", r.long()?);
        }
        Node::Float => match r.float()? {
            f if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            f => string(&special(f64::from(f)), out),
        },
        Node::Double => match r.double()? {
            f if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            f => string(&special(f), out),
        },
        Node::String => string(&String::from_utf8_lossy(r.str()?), out),
        Node::Enum(symbols) => string(enum_symbol(r, symbols)?, out),
        Node::Bytes => string(&BASE64.encode(r.bytes()?), out),
        Node::Fixed(n) => string(&BASE64.encode(r.fixed(*n, "a fixed")?), out),
        Node::Uuid => string(
            &uuid::Uuid::from_bytes(uuid(r)?).as_hyphenated().to_string(),
            out,
        ),
        Node::Date => string(&format_date(i64::from(r.int()?)), out),
        Node::TimeMillis => string(&time_of_day(i64::from(r.int()?) * 1000), out),
        Node::TimeMicros => string(&time_of_day(r.long()?), out),
        Node::Timestamp { unit, local } => {
            let v = r.long()?;
            let us = match unit {
                Unit::Nanos => {
                    let _ = write!(out, "{v}");
                    return Ok(());
                }
                Unit::Micros => v,
                Unit::Millis => v.checked_mul(1000).ok_or(DecodeError::Timestamp(v))?,
            };
            let text = format_utc_micros(us);
            string(
                if *local {
                    text.trim_end_matches('Z')
                } else {
                    &text
                },
                out,
            );
        }
        Node::Duration => {
            let b = r.fixed(12, "a duration")?;
            let part = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            let _ = write!(
                out,
                r#"{{"months":{},"days":{},"millis":{}}}"#,
                part(0),
                part(4),
                part(8)
            );
        }
        Node::Decimal {
            size,
            precision,
            scale,
        } => {
            let bytes = decimal_bytes(r, *size)?;
            let digits =
                decimal_text(bytes, *scale).ok_or(DecodeError::WideDecimal(bytes.len()))?;
            if *precision <= 38 {
                out.extend_from_slice(digits.as_bytes());
            } else {
                string(&digits, out);
            }
        }
        Node::Union { branches, null } => {
            let b = branch(r, branches)?;
            if null.is_some() {
                return render(plan, b, r, out);
            }
            if matches!(plan.node(b), Node::Null) {
                out.extend_from_slice(b"null");
            } else {
                // No one Iceberg type: the branch's JSON, as text.
                let mut text = Vec::new();
                render(plan, b, r, &mut text)?;
                string(&String::from_utf8_lossy(&text), out);
            }
        }
        Node::Array { items, width } => {
            out.push(b'[');
            let mut first = true;
            loop {
                let n = r.block(*width)?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    render(plan, *items, r, out)?;
                }
            }
            out.push(b']');
        }
        Node::Map(values) => {
            let mut entries = Vec::new();
            map_entries(plan, *values, r, &mut entries).map_err(|f| f.error)?;
            let end = r.pos;
            let datum = r.datum();
            let key_of = |e: &(usize, usize, usize)| datum.get(e.0..e.0 + e.1).unwrap_or(&[]);
            out.push(b'{');
            let mut first = true;
            for (i, e) in entries.iter().enumerate() {
                let (key, at) = (key_of(e), &e.2);
                if entries.get(i + 1).is_some_and(|next| key_of(next) == key) {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                string(&String::from_utf8_lossy(key), out);
                out.push(b':');
                r.pos = *at;
                render(plan, *values, r, out)?;
            }
            r.pos = end;
            out.push(b'}');
        }
        Node::Record(fields) => {
            out.push(b'{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(&f.name, out);
                out.push(b':');
                render(plan, f.node, r, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}
