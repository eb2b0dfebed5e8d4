//! The unknown-field policies: `Ignore` (the default), `Reject` and `Collect`.

use std::collections::BTreeSet;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use iceberg::spec::PrimitiveType as P;

use super::super::{ShredOptions, Shredder, Unknown, UnknownFields};
use super::{all_ok, list, map, opt, p, rejected, req, run_with, schema, strukt};
use crate::error::{RecordError, RecordErrorKind};

fn nested_schema() -> iceberg::spec::Schema {
    schema(vec![
        req(1, "id", p(P::Long)),
        opt(
            2,
            "payload",
            strukt(vec![
                opt(3, "a", p(P::Long)),
                opt(4, "inner", strukt(vec![opt(5, "b", p(P::String))])),
            ]),
        ),
        opt(
            6,
            "items",
            list(
                7,
                strukt(vec![opt(8, "sku", p(P::String)), opt(9, "qty", p(P::Int))]),
                false,
            ),
        ),
        opt(
            10,
            "attrs",
            map(
                11,
                p(P::String),
                12,
                strukt(vec![opt(13, "x", p(P::Long))]),
                false,
            ),
        ),
        opt(14, "tags", map(15, p(P::String), 16, p(P::String), false)),
    ])
}

/// One unknown key at each depth, then records whose only odd keys are map keys (data).
const RECORDS: [&str; 8] = [
    r#"{"id":1,"extra":5}"#,
    r#"{"id":2,"payload":{"a":1,"zz":{"deep":[1,{"q":2}]}}}"#,
    r#"{"id":3,"payload":{"inner":{"b":"x","c":1}}}"#,
    r#"{"id":4,"items":[{"sku":"a"},{"sku":"b","qty":2},{"sku":"c","note":"n"}]}"#,
    r#"{"id":5,"attrs":{"k1":{"x":1},"k\"2":{"x":2,"y":3}}}"#,
    r#"{"id":6,"attrs":[{"key":"k","value":{"x":1,"w":2}}]}"#,
    r#"{"id":7,"tags":{"anything":"v","other":"w"}}"#,
    r#"{"id":8,"attrs":{"new_key":{"x":9}}}"#,
];

fn with(policy: UnknownFields) -> ShredOptions {
    ShredOptions {
        unknown_fields: policy,
        ..ShredOptions::default()
    }
}

#[track_caller]
fn unknown_rejection(result: &Result<(), RecordError>, field: &str, column: &str) {
    let reason = rejected(result, field);
    assert_eq!(
        reason,
        format!("unknown field (the table has no column `{column}`)")
    );
    assert_eq!(
        result.as_ref().err().map(|e| e.kind),
        Some(RecordErrorKind::UnknownField)
    );
}

