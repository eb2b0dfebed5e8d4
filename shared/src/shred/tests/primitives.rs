use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type};
use iceberg::spec::PrimitiveType as P;

use super::{all_ok, p, rejected, single};

#[test]
fn boolean_accepts_only_literals() {
    let (a, r) = single(
        p(P::Boolean),
        &["true", "false", "null", "1", "\"true\"", "tru"],
    );
    let a = a.as_boolean();
    assert_eq!(a.len(), 3);
    assert!(a.value(0));
    assert!(!a.value(1));
    assert!(a.is_null(2));
    all_ok(&r[..3]);
    assert!(rejected(&r[3], "v").contains("true or false"));
    assert!(rejected(&r[4], "v").contains("the string \"true\""));
    assert!(rejected(&r[5], "").contains("invalid literal"));
}

#[test]
fn int_range_and_integer_literals() {
    let (a, r) = single(
        p(P::Int),
        &[
            "0",
            "-2147483648",
            "2147483647",
            "-0",
            "2147483648",
            "1.5",
            "\"1\"",
            "1e2",
            "1.0",
        ],
    );
    let a = a.as_primitive::<Int32Type>();
    assert_eq!(a.values().as_ref(), &[0, i32::MIN, i32::MAX, 0]);
    all_ok(&r[..4]);
    let reason = rejected(&r[4], "v");
    assert!(
        reason.contains("out of range for int (-2147483648..=2147483647)"),
        "{reason}"
    );
    assert!(rejected(&r[5], "v").contains("1.5 is not an integer"));
    assert!(rejected(&r[6], "v").contains("expected a JSON integer (int)"));
    assert!(rejected(&r[7], "v").contains("not an integer"));
    assert!(rejected(&r[8], "v").contains("not an integer"));
}

#[test]
fn long_range() {
    let (a, r) = single(
        p(P::Long),
        &[
            "9223372036854775807",
            "-9223372036854775808",
            "42",
            "9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "true",
        ],
    );
    let a = a.as_primitive::<Int64Type>();
    assert_eq!(a.values().as_ref(), &[i64::MAX, i64::MIN, 42]);
    all_ok(&r[..3]);
    for bad in &r[3..6] {
        assert!(rejected(bad, "v").contains("out of range for long"));
    }
    assert!(rejected(&r[6], "v").contains("got true"));
}

#[test]
fn invalid_numbers_are_malformed_json() {
    let (_, r) = single(p(P::Long), &["01", "-", "+1", "1.", ".5"]);
    for bad in &r {
        rejected(bad, "");
    }
}

#[test]
fn double_numbers_and_special_strings() {
    let (a, r) = single(
        p(P::Double),
        &[
            "1.5",
            "-2",
            "1e-3",
            "0.1",
            "\"NaN\"",
            "\"Infinity\"",
            "\"-Infinity\"",
            "1e400",
            "\"1.5\"",
            "\"nan\"",
            "[]",
        ],
    );
    let a = a.as_primitive::<Float64Type>();
    assert_eq!(&a.values()[..4], &[1.5, -2.0, 0.001, 0.1]);
    assert!(a.value(4).is_nan());
    assert_eq!(a.value(5), f64::INFINITY);
    assert_eq!(a.value(6), f64::NEG_INFINITY);
    all_ok(&r[..7]);
    assert!(rejected(&r[7], "v").contains("out of range for double"));
    assert!(rejected(&r[8], "v").contains("only \"NaN\""));
    assert!(rejected(&r[9], "v").contains("only \"NaN\""));
    assert!(rejected(&r[10], "v").contains("got an array"));
}

#[test]
fn float_rounds_once_from_text() {
    let (a, r) = single(p(P::Float), &["0.1", "16777217", "\"-Infinity\"", "1e39"]);
    all_ok(&r[..3]);
    let a = a.as_primitive::<Float32Type>();
    assert_eq!(a.value(0), 0.1f32);
    assert_eq!(a.value(1), 16_777_216f32);
    assert_eq!(a.value(2), f32::NEG_INFINITY);
    assert!(rejected(&r[3], "v").contains("out of range for float"));
}

