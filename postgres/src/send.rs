//! Values in their binary send form, as pgoutput's binary mode carries them
//! (Postgres 14+): printed as the server prints them under floe's session
//! settings (`values`' module doc), or written straight into the JSON the
//! text path makes of that text, which is what binary mode saves: the
//! server's output functions and floe's re-reading of their text.
//!
//! Only the types [`readable`] names are taken in binary; a peek whose
//! relations hold any other type is read again as text.

use std::fmt::Write as _;

use base64::Engine as _;
use iceberg::spec::PrimitiveType;

use crate::copy_binary::{Numeric, PG_EPOCH_DAYS};
use crate::schema::{PgColumn, iceberg_type};
use crate::values::{self, oid};

const US_PER_DAY: i64 = 86_400_000_000;

/// Whether floe reads values of type `type_oid` in their binary form.
pub(crate) fn readable(type_oid: u32) -> bool {
    matches!(
        type_oid,
        oid::BOOL
            | oid::BYTEA
            | oid::INT8
            | oid::INT2
            | oid::INT4
            | oid::TEXT
            | oid::OID
            | oid::JSON
            | oid::FLOAT4
            | oid::FLOAT8
            | oid::BPCHAR
            | oid::VARCHAR
            | oid::DATE
            | oid::TIME
            | oid::TIMESTAMP
            | oid::TIMESTAMPTZ
            | oid::NUMERIC
            | oid::UUID
            | oid::JSONB
    )
}

/// Appends the JSON form of one of `column`'s binary values to `out`: what
/// [`PgColumn::push_json`] makes of the server's text for the same value.
/// The error says what is wrong with the bytes.
pub(crate) fn push_json(out: &mut String, column: &PgColumn, v: &[u8]) -> Result<(), String> {
    match column.type_oid {
        oid::INT2 | oid::INT4 | oid::INT8 => {
            let n = int(column.type_oid, v)?;
            if n < 0 {
                out.push('-');
            }
            push_digits(out, n.unsigned_abs(), 1);
        }
        oid::NUMERIC => {
            // A decimal column takes the digits as a JSON number; any other
            // (no declared precision) as a string of them.
            let quoted = iceberg_type(column) == PrimitiveType::String;
            let start = out.len();
            if quoted {
                out.push('"');
            }
            match push_numeric(out, v)? {
                None if quoted => out.push('"'),
                None => {}
                Some(special) => {
                    out.truncate(start);
                    values::push_str(out, special);
                }
            }
        }
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON => values::push_str(out, utf8(v)?),
        oid::BYTEA => {
            values::push_str(out, &base64::engine::general_purpose::STANDARD.encode(v));
        }
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            let zoned = column.type_oid == oid::TIMESTAMPTZ;
            let us = i64::from_be_bytes(fixed(v)?);
            // Infinities and years before 1 or after 9999 keep the server's text.
            match civil(us).filter(|c| (1..=9999).contains(&c.year)) {
                Some(c) => {
                    out.push('"');
                    c.write(out, 'T');
                    out.push_str(if zoned { "+00:00\"" } else { "\"" });
                }
                None => column.push_json(out, &text(column.type_oid, v)?),
            }
        }
        _ => column.push_json(out, &text(column.type_oid, v)?),
    }
    Ok(())
}

/// The text output of a binary value of type `type_oid`, exactly as the
/// server prints it in floe's sessions (UTC, ISO dates, hex bytea,
/// `extra_float_digits = 3`).
pub(crate) fn text(type_oid: u32, v: &[u8]) -> Result<String, String> {
    Ok(match type_oid {
        oid::BOOL => match v {
            [0] => "f".into(),
            [_] => "t".into(),
            _ => return Err(length(1, v)),
        },
        oid::INT2 | oid::INT4 | oid::INT8 => int(type_oid, v)?.to_string(),
        oid::OID => u32::from_be_bytes(fixed(v)?).to_string(),
        oid::FLOAT4 => {
            let x = f32::from_be_bytes(fixed(v)?);
            float(f64::from(x), &format!("{x:e}"), 6)
        }
        oid::FLOAT8 => {
            let x = f64::from_be_bytes(fixed(v)?);
            float(x, &format!("{x:e}"), 15)
        }
        oid::NUMERIC => numeric(v)?,
        oid::DATE => date(i32::from_be_bytes(fixed(v)?)),
        oid::TIME => {
            let mut out = String::new();
            clock(&mut out, i64::from_be_bytes(fixed(v)?));
            out
        }
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            timestamp(i64::from_be_bytes(fixed(v)?), type_oid == oid::TIMESTAMPTZ)
        }
        oid::BYTEA => {
            let mut out = String::with_capacity(2 + 2 * v.len());
            out.push_str("\\x");
            for b in v {
                put(&mut out, format_args!("{b:02x}"));
            }
            out
        }
        oid::UUID => uuid::Uuid::from_bytes(fixed(v)?).hyphenated().to_string(),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON => utf8(v)?.to_string(),
        oid::JSONB => match v.split_first() {
            Some((1, rest)) => utf8(rest)?.to_string(),
            _ => return Err("jsonb value without format version 1".into()),
        },
        other => return Err(format!("type oid {other} has no binary reader")),
    })
}

