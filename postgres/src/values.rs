//! Postgres text output to JSON values of floe's flat `_op` lines.
//!
//! The text comes from the type output functions (pgoutput tuples and the
//! snapshot's simple-protocol SELECT), with the session pinned to
//! `TimeZone=UTC`, `DateStyle=ISO`, `bytea_output=hex` and
//! `extra_float_digits=3` so that both paths print alike.

use base64::Engine as _;

/// The value floe reads as "this TOASTed column did not change: keep the old value".
pub const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// Type oids floe converts specially; everything else becomes a JSON string.
pub mod oid {
    /// `bool`
    pub const BOOL: u32 = 16;
    /// `bytea`
    pub const BYTEA: u32 = 17;
    /// `int8`
    pub const INT8: u32 = 20;
    /// `int2`
    pub const INT2: u32 = 21;
    /// `int4`
    pub const INT4: u32 = 23;
    /// `text`
    pub const TEXT: u32 = 25;
    /// `oid`
    pub const OID: u32 = 26;
    /// `json`
    pub const JSON: u32 = 114;
    /// `float4`
    pub const FLOAT4: u32 = 700;
    /// `float8`
    pub const FLOAT8: u32 = 701;
    /// `bpchar`
    pub const BPCHAR: u32 = 1042;
    /// `varchar`
    pub const VARCHAR: u32 = 1043;
    /// `date`
    pub const DATE: u32 = 1082;
    /// `time`
    pub const TIME: u32 = 1083;
    /// `timestamp`
    pub const TIMESTAMP: u32 = 1114;
    /// `timestamptz`
    pub const TIMESTAMPTZ: u32 = 1184;
    /// `numeric`
    pub const NUMERIC: u32 = 1700;
    /// `uuid`
    pub const UUID: u32 = 2950;
    /// `jsonb`
    pub const JSONB: u32 = 3802;
}

/// Appends the JSON form of one value of type `type_oid`, given its Postgres
/// text output, to `out`.
pub fn push_json(out: &mut String, type_oid: u32, text: &str) {
    match type_oid {
        oid::INT2 | oid::INT4 | oid::INT8 | oid::OID | oid::FLOAT4 | oid::FLOAT8 => {
            // NaN and the infinities have no JSON number form.
            push_number_or_string(out, text)
        }
        // Numerics go out digit for digit: through f64 they would round.
        oid::NUMERIC => push_number_or_string(out, text),
        oid::BOOL => out.push_str(match text {
            "t" | "true" => "true",
            "f" | "false" => "false",
            _ => return push_str(out, text),
        }),
        oid::TIMESTAMPTZ => push_str(out, &rfc3339(text)),
        oid::TIMESTAMP => push_str(out, &iso_local(text)),
        oid::BYTEA => match hex_bytes(text) {
            Some(bytes) => push_str(
                out,
                &base64::engine::general_purpose::STANDARD.encode(bytes),
            ),
            None => push_str(out, text),
        },
        _ => push_str(out, text),
    }
}

/// Appends `text` as a JSON string.
pub fn push_str(out: &mut String, text: &str) {
    // Serialising a str cannot fail; the fallback only keeps this panic-free.
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("null"),
    }
}

fn push_number_or_string(out: &mut String, text: &str) {
    if is_json_number(text) {
        out.push_str(text);
    } else {
        push_str(out, text);
    }
}

/// Whether `text` is a number in JSON's grammar (so it can be copied verbatim).
pub fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.first() == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    let n = digits(&mut i);
    if n == 0 || (n > 1 && b[int_start] == b'0') {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `2024-01-02 03:04:05.123456+00` to `2024-01-02T03:04:05.123456+00:00`.
/// Infinity and BC values, which RFC 3339 cannot express, stay as they are.
fn rfc3339(text: &str) -> String {
    let Some((date, time)) = text.split_once(' ') else {
        return text.to_string();
    };
    if time.contains(' ') {
        return text.to_string();
    }
    let Some(sign_at) = time.rfind(['+', '-']) else {
        return text.to_string();
    };
    let (clock, offset) = time.split_at(sign_at);
    let offset = match offset.len() {
        3 => format!("{offset}:00"),
        _ => offset.to_string(),
    };
    format!("{date}T{clock}{offset}")
}

/// `2024-01-02 03:04:05.123456` to `2024-01-02T03:04:05.123456`.
fn iso_local(text: &str) -> String {
    match text.split_once(' ') {
        Some((date, time)) if !time.contains(' ') => format!("{date}T{time}"),
        _ => text.to_string(),
    }
}

/// Decodes bytea's hex output (`\x0a0b`); `None` for anything else.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(type_oid: u32, text: &str) -> String {
        let mut out = String::new();
        push_json(&mut out, type_oid, text);
        out
    }

    #[test]
    fn numbers_keep_their_digits() {
        assert_eq!(
            json(oid::NUMERIC, "12345678901234567890.123456789"),
            "12345678901234567890.123456789"
        );
        assert_eq!(json(oid::NUMERIC, "-0.000100"), "-0.000100");
        assert_eq!(json(oid::NUMERIC, "NaN"), "\"NaN\"");
        assert_eq!(json(oid::FLOAT8, "1e+20"), "1e+20");
        assert_eq!(json(oid::FLOAT8, "-Infinity"), "\"-Infinity\"");
        assert_eq!(
            json(oid::INT8, "-9223372036854775808"),
            "-9223372036854775808"
        );
        for bad in ["", "-", "01", "1.", ".5", "1e", "+1", "1e+"] {
            assert!(!is_json_number(bad), "{bad}");
        }
    }

    #[test]
    fn times_become_iso() {
        assert_eq!(
            json(oid::TIMESTAMPTZ, "2024-01-02 03:04:05.123456+00"),
            "\"2024-01-02T03:04:05.123456+00:00\""
        );
        assert_eq!(
            json(oid::TIMESTAMPTZ, "2024-01-02 03:04:05-05:30"),
            "\"2024-01-02T03:04:05-05:30\""
        );
        assert_eq!(json(oid::TIMESTAMPTZ, "infinity"), "\"infinity\"");
        assert_eq!(
            json(oid::TIMESTAMP, "2024-01-02 03:04:05.5"),
            "\"2024-01-02T03:04:05.5\""
        );
        assert_eq!(json(oid::DATE, "2024-01-02"), "\"2024-01-02\"");
    }

    #[test]
    fn other_types() {
        assert_eq!(json(oid::BOOL, "t"), "true");
        assert_eq!(json(oid::BOOL, "f"), "false");
        assert_eq!(json(oid::BYTEA, "\\x00ff10"), "\"AP8Q\"");
        assert_eq!(json(oid::JSONB, "{\"a\": 1}"), "\"{\\\"a\\\": 1}\"");
        assert_eq!(json(oid::TEXT, "line\nbreak"), "\"line\\nbreak\"");
    }
}
