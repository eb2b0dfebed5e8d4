//! What an HTTP request may not do even with a valid token: add more columns
//! than `http.max_new_columns` (its 400 answers leave values out with
//! [`crate::redact`] when `http.redact_values` is on).

use std::borrow::Cow;
use std::collections::BTreeSet;

use iceberg::spec::{NestedFieldRef, Schema, StructType, Type};
use serde_json::Value;

use crate::change::{self, ChangeFormat};
use crate::config::Changelog;
use crate::pipeline::changelog;
use crate::source::Pos;

/// The column paths (`a`, `a.b`; a list's struct elements as `list.b`) the
/// records would add to `schema`, read until a record takes them past
/// `limit` (enough to know the limit is passed). Records that are not JSON objects add nothing here; the writer
/// dead-letters them. `null` values add nothing: no type can be inferred.
pub(super) fn new_columns<'a>(
    schema: &Schema,
    records: impl Iterator<Item = &'a [u8]>,
    case_insensitive: bool,
    limit: usize,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for record in records {
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(record) else {
            continue;
        };
        walk_struct(schema.as_struct(), &obj, "", case_insensitive, &mut found);
        if found.len() > limit {
            break;
        }
    }
    found
}

/// The rows `records` become in a table: a keyed table or a changelog-only
/// one takes the row a change record carries (a Debezium envelope's
/// `after`), not the envelope, so the envelope's own fields are no columns.
/// A record that does not decode stays as sent; the writer dead-letters it.
pub(super) fn table_rows<'a>(
    records: impl Iterator<Item = &'a [u8]>,
    keyed: bool,
    changelog: Changelog,
) -> Vec<Cow<'a, [u8]>> {
    records
        .map(|record| {
            if !keyed && changelog != Changelog::Only {
                return Cow::Borrowed(record);
            }
            match change::decode(record, ChangeFormat::Auto) {
                Ok(c) if changelog == Changelog::Only => {
                    Cow::Owned(changelog::row(&c, Pos::Line(0)))
                }
                Ok(c) => Cow::Owned(c.row.into_bytes()),
                Err(_) => Cow::Borrowed(record),
            }
        })
        .collect()
}

fn walk_struct(
    st: &StructType,
    obj: &serde_json::Map<String, Value>,
    prefix: &str,
    ci: bool,
    found: &mut BTreeSet<String>,
) {
    for (key, value) in obj {
        if value.is_null() {
            continue;
        }
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let field = st
            .fields()
            .iter()
            .find(|f| f.name == *key || (ci && f.name.eq_ignore_ascii_case(key)));
        match field {
            Some(f) => walk_value(f, value, &path, ci, found),
            None => add_all(value, &path, found),
        }
    }
}

fn walk_value(
    field: &NestedFieldRef,
    value: &Value,
    path: &str,
    ci: bool,
    found: &mut BTreeSet<String>,
) {
    match (field.field_type.as_ref(), value) {
        (Type::Struct(st), Value::Object(obj)) => walk_struct(st, obj, path, ci, found),
        (Type::List(list), Value::Array(items)) => {
            for item in items {
                walk_value(&list.element_field, item, path, ci, found);
            }
        }
        // Maps take any key; a value of the wrong type is the writer's to reject.
        _ => {}
    }
}

/// A new field and, for an object, every field inside it.
fn add_all(value: &Value, path: &str, found: &mut BTreeSet<String>) {
    found.insert(path.to_string());
    let objects: Vec<&serde_json::Map<String, Value>> = match value {
        Value::Object(obj) => vec![obj],
        Value::Array(items) => items.iter().filter_map(Value::as_object).collect(),
        _ => Vec::new(),
    };
    for obj in objects {
        for (key, inner) in obj {
            if !inner.is_null() {
                add_all(inner, &format!("{path}.{key}"), found);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        crate::tabledef::parse_schema(
            r#"{"type":"struct","schema-id":0,"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"info","required":false,"type":{"type":"struct","fields":[
                {"id":3,"name":"a","required":false,"type":"string"}]}}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn counts_new_fields_nested_ones_too_and_ignores_nulls() {
        let recs: Vec<&[u8]> = vec![
            br#"{"id":1,"info":{"a":"x","b":2},"new":{"c":1,"d":null},"gone":null}"#,
            br#"{"ID":2,"x":[{"y":1}]}"#,
            b"not json",
        ];
        let found = new_columns(&schema(), recs.iter().copied(), false, 100);
        let found: Vec<&str> = found.iter().map(String::as_str).collect();
        assert_eq!(found, ["ID", "info.b", "new", "new.c", "x", "x.y"]);
        let ci = new_columns(&schema(), recs.iter().copied(), true, 100);
        assert!(!ci.contains("ID"), "{ci:?}");
        // Stops after the record that passes the limit.
        assert_eq!(
            new_columns(&schema(), recs.iter().copied(), false, 1).len(),
            3
        );
    }
}