/// Appends formatted text: writing into a String cannot fail, so its
/// `Ok` is all there is to the result.
fn put(out: &mut String, args: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(args);
}

fn int(type_oid: u32, v: &[u8]) -> Result<i64, String> {
    Ok(match type_oid {
        oid::INT2 => i64::from(i16::from_be_bytes(fixed(v)?)),
        oid::INT4 => i64::from(i32::from_be_bytes(fixed(v)?)),
        _ => i64::from_be_bytes(fixed(v)?),
    })
}

fn fixed<const N: usize>(v: &[u8]) -> Result<[u8; N], String> {
    v.try_into().map_err(|_| length(N, v))
}

fn length(want: usize, v: &[u8]) -> String {
    format!("{} bytes where the type's binary form has {want}", v.len())
}

fn utf8(v: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(v).map_err(|_| "text is not UTF-8 (floe needs a UTF8 database)".into())
}

/// A float as `float4out`/`float8out` print it with `extra_float_digits`
/// above 0: the shortest digits that read back (`sci`, Rust's `{:e}` of
/// the value, has the same), in fixed notation for decimal exponents from
/// -4 to below `digits` (6 for float4, 15 for float8), else as `1.5e+20`.
fn float(x: f64, sci: &str, digits: i32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let (sign, sci) = match sci.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", sci),
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let d: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let n = d.len() as i32;
    let body = if (-4..digits).contains(&exp) {
        if exp < 0 {
            format!("0.{}{d}", "0".repeat((-exp - 1) as usize))
        } else if n <= exp + 1 {
            format!("{d}{}", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = d.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        }
    } else {
        let (first, rest) = d.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{point}{rest}e{esign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

/// A numeric's binary form (digit count, weight, sign, display scale, then
/// base-10000 digits) as `numeric_out` prints it.
fn numeric(v: &[u8]) -> Result<String, String> {
    let mut out = String::with_capacity(2 * v.len());
    if let Some(special) = push_numeric(&mut out, v)? {
        out.push_str(special);
    }
    Ok(out)
}

/// Appends a finite numeric's digits to `out`, read straight from its
/// binary form; for NaN and the infinities appends nothing and returns
/// their names.
fn push_numeric(out: &mut String, v: &[u8]) -> Result<Option<&'static str>, String> {
    let n = Numeric::parse(v).ok_or("numeric value cut short or of the wrong length")?;
    match n.sign {
        0x0000 => {}
        Numeric::NEGATIVE => out.push('-'),
        0xC000 => return Ok(Some("NaN")),
        0xD000 => return Ok(Some("Infinity")),
        0xF000 => return Ok(Some("-Infinity")),
        other => return Err(format!("numeric sign {other:#06x}")),
    }
    let digit = |i: i32| -> Result<u64, String> {
        let Some(pair) = usize::try_from(i)
            .ok()
            .and_then(|i| n.digits.get(2 * i..2 * i + 2))
        else {
            return Ok(0);
        };
        match u16::from_be_bytes([pair[0], pair[1]]) {
            d @ 0..=9999 => Ok(u64::from(d)),
            _ => Err("numeric digit above 9999".into()),
        }
    };
    let weight = i32::from(n.weight);
    if weight < 0 {
        out.push('0');
    } else {
        for i in 0..=weight {
            push_digits(out, digit(i)?, if i == 0 { 1 } else { 4 });
        }
    }
    if n.dscale > 0 {
        out.push('.');
        let mut left = usize::from(n.dscale);
        let mut i = weight + 1;
        while left > 0 {
            let d = digit(i)?;
            // The last group keeps only the scale's leading digits.
            let keep = left.min(4);
            push_digits(out, d / 10u64.pow((4 - keep) as u32), keep);
            left -= keep;
            i += 1;
        }
    }
    Ok(None)
}

/// Appends `n` in decimal, zero-padded to at least `width` digits.
fn push_digits(out: &mut String, mut n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let from = i.min(buf.len().saturating_sub(width));
    out.extend(buf[from..].iter().map(|&b| char::from(b)));
}

/// A date (days since 2000-01-01) as `date_out` prints it in ISO style.
fn date(days: i32) -> String {
    match days {
        i32::MIN => "-infinity".into(),
        i32::MAX => "infinity".into(),
        _ => {
            let (year, month, day) =
                floe_core::calendar::civil_from_days(i64::from(days) + i64::from(PG_EPOCH_DAYS));
            let (year, era) = bc(year);
            format!("{year:04}-{month:02}-{day:02}{era}")
        }
    }
}

/// A timestamp (microseconds since 2000-01-01) as `timestamp_out` or, in
/// UTC, `timestamptz_out` prints it in ISO style.
fn timestamp(us: i64, zoned: bool) -> String {
    let Some(c) = civil(us) else {
        return if us < 0 { "-infinity" } else { "infinity" }.into();
    };
    let mut out = String::with_capacity(32);
    let (year, era) = bc(c.year);
    let c = Civil { year, ..c };
    c.write(&mut out, ' ');
    if zoned {
        out.push_str("+00");
    }
    out.push_str(era);
    out
}

/// Postgres prints year 0 and before as 1 BC and before.
fn bc(year: i64) -> (i64, &'static str) {
    if year <= 0 {
        (1 - year, " BC")
    } else {
        (year, "")
    }
}

/// A timestamp's calendar date and time of day.
#[derive(Clone, Copy)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    /// Microseconds since midnight.
    time_us: i64,
}

/// The date and time of a timestamp (microseconds since 2000-01-01);
/// `None` for the infinities.
fn civil(us: i64) -> Option<Civil> {
    if us == i64::MIN || us == i64::MAX {
        return None;
    }
    // Counted from Postgres' epoch: the latest timestamps are past
    // i64's range as microseconds since Unix's.
    let days = us.div_euclid(US_PER_DAY) + i64::from(PG_EPOCH_DAYS);
    let (year, month, day) = floe_core::calendar::civil_from_days(days);
    Some(Civil {
        year,
        month,
        day,
        time_us: us.rem_euclid(US_PER_DAY),
    })
}

impl Civil {
    /// `YYYY-MM-DD`, `sep`, then the time of day.
    fn write(&self, out: &mut String, sep: char) {
        // Years before 1 are written by the caller as BC, so positive here.
        push_digits(out, self.year.unsigned_abs(), 4);
        out.push('-');
        push_digits(out, u64::from(self.month), 2);
        out.push('-');
        push_digits(out, u64::from(self.day), 2);
        out.push(sep);
        clock(out, self.time_us);
    }
}

/// `HH:MM:SS` and, when not whole, the second's fraction without trailing
/// zeros, as Postgres prints a time of day.
fn clock(out: &mut String, us: i64) {
    let secs = us.div_euclid(1_000_000).unsigned_abs();
    push_digits(out, secs / 3600, 2);
    out.push(':');
    push_digits(out, secs % 3600 / 60, 2);
    out.push(':');
    push_digits(out, secs % 60, 2);
    let mut frac = us.rem_euclid(1_000_000).unsigned_abs();
    if frac != 0 {
        let mut width = 6;
        while frac.is_multiple_of(10) {
            frac /= 10;
            width -= 1;
        }
        out.push('.');
        push_digits(out, frac, width);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric_bytes(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((digits.len() as u16).to_be_bytes());
        v.extend(weight.to_be_bytes());
        v.extend(sign.to_be_bytes());
        v.extend(dscale.to_be_bytes());
        for d in digits {
            v.extend(d.to_be_bytes());
        }
        v
    }

    #[test]
    fn numerics_print_as_numeric_out() {
        let n = |w, s, d, digits: &[u16]| numeric(&numeric_bytes(w, s, d, digits)).unwrap();
        assert_eq!(n(0, 0, 2, &[1234, 5000]), "1234.50");
        assert_eq!(n(-1, 0x4000, 6, &[1000]), "-0.100000");
        assert_eq!(n(1, 0, 0, &[1, 2300]), "12300");
        assert_eq!(n(0, 0, 0, &[]), "0");
        assert_eq!(n(-3, 0, 9, &[1000]), "0.000000001");
        assert_eq!(n(0, 0xC000, 0, &[]), "NaN");
        assert!(numeric(&numeric_bytes(0, 0, 0, &[10000])).is_err());
        assert!(numeric(&[0, 1]).is_err());
    }

    #[test]
    fn floats_print_as_float_out() {
        let f8 = |x: f64| float(x, &format!("{x:e}"), 15);
        let f4 = |x: f32| float(f64::from(x), &format!("{x:e}"), 6);
        assert_eq!(f8(1e20), "1e+20");
        assert_eq!(f8(1e14), "100000000000000");
        assert_eq!(f8(1e15), "1e+15");
        assert_eq!(f8(0.0001), "0.0001");
        assert_eq!(f8(0.00001), "1e-05");
        assert_eq!(f8(2.25), "2.25");
        assert_eq!(f8(-0.0), "-0");
        assert_eq!(f8(5e-324), "5e-324");
        assert_eq!(f4(1.5), "1.5");
        assert_eq!(f4(1e6), "1e+06");
        assert_eq!(f4(123456.0), "123456");
        assert_eq!(f4(-3.4e38), "-3.4e+38");
    }

    #[test]
    fn times_print_as_iso() {
        assert_eq!(timestamp(0, true), "2000-01-01 00:00:00+00");
        assert_eq!(timestamp(1_500_000, false), "2000-01-01 00:00:01.5");
        assert_eq!(timestamp(i64::MAX, true), "infinity");
        assert_eq!(
            timestamp(9_223_371_331_199_999_999, false),
            "294276-12-31 23:59:59.999999"
        );
        assert_eq!(date(0), "2000-01-01");
        assert_eq!(date(-730_119), "0001-01-01");
        assert_eq!(date(-730_120), "0001-12-31 BC");
    }
}
