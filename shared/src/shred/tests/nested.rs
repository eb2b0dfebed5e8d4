use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type, Int32Type, Int64Type};
use iceberg::spec::PrimitiveType as P;

use super::{all_ok, is_null, list, map, opt, p, rejected, req, run, schema, strukt};

fn payload_schema() -> iceberg::spec::Schema {
    schema(vec![
        req(1, "id", p(P::Long)),
        opt(
            2,
            "payload",
            strukt(vec![
                req(3, "name", p(P::String)),
                opt(
                    4,
                    "items",
                    list(
                        5,
                        strukt(vec![
                            req(6, "sku", p(P::String)),
                            opt(7, "price", p(P::Double)),
                        ]),
                        true,
                    ),
                ),
            ]),
        ),
    ])
}

#[test]
fn struct_list_struct_with_nulls_at_each_level() {
    let s = payload_schema();
    let (batch, r) = run(
        &s,
        &[
            r#"{"id":1,"payload":{"name":"a","items":[{"sku":"x","price":1.5},{"sku":"y"}]}}"#,
            r#"{"id":2,"payload":null}"#,
            r#"{"id":3}"#,
            r#"{"id":4,"payload":{"name":"b","items":null}}"#,
            r#"{"id":5,"payload":{"name":"c","items":[]}}"#,
            r#"{"id":6,"payload":{"items":[{"sku":"z","price":null}],"name":"d"}}"#,
        ],
    );
    all_ok(&r);
    let payload = batch.column(1).as_struct();
    assert_eq!(
        (0..6).map(|i| payload.is_null(i)).collect::<Vec<_>>(),
        [false, true, true, false, false, false]
    );
    let names = payload.column(0).as_string::<i32>();
    assert_eq!(names.value(0), "a");
    assert_eq!(names.value(3), "b");
    assert_eq!(names.value(5), "d");
    let items = payload.column(1).as_list::<i32>();
    assert_eq!(items.value_offsets(), &[0, 2, 2, 2, 2, 2, 3]);
    assert!(!items.is_null(0));
    assert!(items.is_null(3));
    assert!(!items.is_null(4));
    assert_eq!(items.value(4).len(), 0);
    let elems = items.values().as_struct();
    let skus = elems.column(0).as_string::<i32>();
    assert_eq!(
        (skus.value(0), skus.value(1), skus.value(2)),
        ("x", "y", "z")
    );
    let prices = elems.column(1).as_primitive::<Float64Type>();
    assert_eq!(prices.value(0), 1.5);
    assert!(prices.is_null(1));
    assert!(prices.is_null(2));
}

#[test]
fn nested_error_paths() {
    let s = payload_schema();
    let (batch, r) = run(
        &s,
        &[
            r#"{"id":1,"payload":{"name":"a","items":[{"sku":"x"},{"sku":"y"},{"sku":"z"},{"sku":"w","price":"cheap"}]}}"#,
            r#"{"id":1,"payload":{"items":[]}}"#,
            r#"{"id":1,"payload":{"name":"a","items":[{"sku":"x"},null]}}"#,
            r#"{"id":1,"payload":{"name":"a","items":[{"price":1}]}}"#,
            r#"{"id":1,"payload":{"name":"a","items":{"sku":"x"}}}"#,
            r#"{"id":1,"payload":[]}"#,
            r#"{"id":1,"payload":{"name":null}}"#,
        ],
    );
    assert_eq!(batch.num_rows(), 0);
    assert!(rejected(&r[0], "payload.items[3].price").contains("\"cheap\" is not a number"));
    assert!(rejected(&r[1], "payload.name").contains("required field is missing"));
    assert!(rejected(&r[2], "payload.items[1]").contains("elements are required"));
    assert!(rejected(&r[3], "payload.items[0].sku").contains("missing"));
    assert!(rejected(&r[4], "payload.items").contains("expected a JSON array"));
    assert!(rejected(&r[5], "payload").contains("expected a JSON object"));
    assert!(rejected(&r[6], "payload.name").contains("null is not allowed"));
}

