//! Every class of rejection carries its `RecordErrorKind`.

use iceberg::spec::{PrimitiveType as P, Schema, Type};

use super::super::{EpochUnit, ShredOptions, UnknownFields};
use super::{list, map, opt, p, rejected, req, run_with, schema, strukt};
use crate::error::RecordErrorKind as K;

/// Pushes each record and asserts it is rejected at `field`, with `kind`, for a reason
/// containing `says` (so each case hits the error site it is meant to).
#[track_caller]
fn expect(schema: &Schema, options: ShredOptions, cases: &[(&str, &str, K, &str)]) {
    let records: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let (batch, results) = run_with(schema, options, &records);
    assert_eq!(batch.num_rows(), 0);
    for ((record, field, kind, says), result) in cases.iter().zip(&results) {
        let reason = rejected(result, field);
        assert!(reason.contains(says), "{record}: {reason}");
        let got = result.as_ref().err().map(|e| e.kind);
        assert_eq!(got, Some(*kind), "{record}: {reason}");
    }
}

/// Cases of one optional column `v` of type `ty`, as `{"v": <value>}`.
#[track_caller]
fn expect_v(ty: Type, options: ShredOptions, cases: &[(&str, K, &str)]) {
    let s = schema(vec![opt(1, "v", ty)]);
    let records: Vec<String> = cases.iter().map(|c| format!("{{\"v\":{}}}", c.0)).collect();
    let full: Vec<(&str, &str, K, &str)> = records
        .iter()
        .zip(cases)
        .map(|(r, c)| (r.as_str(), "v", c.1, c.2))
        .collect();
    expect(&s, options, &full);
}

fn dflt() -> ShredOptions {
    ShredOptions::default()
}

fn decimal(precision: u32, scale: u32) -> Type {
    p(P::Decimal { precision, scale })
}

