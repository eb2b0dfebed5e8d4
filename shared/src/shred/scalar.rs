//! Converting one JSON string or number (or a map key's text) into a primitive column.

use super::EpochUnit;
use super::binary::{decode_base64, decode_fixed, parse_uuid};
use super::column::Kind;
use super::decimal::to_decimal;
use super::error::{Fail, PResult, RecordErrorKind, show};
use super::json::{Cursor, IntTok, NumTok};
use super::temporal::TsUnit;
use super::temporal::{
    epoch_number, parse_date, parse_time, parse_timestamp, time_number, unit_name,
};

/// Why a scalar was not written.
#[derive(Debug)]
pub(super) enum Reject {
    /// This JSON type is never accepted by the column; the caller says what would be.
    WrongType,
    /// Right JSON type, bad value.
    Invalid(Box<Fail>),
}

impl From<Box<Fail>> for Reject {
    fn from(fail: Box<Fail>) -> Self {
        Reject::Invalid(fail)
    }
}

/// What JSON a column accepts, for type errors.
pub(super) fn expects(kind: &Kind, epoch: EpochUnit) -> String {
    let unit = unit_name(epoch);
    match kind {
        Kind::Bool(_) => "true or false (boolean)".into(),
        Kind::Int(_) => "a JSON integer (int)".into(),
        Kind::Long(_) => "a JSON integer (long)".into(),
        Kind::Float(_) => "a JSON number or \"NaN\"/\"Infinity\"/\"-Infinity\" (float)".into(),
        Kind::Double(_) => "a JSON number or \"NaN\"/\"Infinity\"/\"-Infinity\" (double)".into(),
        Kind::Decimal {
            precision, scale, ..
        } => format!("a number or a numeric string (decimal({precision},{scale}))"),
        Kind::Date(_) => {
            "a \"YYYY-MM-DD\" string or an integer of days since 1970-01-01 (date)".into()
        }
        Kind::Time(_) => {
            format!("an \"HH:MM:SS[.ffffff]\" string or a number of {unit} since midnight (time)")
        }
        Kind::Timestamp { unit: u, .. } => format!(
            "an ISO-8601 timestamp string or a number of {unit} since 1970-01-01T00:00:00Z ({})",
            if *u == TsUnit::Micros {
                "timestamp"
            } else {
                "timestamp_ns"
            }
        ),
        Kind::String(_) => "a JSON string (string)".into(),
        Kind::Binary(_) => "a base64 string (binary)".into(),
        Kind::Uuid(_) => "a UUID string (uuid)".into(),
        Kind::Fixed { width, .. } => format!("a base64 string of {width} bytes (fixed[{width}])"),
        Kind::Struct(_) => "a JSON object (struct)".into(),
        Kind::List(_) => "a JSON array (list)".into(),
        Kind::Map(_) => "a JSON object or an array of {\"key\":…,\"value\":…} objects (map)".into(),
    }
}