#[test]
fn list_optional_elements_and_nested_lists() {
    let s = schema(vec![
        opt(1, "xs", list(2, p(P::Int), false)),
        opt(3, "grid", list(4, list(5, p(P::Long), true), false)),
    ]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"xs":[1,null,3],"grid":[[1,2],null,[]]}"#,
            r#"{"xs":[],"grid":[[3]]}"#,
            r#"{"xs":null}"#,
            r#"{"grid":[[1,null]]}"#,
            r#"{"xs":[1,"2"]}"#,
        ],
    );
    all_ok(&r[..3]);
    assert!(rejected(&r[3], "grid[0][1]").contains("elements are required"));
    assert!(rejected(&r[4], "xs[1]").contains("expected a JSON integer (int)"));
    let xs = batch.column(0).as_list::<i32>();
    assert_eq!(xs.value_offsets(), &[0, 3, 3, 3]);
    assert!(xs.is_null(2));
    let vals = xs.values().as_primitive::<Int32Type>();
    assert_eq!(vals.value(0), 1);
    assert!(vals.is_null(1));
    assert_eq!(vals.value(2), 3);
    let grid = batch.column(1).as_list::<i32>();
    assert_eq!(grid.value_offsets(), &[0, 3, 4, 4]);
    assert!(grid.is_null(2));
    let inner = grid.values().as_list::<i32>();
    assert_eq!(inner.value_offsets(), &[0, 2, 2, 2, 3]);
    assert!(inner.is_null(1));
    assert_eq!(
        inner.values().as_primitive::<Int64Type>().values().as_ref(),
        &[1, 2, 3]
    );
}

#[test]
fn map_object_form_with_string_keys() {
    let s = schema(vec![opt(
        1,
        "tags",
        map(2, p(P::String), 3, p(P::Long), false),
    )]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"tags":{"a":1,"b":null,"c\"q":3}}"#,
            r#"{"tags":{}}"#,
            r#"{"tags":null}"#,
            r#"{"tags":{"k":"x"}}"#,
            r#"{"tags":{"a":1,"a":2}}"#,
            r#"{"tags":5}"#,
        ],
    );
    all_ok(&r[..3]);
    assert!(rejected(&r[3], "tags{\"k\"}").contains("expected a JSON integer"));
    assert!(rejected(&r[4], "tags{\"a\"}").contains("duplicate map key"));
    assert!(rejected(&r[5], "tags").contains("(map)"));
    let m = batch.column(0).as_map();
    assert_eq!(m.value_offsets(), &[0, 3, 3, 3]);
    assert!(m.is_null(2));
    assert!(!m.is_null(1));
    let keys = m.keys().as_string::<i32>();
    assert_eq!(
        (keys.value(0), keys.value(1), keys.value(2)),
        ("a", "b", "c\"q")
    );
    let values = m.values().as_primitive::<Int64Type>();
    assert_eq!(values.value(0), 1);
    assert!(values.is_null(1));
    assert_eq!(values.value(2), 3);
}

#[test]
fn map_typed_keys_from_key_text() {
    let s = schema(vec![
        opt(1, "by_id", map(2, p(P::Int), 3, p(P::String), true)),
        opt(4, "by_day", map(5, p(P::Date), 6, p(P::Boolean), true)),
        opt(7, "by_uuid", map(8, p(P::Uuid), 9, p(P::Int), true)),
    ]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"by_id":{"1":"one","-20":"minus"},"by_day":{"2024-02-29":true,"0":false},"by_uuid":{"123e4567-e89b-12d3-a456-426614174000":7}}"#,
            r#"{"by_id":{"x":"bad"}}"#,
            r#"{"by_id":{"1":null}}"#,
            r#"{"by_id":{"1":"a","01":"b"}}"#,
            r#"{"by_day":{"2024-02-30":true}}"#,
            r#"{"by_id":{"5":"a","5":"b"}}"#,
        ],
    );
    all_ok(&r[..1]);
    assert!(rejected(&r[1], "by_id{\"x\"}").contains("invalid map key"));
    assert!(rejected(&r[2], "by_id{\"1\"}").contains("map's values are required"));
    assert!(rejected(&r[3], "by_id{\"01\"}").contains("invalid map key"));
    assert!(rejected(&r[4], "by_day{\"2024-02-30\"}").contains("not a valid date"));
    assert!(rejected(&r[5], "by_id").contains("duplicate map key (entries 0 and 1"));
    let by_id = batch.column(0).as_map();
    assert_eq!(
        by_id.keys().as_primitive::<Int32Type>().values().as_ref(),
        &[1, -20]
    );
    let vals = by_id.values().as_string::<i32>();
    assert_eq!((vals.value(0), vals.value(1)), ("one", "minus"));
    let by_day = batch.column(1).as_map();
    assert_eq!(
        by_day.keys().as_primitive::<Date32Type>().values().as_ref(),
        &[19_782, 0]
    );
    let flags = by_day.values().as_boolean();
    assert!(flags.value(0) && !flags.value(1));
    let by_uuid = batch.column(2).as_map();
    assert_eq!(
        by_uuid.keys().as_fixed_size_binary().value(0)[..2],
        [0x12, 0x3e]
    );
}

