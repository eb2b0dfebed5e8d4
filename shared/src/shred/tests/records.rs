use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use iceberg::spec::PrimitiveType as P;

use super::super::{ShredOptions, Shredder};
use super::{all_ok, list, map, opt, p, rejected, req, run, run_with, schema, strukt};

fn event_schema() -> iceberg::spec::Schema {
    schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "name", p(P::String)),
        opt(3, "score", p(P::Double)),
    ])
}

#[test]
fn whole_record_errors_have_empty_field() {
    let s = event_schema();
    let (batch, r) = run(
        &s,
        &[
            "[1,2]",
            "42",
            "\"x\"",
            "",
            "  \r\n",
            r#"{"id":1} x"#,
            r#"{"id":1}{"id":2}"#,
            r#"{"id":1,"name":"abc"#,
            r#"{"id":1,"name":"#,
            r#"{"id":1,"#,
            r#"{"id":1 "name":"a"}"#,
            r#"{id:1}"#,
            r#"{"id":"x","name":"unterminated}"#,
            "\u{feff}{\"id\":1}",
        ],
    );
    assert_eq!(batch.num_rows(), 0);
    assert!(rejected(&r[0], "").contains("must be a JSON object, got an array"));
    assert!(rejected(&r[1], "").contains("got the number 42"));
    assert!(rejected(&r[2], "").contains("got the string"));
    assert!(rejected(&r[3], "").contains("empty record"));
    assert!(rejected(&r[4], "").contains("empty record"));
    assert!(rejected(&r[5], "").contains("after the JSON object"));
    assert!(rejected(&r[6], "").contains("after the JSON object"));
    for bad in &r[7..10] {
        assert!(rejected(bad, "").contains("unexpected end of input"));
    }
    assert!(rejected(&r[10], "").contains("expected ',' or '}'"));
    assert!(rejected(&r[11], "").contains("expected a string key"));
    // A type error comes first, but the malformed input is what gets reported.
    assert!(rejected(&r[12], "").contains("unexpected end of input"));
    rejected(&r[13], "");
}

#[test]
fn surrounding_whitespace_and_crlf_are_fine() {
    let s = event_schema();
    let (batch, r) = run(
        &s,
        &["  {\"id\":1}\r\n", "\t{ \"id\" : 2 , \"name\" : \"b\" }\n"],
    );
    all_ok(&r);
    let ids = batch.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.values().as_ref(), &[1, 2]);
}

#[test]
fn missing_null_and_duplicate_fields() {
    let s = event_schema();
    let (batch, r) = run(
        &s,
        &[
            r#"{"id":1}"#,
            r#"{"id":2,"name":null,"score":null}"#,
            r#"{"name":"x"}"#,
            r#"{"id":null}"#,
            r#"{"id":3,"id":4}"#,
            r#"{"id":5,"name":"a","name":"b"}"#,
            r#"{}"#,
        ],
    );
    all_ok(&r[..2]);
    assert!(rejected(&r[2], "id").contains("required field is missing"));
    assert!(rejected(&r[3], "id").contains("null is not allowed"));
    assert!(rejected(&r[4], "id").contains("duplicate key"));
    assert!(rejected(&r[5], "name").contains("duplicate key"));
    assert!(rejected(&r[6], "id").contains("missing"));
    assert_eq!(batch.num_rows(), 2);
    assert!(batch.column(1).is_null(0) && batch.column(1).is_null(1));
    assert!(batch.column(2).is_null(0) && batch.column(2).is_null(1));
}

#[test]
fn unknown_fields_are_skipped_at_any_depth() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "s", strukt(vec![opt(3, "x", p(P::Long))])),
        opt(4, "name", p(P::String)),
    ]);
    let deep = r#"{"a":[1,{"b":[[],{}],"c":"}]\"\\"},-1.5e-3,true,false,null],"d":{"e":{"f":{"g":["\u00e9\ud83d\ude00"]}}}}"#;
    let rec1 = format!(
        r#"{{"extra":{deep},"id":1,"s":{{"junk":{deep},"x":7,"more":[{deep}]}},"name":"n","tail":"}}"}}"#
    );
    let (batch, r) = run(
        &s,
        &[
            &rec1,
            r#"{"id":2,"zzz":[1,2,[3,[4]]],"name":"m"}"#,
            r#"{"id":3,"bad":[1,2}"#,
            r#"{"id":4,"bad":"\q"}"#,
            r#"{"id":5,"bad":nul}"#,
            r#"{"id":6,"bad":01}"#,
        ],
    );
    all_ok(&r[..2]);
    for bad in &r[2..] {
        rejected(bad, "");
    }
    let ids = batch.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.values().as_ref(), &[1, 2]);
    let x = batch
        .column(1)
        .as_struct()
        .column(0)
        .as_primitive::<Int64Type>();
    assert_eq!(x.value(0), 7);
    assert!(batch.column(1).is_null(1));
    let names = batch.column(2).as_string::<i32>();
    assert_eq!((names.value(0), names.value(1)), ("n", "m"));
}

