//! Unit tests of the shredder, asserting on the values it produces.

mod avro;
mod coercions;
mod kinds;
mod nested;
mod primitives;
mod records;
mod temporal;
mod unknown;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type,
};

use super::{RecordError, ShredOptions, Shredder};

pub(super) fn p(t: PrimitiveType) -> Type {
    Type::Primitive(t)
}

pub(super) fn req(id: i32, name: &str, ty: Type) -> NestedFieldRef {
    Arc::new(NestedField::required(id, name, ty))
}

pub(super) fn opt(id: i32, name: &str, ty: Type) -> NestedFieldRef {
    Arc::new(NestedField::optional(id, name, ty))
}

pub(super) fn list(id: i32, element: Type, required: bool) -> Type {
    Type::List(ListType::new(Arc::new(NestedField::list_element(
        id, element, required,
    ))))
}

pub(super) fn map(key_id: i32, key: Type, value_id: i32, value: Type, required: bool) -> Type {
    Type::Map(MapType::new(
        Arc::new(NestedField::map_key_element(key_id, key)),
        Arc::new(NestedField::map_value_element(value_id, value, required)),
    ))
}

pub(super) fn strukt(fields: Vec<NestedFieldRef>) -> Type {
    Type::Struct(StructType::new(fields))
}

pub(super) fn schema(fields: Vec<NestedFieldRef>) -> Schema {
    Schema::builder().with_fields(fields).build().unwrap()
}

/// Pushes every record, returning the batch and each record's outcome.
pub(super) fn run_with(
    schema: &Schema,
    options: ShredOptions,
    records: &[&str],
) -> (RecordBatch, Vec<Result<(), RecordError>>) {
    let mut s = Shredder::new(schema, options).unwrap();
    let results: Vec<_> = records.iter().map(|r| s.push(r.as_bytes())).collect();
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(s.len(), accepted);
    let batch = s.finish().unwrap();
    assert_eq!(batch.num_rows(), accepted);
    assert_eq!(
        batch.schema().as_ref(),
        &iceberg::arrow::schema_to_arrow_schema(schema).unwrap()
    );
    (batch, results)
}

pub(super) fn run(
    schema: &Schema,
    records: &[&str],
) -> (RecordBatch, Vec<Result<(), RecordError>>) {
    run_with(schema, ShredOptions::default(), records)
}

/// One column `v` of type `ty` (optional), fed `{"v": <value>}` for each value.
pub(super) fn single(ty: Type, values: &[&str]) -> (ArrayRef, Vec<Result<(), RecordError>>) {
    single_with(ty, ShredOptions::default(), values)
}

pub(super) fn single_with(
    ty: Type,
    options: ShredOptions,
    values: &[&str],
) -> (ArrayRef, Vec<Result<(), RecordError>>) {
    let s = schema(vec![opt(1, "v", ty)]);
    let records: Vec<String> = values.iter().map(|v| format!("{{\"v\":{v}}}")).collect();
    let refs: Vec<&str> = records.iter().map(String::as_str).collect();
    let (batch, results) = run_with(&s, options, &refs);
    (batch.column(0).clone(), results)
}

/// The reason of a rejected record, asserting the field path.
#[track_caller]
pub(super) fn rejected(result: &Result<(), RecordError>, field: &str) -> String {
    match result {
        Ok(()) => panic!("expected a rejection at `{field}`, the record was accepted"),
        Err(e) => {
            assert_eq!(e.field, field, "wrong field for: {}", e.reason);
            e.reason.clone()
        }
    }
}

/// Asserts every listed outcome is accepted.
#[track_caller]
pub(super) fn all_ok(results: &[Result<(), RecordError>]) {
    for (i, r) in results.iter().enumerate() {
        if let Err(e) = r {
            panic!("record {i} rejected: {e}");
        }
    }
}

pub(super) fn is_null(a: &dyn Array, i: usize) -> bool {
    a.is_null(i)
}
