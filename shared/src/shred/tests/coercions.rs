use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType};
use iceberg::spec::PrimitiveType as P;

use super::{all_ok, p, rejected, single, single_with};
use crate::shred::{Coercions, ShredOptions};

fn with(numeric_strings: bool, to_string: bool) -> ShredOptions {
    ShredOptions {
        coerce: Coercions {
            numeric_strings,
            to_string,
        },
        ..ShredOptions::default()
    }
}

#[test]
fn numeric_strings_go_to_numbers_only_when_asked() {
    let values = [
        "\"1009635\"",
        "\" -7 \"",
        "12",
        "\"1.5\"",
        "\"abc\"",
        "\"\"",
        "\"9223372036854775808\"",
    ];
    let (_, r) = single(p(P::Long), &values);
    assert!(rejected(&r[0], "v").contains("got the string \"1009635\""));
    let (a, r) = single_with(p(P::Long), with(true, false), &values);
    assert_eq!(
        a.as_primitive::<Int64Type>().values().as_ref(),
        &[1009635, -7, 12]
    );
    all_ok(&r[..3]);
    assert!(rejected(&r[3], "v").contains("not an integer"));
    let reason = rejected(&r[4], "v");
    assert!(
        reason.contains("a string holding one (long), got the string \"abc\""),
        "{reason}"
    );
    assert!(rejected(&r[5], "v").contains("got the string \"\""));
    assert!(rejected(&r[6], "v").contains("out of range for long"));

    let (a, r) = single_with(p(P::Int), with(true, false), &["\"42\"", "\"3000000000\""]);
    assert_eq!(a.as_primitive::<Int32Type>().values().as_ref(), &[42]);
    assert!(rejected(&r[1], "v").contains("out of range for int"));

    let (a, r) = single_with(
        p(P::Double),
        with(true, false),
        &["\"2.5\"", "\"NaN\"", "\"x\""],
    );
    let a = a.as_primitive::<Float64Type>();
    assert_eq!(a.value(0), 2.5);
    assert!(a.value(1).is_nan());
    assert!(rejected(&r[2], "v").contains("\"x\" is not a number"));

    let (a, r) = single_with(
        p(P::Boolean),
        with(true, false),
        &["\"true\"", "\"false\"", "\"yes\""],
    );
    let a = a.as_boolean();
    assert!(a.value(0) && !a.value(1));
    assert!(rejected(&r[2], "v").contains("true or false"));
}

#[test]
fn numeric_strings_are_epochs_in_temporal_columns_and_iso_still_parses() {
    let (a, r) = single_with(
        p(P::Timestamptz),
        with(true, false),
        &[
            "\"1700000000000\"",
            "\"2023-11-14T22:13:20Z\"",
            "1700000000000",
            "\"soon\"",
        ],
    );
    let a = a.as_primitive::<TimestampMicrosecondType>();
    assert_eq!(a.values().as_ref(), &[1_700_000_000_000_000; 3]);
    all_ok(&r[..3]);
    assert!(rejected(&r[3], "v").contains("\"soon\""));
    let (a, r) = single_with(
        p(P::Date),
        with(true, false),
        &["\"19675\"", "\"2023-11-14\""],
    );
    all_ok(&r);
    assert_eq!(
        a.as_primitive::<Date32Type>().values().as_ref(),
        &[19675, 19675]
    );
    // A column no number goes to keeps its own complaint.
    let (_, r) = single_with(p(P::Uuid), with(true, false), &["\"123\""]);
    assert!(rejected(&r[0], "v").contains("is not a UUID"));
}

#[test]
fn to_string_writes_other_json_as_its_text() {
    let values = [
        "7",
        "-1.5e3",
        "true",
        "{\"a\": [1, 2]}",
        "[1,\"x\"]",
        "\"plain\"",
        "null",
    ];
    let (_, r) = single(p(P::String), &values);
    assert!(rejected(&r[0], "v").contains("a JSON string (string)"));
    let (a, r) = single_with(p(P::String), with(false, true), &values);
    all_ok(&r);
    let a = a.as_string::<i32>();
    let got: Vec<Option<&str>> = (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i)))
        .collect();
    assert_eq!(
        got,
        [
            Some("7"),
            Some("-1.5e3"),
            Some("true"),
            Some("{\"a\": [1, 2]}"),
            Some("[1,\"x\"]"),
            Some("plain"),
            None
        ]
    );
}