#[test]
fn deeply_nested_unknown_value_is_rejected_not_overflowing() {
    let s = event_schema();
    let deep = format!(
        r#"{{"id":1,"x":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (_, r) = run(&s, &[&deep]);
    assert!(rejected(&r[0], "").contains("nested too deeply"));
}

#[test]
fn keys_match_exactly_by_default_and_ignoring_case_when_asked() {
    let s = schema(vec![
        req(1, "UserId", p(P::Long)),
        opt(2, "name", p(P::String)),
    ]);
    let records = [r#"{"userid":1,"NAME":"a"}"#, r#"{"UserId":2,"name":"b"}"#];
    let (batch, r) = run(&s, &records);
    assert!(rejected(&r[0], "UserId").contains("missing"));
    all_ok(&r[1..]);
    assert_eq!(batch.num_rows(), 1);

    let ci = ShredOptions {
        case_insensitive: true,
        ..Default::default()
    };
    let (batch, r) = run_with(&s, ci.clone(), &records);
    all_ok(&r);
    let ids = batch.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.values().as_ref(), &[1, 2]);
    let names = batch.column(1).as_string::<i32>();
    assert_eq!((names.value(0), names.value(1)), ("a", "b"));

    // Duplicate detection still applies across spellings.
    let (_, r) = run_with(&s, ci.clone(), &[r#"{"userid":1,"USERID":2}"#]);
    assert!(rejected(&r[0], "UserId").contains("duplicate key"));

    // Fields that differ only in case: exact spelling wins, anything else is ambiguous.
    let s = schema(vec![opt(1, "a", p(P::Long)), opt(2, "A", p(P::Long))]);
    let (batch, r) = run_with(&s, ci, &[r#"{"A":1,"a":2}"#]);
    all_ok(&r);
    assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 2);
    assert_eq!(batch.column(1).as_primitive::<Int64Type>().value(0), 1);
}

#[test]
fn case_insensitive_with_many_fields_uses_the_table() {
    let fields = (0..20)
        .map(|i| opt(i + 1, &format!("Field{i}"), p(P::Long)))
        .collect();
    let s = schema(fields);
    let ci = ShredOptions {
        case_insensitive: true,
        ..Default::default()
    };
    let (batch, r) = run_with(
        &s,
        ci,
        &[r#"{"FIELD19":19,"field3":3,"Field0":0,"nope":1}"#],
    );
    all_ok(&r);
    let v = |i: usize| batch.column(i).as_primitive::<Int64Type>().value(0);
    assert_eq!((v(19), v(3), v(0)), (19, 3, 0));
    assert!(batch.column(1).is_null(0));
}

#[test]
fn out_of_order_keys_with_many_fields() {
    let fields = (0..30)
        .map(|i| req(i + 1, &format!("f{i}"), p(P::Long)))
        .collect();
    let s = schema(fields);
    let mut keys: Vec<String> = (0..30).rev().map(|i| format!("\"f{i}\":{i}")).collect();
    let reversed = format!("{{{}}}", keys.join(","));
    keys.rotate_left(7);
    let rotated = format!("{{{}}}", keys.join(","));
    let (batch, r) = run(&s, &[&reversed, &rotated]);
    all_ok(&r);
    for i in 0..30 {
        let col = batch.column(i).as_primitive::<Int64Type>();
        assert_eq!(col.values().as_ref(), &[i as i64, i as i64]);
    }
}

#[test]
fn bad_record_in_the_middle_rolls_back_exactly() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "name", p(P::String)),
        opt(3, "tags", list(4, p(P::String), true)),
        opt(
            5,
            "attrs",
            map(
                6,
                p(P::String),
                7,
                strukt(vec![opt(8, "n", p(P::Long))]),
                false,
            ),
        ),
        opt(9, "ts", p(P::Timestamptz)),
    ]);
    let good = |i: i64| {
        format!(
            r#"{{"id":{i},"name":"name{i}","tags":["t{i}","u{i}"],"attrs":{{"k{i}":{{"n":{i}}}}},"ts":{i}}}"#
        )
    };
    let bad_records = [
        // Fails after writing id, name, part of the list and a map entry's nested value.
        r#"{"id":100,"name":"bad","tags":["x","y"],"attrs":{"k":{"n":1},"j":{"n":"oops"}}}"#,
        r#"{"id":101,"name":"bad","tags":["x",null]}"#,
        r#"{"id":102,"name":"bad\u0041","ts":"nope"}"#,
        r#"{"name":"bad","tags":["x"]}"#,
        r#"{"id":103,"name":"bad","tags":["x"]"#,
    ];
    let mut shredder = Shredder::new(&s, ShredOptions::default()).unwrap();
    let mut expected = Vec::new();
    for i in 0..6 {
        shredder.push(good(i).as_bytes()).unwrap();
        expected.push(i);
        for bad in &bad_records {
            assert!(shredder.push(bad.as_bytes()).is_err());
        }
    }
    assert_eq!(shredder.len(), 6);
    let batch = shredder.finish().unwrap();
    let ids = batch.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.values().as_ref(), &expected[..]);
    let names = batch.column(1).as_string::<i32>();
    let tags = batch.column(2).as_list::<i32>();
    let tag_values = tags.values().as_string::<i32>();
    let attrs = batch.column(3).as_map();
    let attr_keys = attrs.keys().as_string::<i32>();
    let attr_n = attrs
        .values()
        .as_struct()
        .column(0)
        .as_primitive::<Int64Type>();
    let ts = batch.column(4).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(tag_values.len(), 12);
    assert_eq!(attr_keys.len(), 6);
    for i in 0..6usize {
        assert_eq!(names.value(i), format!("name{i}"));
        assert_eq!(tags.value_offsets()[i], 2 * i as i32);
        assert_eq!(tag_values.value(2 * i), format!("t{i}"));
        assert_eq!(tag_values.value(2 * i + 1), format!("u{i}"));
        assert_eq!(attrs.value_offsets()[i], i as i32);
        assert_eq!(attr_keys.value(i), format!("k{i}"));
        assert_eq!(attr_n.value(i), i as i64);
        assert_eq!(ts.value(i), i as i64 * 1000);
    }
    assert_eq!(tags.value_offsets()[6], 12);
    assert_eq!(attrs.value_offsets()[6], 6);
}