#[test]
fn syntax() {
    let s = schema(vec![req(1, "id", p(P::Long)), opt(2, "b", p(P::Boolean))]);
    let deep = format!(r#"{{"id":1,"x":{}}}"#, "[".repeat(300) + &"]".repeat(300));
    expect(
        &s,
        dflt(),
        &[
            ("", "", K::Syntax, "empty record"),
            // Broken input that starts like a value is malformed, not a non-object.
            ("nope", "", K::Syntax, "invalid literal"),
            ("[1,", "", K::Syntax, "unexpected end of input"),
            ("{\"id\":1,", "", K::Syntax, "unexpected end of input"),
            ("{\"id\":1,\"b\":tru}", "", K::Syntax, "invalid literal"),
            ("{\"id\":01}", "", K::Syntax, "invalid JSON at byte"),
            ("{\"id\":1}x", "", K::Syntax, "after the JSON object"),
            ("{\"id\":1,\"x\":\"\\q\"}", "", K::Syntax, "invalid escape"),
            (
                "{\"id\":1,\"x\":\"a\u{1}\"}",
                "",
                K::Syntax,
                "control character",
            ),
            (&deep, "", K::Syntax, "nested too deeply"),
            // A type error comes first, but the broken input is what is reported.
            ("{\"id\":\"x\",\"b\":nul}", "", K::Syntax, "invalid literal"),
        ],
    );
    let mut shredder = super::super::Shredder::new(&s, dflt()).unwrap();
    let e = shredder.push(b"{\"id\":1,\"x\":\"\xff\"}").unwrap_err();
    assert_eq!((e.kind, e.field.as_str()), (K::Syntax, ""));
    assert!(e.reason.contains("invalid UTF-8"), "{}", e.reason);
}

#[test]
fn type_mismatch() {
    expect(
        &schema(vec![opt(1, "v", p(P::Long))]),
        dflt(),
        &[
            (
                "[1]",
                "",
                K::TypeMismatch,
                "must be a JSON object, got an array",
            ),
            ("42", "", K::TypeMismatch, "got the number 42"),
            (
                "{\"v\":\"12\"}",
                "v",
                K::TypeMismatch,
                "expected a JSON integer (long)",
            ),
            (
                "{\"v\":true}",
                "v",
                K::TypeMismatch,
                "expected a JSON integer (long)",
            ),
            ("{\"v\":1.5}", "v", K::TypeMismatch, "not an integer"),
            ("{\"v\":1e3}", "v", K::TypeMismatch, "not an integer"),
        ],
    );
    expect_v(
        p(P::Int),
        dflt(),
        &[("2.0", K::TypeMismatch, "not an integer")],
    );
    expect_v(
        p(P::Boolean),
        dflt(),
        &[("1", K::TypeMismatch, "true or false")],
    );
    expect_v(
        p(P::String),
        dflt(),
        &[("1", K::TypeMismatch, "a JSON string")],
    );
    expect_v(
        p(P::Double),
        dflt(),
        &[
            ("\"1.5\"", K::TypeMismatch, "not a number"),
            ("[]", K::TypeMismatch, "expected a JSON number"),
        ],
    );
    expect_v(
        decimal(5, 2),
        dflt(),
        &[
            ("\"abc\"", K::TypeMismatch, "not a decimal number"),
            ("true", K::TypeMismatch, "decimal(5,2)"),
        ],
    );
    expect_v(
        p(P::Date),
        dflt(),
        &[
            ("\"2026-13-01\"", K::TypeMismatch, "not a valid date"),
            ("1.5", K::TypeMismatch, "whole number of days"),
        ],
    );
    expect_v(
        p(P::Time),
        dflt(),
        &[("\"25:00:00\"", K::TypeMismatch, "not a valid time")],
    );
    expect_v(
        p(P::Timestamptz),
        dflt(),
        &[
            ("\"yesterday\"", K::TypeMismatch, "not a valid timestamp"),
            (
                "\"2026-02-30T00:00:00Z\"",
                K::TypeMismatch,
                "not a valid timestamp",
            ),
            ("true", K::TypeMismatch, "ISO-8601"),
        ],
    );
    expect_v(
        p(P::Uuid),
        dflt(),
        &[("\"xyz\"", K::TypeMismatch, "not a UUID")],
    );
    expect_v(
        p(P::Binary),
        dflt(),
        &[("\"***\"", K::TypeMismatch, "not valid base64")],
    );
    expect_v(
        p(P::Fixed(4)),
        dflt(),
        &[("\"AAAAAAA=\"", K::TypeMismatch, "needs exactly 4")],
    );
    expect_v(
        strukt(vec![opt(2, "a", p(P::Long))]),
        dflt(),
        &[("[]", K::TypeMismatch, "expected a JSON object (struct)")],
    );
    expect_v(
        list(2, p(P::Long), false),
        dflt(),
        &[("{}", K::TypeMismatch, "expected a JSON array (list)")],
    );
    let int_keys = schema(vec![opt(1, "m", map(2, p(P::Int), 3, p(P::Long), false))]);
    expect(
        &int_keys,
        dflt(),
        &[
            ("{\"m\":1}", "m", K::TypeMismatch, "(map)"),
            (
                "{\"m\":{\"abc\":1}}",
                "m{\"abc\"}",
                K::TypeMismatch,
                "invalid map key",
            ),
            ("{\"m\":[1]}", "m[0]", K::TypeMismatch, "must be an object"),
            (
                "{\"m\":[{\"key\":1,\"value\":2,\"extra\":3}]}",
                "m[0]",
                K::TypeMismatch,
                "unexpected member \"extra\"",
            ),
        ],
    );
}

#[test]
fn out_of_range() {
    expect_v(
        p(P::Int),
        dflt(),
        &[
            ("2147483648", K::OutOfRange, "out of range for int"),
            ("-2147483649", K::OutOfRange, "out of range for int"),
        ],
    );
    expect_v(
        p(P::Long),
        dflt(),
        &[
            (
                "9223372036854775808",
                K::OutOfRange,
                "out of range for long",
            ),
            (
                "-9223372036854775809",
                K::OutOfRange,
                "out of range for long",
            ),
            (
                "123456789012345678901234567890",
                K::OutOfRange,
                "out of range",
            ),
        ],
    );
    expect_v(
        p(P::Double),
        dflt(),
        &[("1e400", K::OutOfRange, "out of range for double")],
    );
    expect_v(
        p(P::Float),
        dflt(),
        &[("1e39", K::OutOfRange, "out of range for float")],
    );
    expect_v(
        decimal(5, 2),
        dflt(),
        &[
            (
                "1000",
                K::OutOfRange,
                "at most 3 digits before the decimal point",
            ),
            ("\"-1e3\"", K::OutOfRange, "at most 3 digits"),
            // Too long to hold exactly, and too large as well.
            (
                "1234567890123456789012345678901234567890.5",
                K::OutOfRange,
                "more than 38 significant digits",
            ),
        ],
    );
    expect_v(
        p(P::Date),
        dflt(),
        &[("3000000000", K::OutOfRange, "within the date range")],
    );
    expect_v(
        p(P::Time),
        dflt(),
        &[
            ("86400000", K::OutOfRange, "not within one day"),
            ("-1", K::OutOfRange, "not within one day"),
        ],
    );
    expect_v(
        p(P::Timestamptz),
        dflt(),
        &[
            ("1e30", K::OutOfRange, "out of range for the column"),
            (
                "1234567890123456789012345678901234567890",
                K::OutOfRange,
                "too many digits",
            ),
        ],
    );
    expect_v(
        p(P::TimestamptzNs),
        dflt(),
        &[(
            "\"9999-12-31T23:59:59Z\"",
            K::OutOfRange,
            "out of range for the column",
        )],
    );
    let int_keys = schema(vec![opt(1, "m", map(2, p(P::Int), 3, p(P::Long), false))]);
    expect(
        &int_keys,
        dflt(),
        &[(
            "{\"m\":{\"99999999999\":1}}",
            "m{\"99999999999\"}",
            K::OutOfRange,
            "invalid map key: 99999999999 is out of range for int",
        )],
    );
}

#[test]
fn precision() {
    expect_v(
        decimal(5, 2),
        dflt(),
        &[
            ("1.234", K::Precision, "would round"),
            ("\"0.001\"", K::Precision, "would round"),
            // Too long to hold exactly; the integer part fits, so it is the fraction.
            (
                "0.1234567890123456789012345678901234567890",
                K::Precision,
                "more than 38 significant digits",
            ),
        ],
    );
    expect_v(
        p(P::Timestamptz),
        dflt(),
        &[
            (
                "\"2026-11-30T10:00:00.1234567Z\"",
                K::Precision,
                "would truncate",
            ),
            // 1.0005 ms is 1000.5 µs.
            (
                "1.0005",
                K::Precision,
                "finer than the column's microseconds",
            ),
            (
                "1.234567890123456789012345678901234567890",
                K::Precision,
                "too many digits",
            ),
        ],
    );
    expect_v(
        p(P::Time),
        ShredOptions {
            epoch_unit: EpochUnit::Microseconds,
            ..dflt()
        },
        &[
            ("\"10:00:00.0000001\"", K::Precision, "would truncate"),
            ("1.5", K::Precision, "finer than the column's microseconds"),
        ],
    );
}

#[test]
fn missing_required() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "s", strukt(vec![req(3, "a", p(P::Long))])),
        opt(4, "m", map(5, p(P::Long), 6, p(P::Long), true)),
    ]);
    expect(
        &s,
        dflt(),
        &[
            ("{}", "id", K::MissingRequired, "required field is missing"),
            ("{\"id\":1,\"s\":{}}", "s.a", K::MissingRequired, "missing"),
            (
                "{\"id\":1,\"m\":[{\"value\":1}]}",
                "m[0].key",
                K::MissingRequired,
                "no \"key\"",
            ),
            (
                "{\"id\":1,\"m\":[{\"key\":1}]}",
                "m[0].value",
                K::MissingRequired,
                "no \"value\"",
            ),
        ],
    );
}