fn ids(batch: &RecordBatch) -> Vec<i64> {
    batch
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

#[test]
fn reject_names_the_key_at_every_depth() {
    let s = nested_schema();
    let (batch, r) = run_with(&s, with(UnknownFields::Reject), &RECORDS);
    unknown_rejection(&r[0], "extra", "extra");
    unknown_rejection(&r[1], "payload.zz", "payload.zz");
    unknown_rejection(&r[2], "payload.inner.c", "payload.inner.c");
    unknown_rejection(&r[3], "items[2].note", "items[].note");
    unknown_rejection(&r[4], "attrs{\"k\\\"2\"}.y", "attrs{}.y");
    unknown_rejection(&r[5], "attrs[0].value.w", "attrs{}.w");
    // Map keys are data, never unknown fields.
    all_ok(&r[6..]);
    assert_eq!(ids(&batch), [7, 8]);
    let tags = batch.column(4).as_map();
    assert_eq!(tags.value_offsets(), &[0, 2, 2]);
    let keys = tags.keys().as_string::<i32>();
    assert_eq!((keys.value(0), keys.value(1)), ("anything", "other"));
    let attrs = batch.column(3).as_map();
    assert_eq!(attrs.value_offsets(), &[0, 0, 1]);
    assert_eq!(attrs.keys().as_string::<i32>().value(0), "new_key");
    let x = attrs
        .values()
        .as_struct()
        .column(0)
        .as_primitive::<Int64Type>();
    assert_eq!(x.value(0), 9);
}

#[test]
fn ignore_is_the_default_and_collects_nothing() {
    let s = nested_schema();
    assert_eq!(
        ShredOptions::default().unknown_fields,
        UnknownFields::Ignore
    );
    let mut shredder = Shredder::new(&s, ShredOptions::default()).unwrap();
    for r in RECORDS {
        shredder.push(r.as_bytes()).unwrap();
    }
    assert_eq!(shredder.take_unknown(), Unknown::default());
    assert_eq!(shredder.finish().unwrap().num_rows(), RECORDS.len());
}

#[test]
fn collect_accepts_like_ignore_and_remembers_paths_and_records() {
    let s = nested_schema();
    let mut shredder = Shredder::new(&s, with(UnknownFields::Collect)).unwrap();
    for r in RECORDS {
        shredder.push(r.as_bytes()).unwrap();
    }
    let batch = shredder.finish().unwrap();
    let unknown = shredder.take_unknown();
    assert_eq!(
        unknown.paths,
        set(&[
            "extra",
            "payload.zz",
            "payload.inner.c",
            "items[].note",
            "attrs{}.y",
            "attrs{}.w",
        ])
    );
    assert_eq!(unknown.records, [0, 1, 2, 3, 4, 5]);

    // The same batch as with `Ignore`.
    let (ignored, r) = run_with(&s, ShredOptions::default(), &RECORDS);
    all_ok(&r);
    assert_eq!(batch, ignored);
    assert_eq!(ids(&batch), [1, 2, 3, 4, 5, 6, 7, 8]);
    let payload = batch.column(1).as_struct();
    assert_eq!(payload.column(0).as_primitive::<Int64Type>().value(1), 1);
    assert_eq!(
        payload
            .column(1)
            .as_struct()
            .column(0)
            .as_string::<i32>()
            .value(2),
        "x"
    );
    let items = batch.column(2).as_list::<i32>();
    assert_eq!(items.value_offsets(), &[0, 0, 0, 0, 3, 3, 3, 3, 3]);
    let elems = items.values().as_struct();
    let skus = elems.column(0).as_string::<i32>();
    assert_eq!(
        (skus.value(0), skus.value(1), skus.value(2)),
        ("a", "b", "c")
    );
    let qty = elems.column(1).as_primitive::<Int32Type>();
    assert!(qty.is_null(0) && qty.is_null(2));
    assert_eq!(qty.value(1), 2);
    let attrs = batch.column(3).as_map();
    assert_eq!(attrs.value_offsets(), &[0, 0, 0, 0, 0, 2, 3, 3, 4]);
    let x = attrs
        .values()
        .as_struct()
        .column(0)
        .as_primitive::<Int64Type>();
    assert_eq!(x.values().as_ref(), &[1, 2, 1, 9]);
}

#[test]
fn collect_numbers_every_push_and_forgets_rejected_records() {
    let s = schema(vec![req(1, "id", p(P::Long))]);
    let mut shredder = Shredder::new(&s, with(UnknownFields::Collect)).unwrap();
    let records = [
        r#"{"id":0}"#,
        r#"{"id":1,"u":1}"#,
        // Rejected after its unknown key: `v` must not be reported.
        r#"{"v":1,"id":"bad"}"#,
        r#"{"id":3,"w":[1,2]}"#,
        r#"not json"#,
        r#"{"u":2,"id":5,"u":3}"#,
        r#"{"id":6}"#,
        // Unknown key, then malformed JSON.
        r#"{"id":7,"z":1"#,
    ];
    let outcomes: Vec<_> = records
        .iter()
        .map(|r| shredder.push(r.as_bytes()))
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .map(|o| o.as_ref().err().map(|e| e.kind))
            .collect::<Vec<_>>(),
        [
            None,
            None,
            Some(RecordErrorKind::TypeMismatch),
            None,
            Some(RecordErrorKind::Syntax),
            None,
            None,
            Some(RecordErrorKind::Syntax),
        ]
    );
    let unknown = shredder.take_unknown();
    assert_eq!(unknown.paths, set(&["u", "w"]));
    assert_eq!(unknown.records, [1, 3, 5]);
    // Taking resets both, and the numbering restarts at the next push.
    assert_eq!(shredder.take_unknown(), Unknown::default());
    shredder.push(br#"{"id":8}"#).unwrap();
    assert!(shredder.push(br#"{"id":null,"x":0}"#).is_err());
    shredder.push(br#"{"id":9,"x":1,"u":1}"#).unwrap();
    let unknown = shredder.take_unknown();
    assert_eq!(unknown.paths, set(&["u", "x"]));
    assert_eq!(unknown.records, [2]);

    // Finishing restarts the numbering too; what was collected waits for `take_unknown`.
    shredder.push(br#"{"id":10,"late":1}"#).unwrap();
    let batch = shredder.finish().unwrap();
    assert_eq!(ids(&batch), [0, 1, 3, 5, 6, 8, 9, 10]);
    assert!(shredder.push(b"[]").is_err());
    shredder.push(br#"{"id":11,"next":1}"#).unwrap();
    let unknown = shredder.take_unknown();
    assert_eq!(unknown.paths, set(&["late", "next"]));
    assert_eq!(unknown.records, [0, 1]);
    shredder.finish().unwrap();
    assert_eq!(shredder.take_unknown(), Unknown::default());
}

#[test]
fn collect_in_list_elements_and_map_values_counts_the_record_once() {
    let s = nested_schema();
    let mut shredder = Shredder::new(&s, with(UnknownFields::Collect)).unwrap();
    let many: Vec<String> = (0..50)
        .map(|i| format!(r#"{{"sku":"s{i}","note":{i}}}"#))
        .collect();
    let rec = format!(
        r#"{{"id":1,"items":[{}],"attrs":{{"a":{{"y":1}},"b":{{"y":2,"z":3}}}}}}"#,
        many.join(",")
    );
    shredder.push(rec.as_bytes()).unwrap();
    shredder.push(br#"{"id":2,"items":[{"sku":"t"}]}"#).unwrap();
    let unknown = shredder.take_unknown();
    assert_eq!(
        unknown.paths,
        set(&["items[].note", "attrs{}.y", "attrs{}.z"])
    );
    assert_eq!(unknown.records, [0]);
    let batch = shredder.finish().unwrap();
    let items = batch.column(2).as_list::<i32>();
    assert_eq!(items.value_offsets(), &[0, 50, 51]);
}

#[test]
fn reject_with_case_insensitive_keys() {
    let s = schema(vec![
        req(1, "UserId", p(P::Long)),
        opt(2, "name", p(P::String)),
    ]);
    let options = ShredOptions {
        case_insensitive: true,
        unknown_fields: UnknownFields::Reject,
        ..ShredOptions::default()
    };
    let (batch, r) = run_with(
        &s,
        options,
        &[r#"{"userid":1,"NAME":"a"}"#, r#"{"USERID":2,"Nick":"b"}"#],
    );
    all_ok(&r[..1]);
    unknown_rejection(&r[1], "Nick", "Nick");
    assert_eq!(ids(&batch), [1]);
}

#[test]
fn malformed_json_wins_over_an_unknown_field() {
    let s = schema(vec![req(1, "id", p(P::Long))]);
    let (_, r) = run_with(
        &s,
        with(UnknownFields::Reject),
        &[r#"{"id":1,"extra":2,"#, r#"{"extra":[[[["#],
    );
    for bad in &r {
        assert!(rejected(bad, "").contains("unexpected end of input"));
        assert_eq!(
            bad.as_ref().err().map(|e| e.kind),
            Some(RecordErrorKind::Syntax)
        );
    }
}

#[test]
fn struct_map_keys_are_checked_too() {
    let s = schema(vec![opt(
        1,
        "m",
        map(
            2,
            strukt(vec![opt(3, "a", p(P::Long))]),
            4,
            p(P::Long),
            false,
        ),
    )]);
    let record = r#"{"m":[{"key":{"a":1},"value":1},{"key":{"a":2,"zzz":0},"value":2}]}"#;
    let (_, r) = run_with(&s, with(UnknownFields::Reject), &[record]);
    unknown_rejection(&r[0], "m[1].key.zzz", "m{key}.zzz");
    let mut shredder = Shredder::new(&s, with(UnknownFields::Collect)).unwrap();
    shredder.push(record.as_bytes()).unwrap();
    let unknown = shredder.take_unknown();
    assert_eq!(unknown.paths, set(&["m{key}.zzz"]));
    assert_eq!(unknown.records, [0]);
    let batch = shredder.finish().unwrap();
    let keys = batch
        .column(0)
        .as_map()
        .keys()
        .as_struct()
        .column(0)
        .clone();
    assert_eq!(keys.as_primitive::<Int64Type>().values().as_ref(), &[1, 2]);
}