#[test]
fn map_entries_array_form() {
    let s = schema(vec![opt(
        1,
        "m",
        map(
            2,
            p(P::Long),
            3,
            strukt(vec![opt(4, "x", p(P::Int))]),
            false,
        ),
    )]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"m":[{"key":10,"value":{"x":1}},{"value":null,"key":11},{"key":12}]}"#,
            r#"{"m":[]}"#,
            r#"{"m":[{"key":1,"value":{"x":"no"}}]}"#,
            r#"{"m":[{"value":{"x":1}}]}"#,
            r#"{"m":[{"key":null,"value":null}]}"#,
            r#"{"m":[{"key":1,"val":null}]}"#,
            r#"{"m":[1]}"#,
            r#"{"m":[{"key":1},{"key":1}]}"#,
        ],
    );
    all_ok(&r[..2]);
    assert!(rejected(&r[2], "m[0].value.x").contains("expected a JSON integer"));
    assert!(rejected(&r[3], "m[0].key").contains("no \"key\""));
    assert!(rejected(&r[4], "m[0].key").contains("null is not allowed"));
    assert!(rejected(&r[5], "m[0]").contains("unexpected member \"val\""));
    assert!(rejected(&r[6], "m[0]").contains("must be an object"));
    assert!(rejected(&r[7], "m").contains("duplicate map key"));
    let m = batch.column(0).as_map();
    assert_eq!(m.value_offsets(), &[0, 3, 3]);
    assert_eq!(
        m.keys().as_primitive::<Int64Type>().values().as_ref(),
        &[10, 11, 12]
    );
    let values = m.values().as_struct();
    assert!(!values.is_null(0));
    assert!(values.is_null(1));
    assert!(values.is_null(2));
    assert_eq!(values.column(0).as_primitive::<Int32Type>().value(0), 1);
}

#[test]
fn large_map_duplicate_detection() {
    let s = schema(vec![opt(1, "m", map(2, p(P::String), 3, p(P::Int), false))]);
    let mut entries: Vec<String> = (0..20).map(|i| format!("\"k{i}\":{i}")).collect();
    let good = format!("{{\"m\":{{{}}}}}", entries.join(","));
    entries.push("\"k7\":0".into());
    let bad = format!("{{\"m\":{{{}}}}}", entries.join(","));
    let (batch, r) = run(&s, &[&good, &bad]);
    all_ok(&r[..1]);
    assert!(rejected(&r[1], "m{\"k7\"}").contains("duplicate map key"));
    assert_eq!(batch.column(0).as_map().value_offsets(), &[0, 20]);
}

#[test]
fn required_struct_children_under_null_parent() {
    // A required child of an optional struct: null parent is fine, missing child is not.
    let s = schema(vec![opt(
        1,
        "s",
        strukt(vec![
            req(2, "a", p(P::Long)),
            req(3, "inner", strukt(vec![req(4, "b", p(P::String))])),
        ]),
    )]);
    let (batch, r) = run(
        &s,
        &[
            r#"{"s":{"a":1,"inner":{"b":"x"}}}"#,
            r#"{"s":null}"#,
            r#"{"s":{"a":2,"inner":null}}"#,
            r#"{"s":{"a":2}}"#,
        ],
    );
    all_ok(&r[..2]);
    assert!(rejected(&r[2], "s.inner").contains("null is not allowed"));
    assert!(rejected(&r[3], "s.inner").contains("missing"));
    let st = batch.column(0).as_struct();
    assert!(is_null(st, 1));
    assert_eq!(st.column(0).as_primitive::<Int64Type>().value(0), 1);
    assert_eq!(
        st.column(1)
            .as_struct()
            .column(0)
            .as_string::<i32>()
            .value(0),
        "x"
    );
}