#[test]
fn finish_resets_and_the_shredder_is_reusable() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "name", p(P::String)),
        opt(3, "xs", list(4, p(P::Long), false)),
    ]);
    let mut sh = Shredder::new(&s, ShredOptions::default()).unwrap();
    assert_eq!(
        sh.arrow_schema().as_ref(),
        &iceberg::arrow::schema_to_arrow_schema(&s).unwrap()
    );
    assert!(sh.is_empty());
    let empty = sh.finish().unwrap();
    assert_eq!(empty.num_rows(), 0);
    assert_eq!(empty.schema(), *sh.arrow_schema());

    let before = sh.buffered_bytes();
    sh.push(br#"{"id":1,"name":null,"xs":[1,null]}"#).unwrap();
    sh.push(br#"{"id":2,"name":"two","xs":null}"#).unwrap();
    assert!(sh.buffered_bytes() > before);
    assert_eq!(sh.len(), 2);
    let first = sh.finish().unwrap();
    assert!(sh.is_empty());
    assert_eq!(sh.buffered_bytes(), before);

    sh.push(br#"{"id":3,"name":"three","xs":[3]}"#).unwrap();
    let second = sh.finish().unwrap();
    assert_eq!(first.num_rows(), 2);
    assert_eq!(second.num_rows(), 1);
    assert_eq!(second.schema(), first.schema());
    let names = first.column(1).as_string::<i32>();
    assert!(names.is_null(0));
    assert_eq!(names.value(1), "two");
    let xs = first.column(2).as_list::<i32>();
    assert_eq!(xs.value_offsets(), &[0, 2, 2]);
    assert!(xs.values().is_null(1));
    // Nulls of the previous batch do not leak into the next.
    let names2 = second.column(1).as_string::<i32>();
    assert_eq!(names2.null_count(), 0);
    assert_eq!(names2.value(0), "three");
    let xs2 = second.column(2).as_list::<i32>();
    assert_eq!(xs2.value_offsets(), &[0, 1]);
    assert_eq!(xs2.values().as_primitive::<Int64Type>().value(0), 3);
    assert_eq!(xs2.values().null_count(), 0);
}

#[test]
fn schema_with_every_type_matches_iceberg_arrow_schema() {
    use iceberg::spec::PrimitiveType as P;
    let s = schema(vec![
        req(1, "b", p(P::Boolean)),
        opt(2, "i", p(P::Int)),
        opt(3, "l", p(P::Long)),
        opt(4, "f", p(P::Float)),
        opt(5, "d", p(P::Double)),
        opt(
            6,
            "dec",
            p(P::Decimal {
                precision: 9,
                scale: 3,
            }),
        ),
        opt(7, "date", p(P::Date)),
        opt(8, "time", p(P::Time)),
        opt(9, "ts", p(P::Timestamp)),
        opt(10, "tstz", p(P::Timestamptz)),
        opt(11, "tsns", p(P::TimestampNs)),
        opt(12, "tstzns", p(P::TimestamptzNs)),
        opt(13, "s", p(P::String)),
        opt(14, "u", p(P::Uuid)),
        opt(15, "fx", p(P::Fixed(3))),
        opt(16, "bin", p(P::Binary)),
        opt(17, "st", strukt(vec![req(18, "x", p(P::Int))])),
        opt(19, "ls", list(20, p(P::String), false)),
        opt(
            21,
            "mp",
            map(22, p(P::String), 23, list(24, p(P::Int), true), false),
        ),
    ]);
    let full = r#"{"b":true,"i":1,"l":2,"f":1.5,"d":2.5,"dec":"1.5","date":"2024-01-01",
        "time":"01:02:03","ts":"2024-01-01T00:00:00","tstz":"2024-01-01T00:00:00Z",
        "tsns":"2024-01-01T00:00:00.000000001","tstzns":0,"s":"s",
        "u":"00000000-0000-0000-0000-000000000001","fx":"AAEC","bin":"AA==",
        "st":{"x":1},"ls":["a",null],"mp":{"k":[1,2]}}"#;
    let (batch, r) = run(&s, &[full, r#"{"b":false}"#]);
    all_ok(&r);
    assert_eq!(batch.num_rows(), 2);
    for i in 1..batch.num_columns() {
        assert!(batch.column(i).is_null(1), "column {i}");
        assert!(!batch.column(i).is_null(0), "column {i}");
    }
    assert_eq!(
        batch
            .column(5)
            .as_primitive::<arrow_array::types::Decimal128Type>()
            .value(0),
        1500
    );
    assert_eq!(batch.column(14).as_fixed_size_binary().value(0), [0, 1, 2]);
}

#[test]
fn unsupported_field_width_fails_at_build_only() {
    let s = schema(vec![opt(1, "fx", p(P::Fixed(0)))]);
    assert!(Shredder::new(&s, ShredOptions::default()).is_err());
}

#[test]
fn record_error_display() {
    let e = crate::error::RecordError {
        field: "a.b".into(),
        reason: "bad".into(),
        kind: crate::error::RecordErrorKind::TypeMismatch,
    };
    assert_eq!(e.to_string(), "field `a.b`: bad");
    let e = crate::error::RecordError {
        field: String::new(),
        reason: "bad".into(),
        kind: crate::error::RecordErrorKind::Syntax,
    };
    assert_eq!(e.to_string(), "bad");
}

#[test]
fn escaped_and_spaced_keys_still_match() {
    let s = schema(vec![
        req(1, "id", p(P::Long)),
        opt(2, "a\\b", p(P::Long)),
        opt(3, "q\"x", p(P::Long)),
        opt(4, "é", p(P::Long)),
    ]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"\u0069d":1,"a\\b":2,"q\"x":3,"\u00e9":4}"#,
            r#"{ "id" : 5 , "a\\b" :6, "q\"x":7 ,"é":8}"#,
            // `\b` is a backspace, so this key is not the field `a\b`.
            r#"{"id":9,"a\b":10}"#,
        ],
    );
    all_ok(&r);
    let col = |i: usize| batch.column(i).as_primitive::<Int64Type>();
    assert_eq!(col(0).values().as_ref(), &[1, 5, 9]);
    assert_eq!((col(1).value(0), col(1).value(1)), (2, 6));
    assert!(col(1).is_null(2));
    assert_eq!((col(2).value(0), col(2).value(1)), (3, 7));
    assert_eq!((col(3).value(0), col(3).value(1)), (4, 8));
}

#[test]
fn skipped_strings_are_still_validated() {
    let s = event_schema();
    let mut sh = Shredder::new(&s, ShredOptions::default()).unwrap();
    let bad: [&[u8]; 4] = [
        br#"{"id":1,"x":"\ud800"}"#,
        b"{\"id\":1,\"x\":\"a\xffb\"}",
        b"{\"id\":1,\"x\":[\"a\nb\"]}",
        br#"{"id":1,"x":{"k\z":1}}"#,
    ];
    for record in bad {
        let e = sh.push(record).unwrap_err();
        assert_eq!(e.field, "", "{}", e.reason);
        assert!(e.reason.starts_with("invalid JSON at byte"), "{}", e.reason);
    }
    sh.push(br#"{"id":2,"x":"\ud83d\ude00 \u00e9 \/ \" \\"}"#)
        .unwrap();
    let batch = sh.finish().unwrap();
    assert_eq!(
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .as_ref(),
        &[2]
    );
}