#[test]
fn decimal_exact_from_numbers_and_strings() {
    let ty = p(P::Decimal {
        precision: 10,
        scale: 2,
    });
    let (a, r) = single(
        ty,
        &[
            "123.45",
            "\"123.45\"",
            "\"-0.001e1\"",
            "1.5e3",
            "\"1.5E3\"",
            "7",
            "\"12.3400000\"",
            "-0.10",
            "\"+5\"",
            "0.1",
        ],
    );
    all_ok(&r);
    let a = a.as_primitive::<Decimal128Type>();
    assert_eq!(
        a.values().as_ref(),
        &[12345, 12345, -1, 150000, 150000, 700, 1234, -10, 500, 10]
    );
    assert_eq!(a.precision(), 10);
    assert_eq!(a.scale(), 2);
}

#[test]
fn decimal_rejects_rounding_and_overflow() {
    let ty = p(P::Decimal {
        precision: 5,
        scale: 2,
    });
    let (a, r) = single(
        ty,
        &[
            "1.234",
            "\"0.001\"",
            "1000",
            "\"123456\"",
            "1e3",
            "\"abc\"",
            "\"1.2.3\"",
            "true",
            "999.99",
        ],
    );
    assert_eq!(
        a.as_primitive::<Decimal128Type>().values().as_ref(),
        &[99999]
    );
    assert!(rejected(&r[0], "v").contains("would round"));
    assert!(rejected(&r[1], "v").contains("would round"));
    for bad in &r[2..5] {
        let reason = rejected(bad, "v");
        assert!(reason.contains("decimal(5,2)"), "{reason}");
        assert!(reason.contains("does not fit"), "{reason}");
    }
    assert!(rejected(&r[5], "v").contains("not a decimal number"));
    assert!(rejected(&r[6], "v").contains("not a decimal number"));
    assert!(rejected(&r[7], "v").contains("decimal(5,2)"));
    all_ok(&r[8..]);
}

#[test]
fn decimal_38_digits_exact() {
    let ty = p(P::Decimal {
        precision: 38,
        scale: 10,
    });
    let (a, r) = single(
        ty,
        &[
            "\"1234567890123456789012345678.9012345678\"",
            "-1234567890123456789012345678.9012345678",
            "\"9999999999999999999999999999.99999999990000\"",
            "\"12345678901234567890123456789.0\"",
            "\"0.00000000001\"",
        ],
    );
    all_ok(&r[..3]);
    let a = a.as_primitive::<Decimal128Type>();
    assert_eq!(a.value(0), 12345678901234567890123456789012345678i128);
    assert_eq!(a.value(1), -12345678901234567890123456789012345678i128);
    assert_eq!(a.value(2), 99999999999999999999999999999999999999i128);
    assert!(rejected(&r[3], "v").contains("decimal(38,10)"));
    assert!(rejected(&r[4], "v").contains("would round"));
}

#[test]
fn string_escapes_and_unicode() {
    let (a, r) = single(
        p(P::String),
        &[
            r#""plain""#,
            r#""a\"b\\c\/d\n\t\r\b\f""#,
            r#""\u00e9\u4e2d""#,
            r#""\ud83d\ude00!""#,
            "\"héllo wörld, a longer string to cross several words\"",
            r#""""#,
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\x""#,
            "12",
        ],
    );
    all_ok(&r[..6]);
    let a = a.as_string::<i32>();
    assert_eq!(a.value(0), "plain");
    assert_eq!(a.value(1), "a\"b\\c/d\n\t\r\u{8}\u{c}");
    assert_eq!(a.value(2), "é中");
    assert_eq!(a.value(3), "😀!");
    assert_eq!(
        a.value(4),
        "héllo wörld, a longer string to cross several words"
    );
    assert_eq!(a.value(5), "");
    assert!(rejected(&r[6], "").contains("surrogate"));
    assert!(rejected(&r[7], "").contains("surrogate"));
    assert!(rejected(&r[8], "").contains("invalid escape"));
    assert!(rejected(&r[9], "v").contains("expected a JSON string"));
}