fn special_float(s: &[u8]) -> Option<f64> {
    match s {
        b"NaN" => Some(f64::NAN),
        b"Infinity" => Some(f64::INFINITY),
        b"-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A JSON string's content into a column other than `string` (which takes it directly).
pub(super) fn from_str(kind: &mut Kind, s: &[u8]) -> Result<(), Reject> {
    match kind {
        Kind::Float(v) => match special_float(s) {
            Some(x) => v.push(x as f32),
            None => return Err(not_special(s)),
        },
        Kind::Double(v) => match special_float(s) {
            Some(x) => v.push(x),
            None => return Err(not_special(s)),
        },
        Kind::Decimal {
            precision,
            scale,
            values,
        } => values.push(to_decimal(s, *precision, *scale)?),
        Kind::Date(v) => v.push(parse_date(s)?),
        Kind::Time(v) => v.push(parse_time(s)?),
        Kind::Timestamp {
            unit,
            values,
            dates,
        } => values.push(parse_timestamp(s, *unit, dates)?),
        Kind::String(v) => {
            v.data.extend_from_slice(s);
            v.close()?;
        }
        Kind::Binary(v) => {
            decode_base64(s, &mut v.data)?;
            v.close()?;
        }
        Kind::Uuid(data) => parse_uuid(s, data)?,
        Kind::Fixed { width, data } => decode_fixed(s, *width, data)?,
        Kind::Bool(_)
        | Kind::Int(_)
        | Kind::Long(_)
        | Kind::Struct(_)
        | Kind::List(_)
        | Kind::Map(_) => return Err(Reject::WrongType),
    }
    Ok(())
}

#[cold]
fn not_special(s: &[u8]) -> Reject {
    Reject::Invalid(Fail::new(
        RecordErrorKind::TypeMismatch,
        format!(
            "{} is not a number; only \"NaN\", \"Infinity\" and \"-Infinity\" are accepted as strings",
            show(s)
        ),
    ))
}

/// A string's content read as the JSON number it holds (`"12.5"`, spaces
/// around allowed), for tables that opt in; `None` when it holds none.
#[cold]
pub(super) fn number_in_string(
    kind: &mut Kind,
    s: &[u8],
    epoch: EpochUnit,
) -> Option<Result<(), Reject>> {
    let s = s.trim_ascii();
    let mut c = Cursor::new(s);
    let tok = c.number().ok()?;
    (c.pos == s.len()).then(|| from_number(kind, tok, epoch))
}

/// An integer from number text, range-checked for `int` or `long`.
pub(super) fn integer(text: &[u8], tok: IntTok, min: i64, max: i64) -> PResult<i64> {
    match tok {
        IntTok::Int(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(not_integer(text, tok, min, max)),
    }
}

/// Why [`integer`] refused `tok`. Only ever an error, so the hot caller's `Ok` path stays
/// apart from it.
#[cold]
pub(super) fn not_integer(text: &[u8], tok: IntTok, min: i64, max: i64) -> Box<Fail> {
    let name = if min == i32::MIN as i64 {
        "int"
    } else {
        "long"
    };
    match tok {
        IntTok::Int(_) | IntTok::Overflow => Fail::new(
            RecordErrorKind::OutOfRange,
            format!(
                "{} is out of range for {name} ({min}..={max})",
                String::from_utf8_lossy(text)
            ),
        ),
        IntTok::NotInteger => Fail::new(
            RecordErrorKind::TypeMismatch,
            format!(
                "{} is not an integer ({name} takes JSON integers only)",
                String::from_utf8_lossy(text)
            ),
        ),
    }
}

/// Powers of ten that `f64` holds exactly (10^22 is the largest).
const F64_POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
/// Powers of ten that `f32` holds exactly.
const F32_POW10: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Splits JSON number text into sign, decimal digits (at most 19) and a power of ten.
#[inline]
fn small_decimal(text: &[u8]) -> Option<(bool, u64, i32)> {
    let (neg, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut m: u64 = 0;
    let mut digits = 0;
    let mut exp: i32 = 0;
    let mut fraction = false;
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        match b {
            b'0'..=b'9' => {
                if m != 0 || b != b'0' {
                    digits += 1;
                    if digits > 19 {
                        return None;
                    }
                }
                m = m * 10 + (b - b'0') as u64;
                exp -= fraction as i32;
            }
            b'.' => fraction = true,
            _ => break,
        }
        i += 1;
    }
    if let Some(b'e' | b'E') = rest.get(i) {
        let e = rest.get(i + 1..)?;
        let (sign, digits) = match e.split_first() {
            Some((b'-', d)) => (-1, d),
            Some((b'+', d)) => (1, d),
            _ => (1, e),
        };
        if digits.is_empty() || digits.len() > 4 {
            return None;
        }
        let mut v: i32 = 0;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (d - b'0') as i32;
        }
        exp += sign * v;
    }
    Some((neg, m, exp))
}

/// Clinger's fast path: an exact integer mantissa and an exact power of ten meet in one IEEE
/// operation, which rounds once, so the result equals a full correctly-rounded parse.
#[inline]
fn fast_float(text: &[u8], double: bool) -> Option<f64> {
    let (neg, m, exp) = small_decimal(text)?;
    let v = if double {
        if m > 1 << 53 || exp.unsigned_abs() > 22 {
            return None;
        }
        let p = F64_POW10[exp.unsigned_abs() as usize];
        if exp < 0 { m as f64 / p } else { m as f64 * p }
    } else {
        if m > 1 << 24 || exp.unsigned_abs() > 10 {
            return None;
        }
        let p = F32_POW10[exp.unsigned_abs() as usize];
        f64::from(if exp < 0 { m as f32 / p } else { m as f32 * p })
    };
    Some(if neg { -v } else { v })
}

fn float(text: &[u8], double: bool) -> PResult<f64> {
    if let Some(v) = fast_float(text, double) {
        return Ok(v);
    }
    let parsed = std::str::from_utf8(text).ok().and_then(|t| {
        if double {
            t.parse::<f64>().ok()
        } else {
            t.parse::<f32>().ok().map(f64::from)
        }
    });
    match parsed {
        Some(x) if x.is_finite() => Ok(x),
        Some(_) => Err(Fail::new(
            RecordErrorKind::OutOfRange,
            format!(
                "{} is out of range for {}",
                String::from_utf8_lossy(text),
                if double { "double" } else { "float" }
            ),
        )),
        None => Err(Fail::new(
            RecordErrorKind::TypeMismatch,
            format!("{} is not a number", show(text)),
        )),
    }
}

/// A JSON number (already checked against JSON's grammar) into a primitive column.
pub(super) fn from_number(kind: &mut Kind, tok: NumTok, epoch: EpochUnit) -> Result<(), Reject> {
    let text = tok.text;
    let int_tok = || {
        if tok.integer {
            let mut c = Cursor::new(text);
            c.int().unwrap_or(IntTok::NotInteger)
        } else {
            IntTok::NotInteger
        }
    };
    match kind {
        Kind::Int(v) => v.push(integer(text, int_tok(), i32::MIN as i64, i32::MAX as i64)? as i32),
        Kind::Long(v) => v.push(integer(text, int_tok(), i64::MIN, i64::MAX)?),
        Kind::Float(v) => v.push(float(text, false)? as f32),
        Kind::Double(v) => v.push(float(text, true)?),
        Kind::Decimal {
            precision,
            scale,
            values,
        } => values.push(to_decimal(text, *precision, *scale)?),
        Kind::Date(v) => {
            let days = match int_tok() {
                IntTok::Int(d) => i32::try_from(d).map_err(|_| RecordErrorKind::OutOfRange),
                IntTok::Overflow => Err(RecordErrorKind::OutOfRange),
                IntTok::NotInteger => Err(RecordErrorKind::TypeMismatch),
            };
            match days {
                Ok(d) => v.push(d),
                Err(kind) => {
                    return Err(Reject::Invalid(Fail::new(
                        kind,
                        format!(
                            "{} is not a whole number of days within the date range",
                            String::from_utf8_lossy(text)
                        ),
                    )));
                }
            }
        }
        Kind::Time(v) => v.push(time_number(text, epoch)?),
        Kind::Timestamp { unit, values, .. } => values.push(epoch_number(text, epoch, *unit)?),
        Kind::Bool(_)
        | Kind::String(_)
        | Kind::Binary(_)
        | Kind::Uuid(_)
        | Kind::Fixed { .. }
        | Kind::Struct(_)
        | Kind::List(_)
        | Kind::Map(_) => return Err(Reject::WrongType),
    }
    Ok(())
}

/// Whether `text` is exactly one JSON number.
fn as_number(text: &[u8]) -> Option<NumTok<'_>> {
    let mut c = Cursor::new(text);
    match text.first() {
        Some(b'-' | b'0'..=b'9') => {}
        _ => return None,
    }
    let tok = c.number().ok()?;
    (c.pos == text.len()).then_some(tok)
}

/// A map key's text (JSON object keys are always strings) parsed by the key column's type.
pub(super) fn from_key_text(kind: &mut Kind, text: &[u8], epoch: EpochUnit) -> PResult<()> {
    let result = match kind {
        Kind::String(v) => {
            v.data.extend_from_slice(text);
            v.close().map_err(Reject::Invalid)
        }
        Kind::Bool(b) => match text {
            b"true" => {
                b.push(true);
                Ok(())
            }
            b"false" => {
                b.push(false);
                Ok(())
            }
            _ => Err(Reject::WrongType),
        },
        Kind::Int(_) | Kind::Long(_) => match as_number(text) {
            Some(tok) => from_number(kind, tok, epoch),
            None => Err(Reject::WrongType),
        },
        Kind::Float(_) | Kind::Double(_) => match as_number(text) {
            Some(tok) => from_number(kind, tok, epoch),
            None => from_str(kind, text),
        },
        Kind::Date(_) | Kind::Time(_) | Kind::Timestamp { .. } => match as_number(text) {
            Some(tok) => from_number(kind, tok, epoch),
            None => from_str(kind, text),
        },
        Kind::Decimal { .. } | Kind::Binary(_) | Kind::Uuid(_) | Kind::Fixed { .. } => {
            from_str(kind, text)
        }
        Kind::Struct(_) | Kind::List(_) | Kind::Map(_) => {
            return Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                "keys of a nested type can only be given as [{\"key\":…,\"value\":…}] entries",
            ));
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(Reject::Invalid(fail)) => Err(fail),
        Err(Reject::WrongType) => Err(Fail::new(
            RecordErrorKind::TypeMismatch,
            format!("{} is not {}", show(text), expects(kind, epoch)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path must agree bit for bit with the standard library's correctly rounded parse.
    #[test]
    fn fast_float_matches_std() {
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut checked = 0;
        for _ in 0..200_000 {
            let r = next();
            let digits = (r % 19 + 1) as usize;
            let mantissa = (next() % 10u64.pow(digits as u32)).to_string();
            let point = (next() as usize) % (mantissa.len() + 1);
            let mut text = String::new();
            if r & 1 << 40 != 0 {
                text.push('-');
            }
            let (int, frac) = mantissa.split_at(point);
            text.push_str(if int.is_empty() { "0" } else { int });
            if !frac.is_empty() {
                text.push('.');
                text.push_str(frac);
            }
            if r & 1 << 41 != 0 {
                text.push_str(&format!("e{}", (next() % 60) as i64 - 30));
            }
            // JSON forbids leading zeros; the generator can make them, std does not care.
            let t = text.as_bytes();
            for double in [true, false] {
                if let Some(v) = fast_float(t, double) {
                    checked += 1;
                    if double {
                        assert_eq!(
                            v.to_bits(),
                            text.parse::<f64>().unwrap().to_bits(),
                            "{text}"
                        );
                    } else {
                        let want = text.parse::<f32>().unwrap();
                        assert_eq!((v as f32).to_bits(), want.to_bits(), "{text}");
                    }
                }
            }
        }
        assert!(checked > 100_000, "fast path taken only {checked} times");
        assert_eq!(
            fast_float(b"-0.0", true).map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(fast_float(b"12345678901234567890", true), None);
    }
}