#[test]
fn null_required() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "l", list(3, p(P::Long), true)),
        opt(4, "m", map(5, p(P::String), 6, p(P::Long), true)),
        opt(7, "s", strukt(vec![req(8, "a", p(P::Long))])),
    ]);
    expect(
        &s,
        dflt(),
        &[
            (
                "{\"id\":null}",
                "id",
                K::NullRequired,
                "null is not allowed",
            ),
            (
                "{\"id\":1,\"l\":[1,null]}",
                "l[1]",
                K::NullRequired,
                "elements are required",
            ),
            (
                "{\"id\":1,\"m\":{\"k\":null}}",
                "m{\"k\"}",
                K::NullRequired,
                "values are required",
            ),
            (
                "{\"id\":1,\"m\":[{\"key\":\"k\",\"value\":null}]}",
                "m[0].value",
                K::NullRequired,
                "null is not allowed",
            ),
            (
                "{\"id\":1,\"s\":{\"a\":null}}",
                "s.a",
                K::NullRequired,
                "null is not allowed",
            ),
        ],
    );
}

#[test]
fn duplicate() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "m", map(3, p(P::String), 4, p(P::Long), false)),
        opt(5, "n", map(6, p(P::Long), 7, p(P::Long), false)),
    ]);
    expect(
        &s,
        dflt(),
        &[
            (
                "{\"id\":1,\"id\":2}",
                "id",
                K::Duplicate,
                "duplicate key in one object",
            ),
            (
                "{\"id\":1,\"m\":{\"a\":1,\"a\":2}}",
                "m{\"a\"}",
                K::Duplicate,
                "duplicate map key",
            ),
            (
                "{\"id\":1,\"n\":[{\"key\":1,\"value\":1},{\"key\":1,\"value\":2}]}",
                "n",
                K::Duplicate,
                "entries 0 and 1 are equal",
            ),
            (
                "{\"id\":1,\"n\":[{\"key\":1,\"key\":2}]}",
                "n[0].key",
                K::Duplicate,
                "duplicate key in one object",
            ),
        ],
    );
    // Ignoring case, a key that could be either of two fields.
    let s = schema(vec![
        opt(1, "name", p(P::String)),
        opt(2, "NAME", p(P::String)),
    ]);
    expect(
        &s,
        ShredOptions {
            case_insensitive: true,
            ..dflt()
        },
        &[(
            "{\"Name\":\"x\"}",
            "Name",
            K::Duplicate,
            "matches several fields",
        )],
    );
}

#[test]
fn unknown_field_only_when_rejecting() {
    let s = schema(vec![opt(1, "a", p(P::Long))]);
    expect(
        &s,
        ShredOptions {
            unknown_fields: UnknownFields::Reject,
            ..dflt()
        },
        &[("{\"a\":1,\"b\":2}", "b", K::UnknownField, "unknown field")],
    );
}

#[test]
fn batch_full() {
    // Past i32::MAX entries a list or map offset cannot be written; building a batch that
    // large is out of reach here, so check the failure the parser returns for it.
    let fail = super::super::column::child_offset(i32::MAX as usize + 1).unwrap_err();
    assert_eq!(fail.kind, K::BatchFull);
    assert!(
        fail.reason.contains("finish batches earlier"),
        "{}",
        fail.reason
    );
    assert_eq!(super::super::column::child_offset(7).ok(), Some(7));
}