#[test]
fn string_rejects_invalid_utf8_and_control_bytes() {
    let s = super::schema(vec![super::opt(1, "v", p(P::String))]);
    let mut sh = super::Shredder::new(&s, Default::default()).unwrap();
    let bad_utf8 = b"{\"v\":\"ab\xff\xfecd\"}";
    let e = sh.push(bad_utf8).unwrap_err();
    assert_eq!(e.field, "");
    assert!(e.reason.contains("invalid UTF-8"), "{}", e.reason);
    let overlong = b"{\"v\":\"0123456789abcdef\xc0\xaf\"}";
    assert!(
        sh.push(overlong)
            .unwrap_err()
            .reason
            .contains("invalid UTF-8")
    );
    let e = sh.push(b"{\"v\":\"a\tb\"}").unwrap_err();
    assert!(e.reason.contains("control character"), "{}", e.reason);
    sh.push("{\"v\":\"ok ✓\"}".as_bytes()).unwrap();
    let batch = sh.finish().unwrap();
    assert_eq!(batch.column(0).as_string::<i32>().value(0), "ok ✓");
    assert_eq!(batch.num_rows(), 1);
}

#[test]
fn uuid_canonical_text() {
    let (a, r) = single(
        p(P::Uuid),
        &[
            "\"123e4567-e89b-12d3-a456-426614174000\"",
            "\"123E4567-E89B-12D3-A456-426614174000\"",
            "\"123e4567e89b12d3a456426614174000\"",
            "\"123e4567-e89b-12d3-a456-42661417400g\"",
            "\"{123e4567-e89b-12d3-a456-426614174000}\"",
            "1",
        ],
    );
    all_ok(&r[..2]);
    let a = a.as_fixed_size_binary();
    let expected = [
        0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40,
        0x00,
    ];
    assert_eq!(a.value(0), expected);
    assert_eq!(a.value(1), expected);
    for bad in &r[2..5] {
        assert!(rejected(bad, "v").contains("is not a UUID"));
    }
    assert!(rejected(&r[5], "v").contains("UUID string"));
}

#[test]
fn fixed_needs_exact_length() {
    let (a, r) = single(
        p(P::Fixed(4)),
        &[
            "\"AQIDBA==\"",
            "\"AQIDBA\"",
            "\"AQID\"",
            "\"AQIDBAU=\"",
            "\"@@@@\"",
            "null",
        ],
    );
    let a = a.as_fixed_size_binary();
    assert_eq!(a.value(0), [1, 2, 3, 4]);
    assert_eq!(a.value(1), [1, 2, 3, 4]);
    assert!(a.is_null(2));
    assert_eq!(a.len(), 3);
    all_ok(&r[..2]);
    assert!(rejected(&r[2], "v").contains("decodes to 3 bytes; fixed[4] needs exactly 4"));
    assert!(rejected(&r[3], "v").contains("decodes to 5 bytes"));
    assert!(rejected(&r[4], "v").contains("not valid base64"));
    all_ok(&r[5..]);
}

#[test]
fn binary_base64_padding_optional() {
    let (a, r) = single(
        p(P::Binary),
        &[
            "\"aGk=\"",
            "\"aGk\"",
            "\"\"",
            r#""YWJj\/w==""#,
            "\"a\"",
            "\"aGk=\\n\"",
            "[1]",
        ],
    );
    all_ok(&r[..4]);
    let a = a.as_binary::<i64>();
    assert_eq!(a.value(0), b"hi");
    assert_eq!(a.value(1), b"hi");
    assert_eq!(a.value(2), b"");
    assert_eq!(a.value(3), b"abc\xff");
    assert!(rejected(&r[4], "v").contains("not valid base64"));
    assert!(rejected(&r[5], "v").contains("not valid base64"));
    assert!(rejected(&r[6], "v").contains("base64 string"));
}
