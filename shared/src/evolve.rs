//! Schema inference and evolution from JSON records: the types new fields get,
//! and the compatible changes that make a table accept records it cannot yet
//! hold (new optional columns at any depth, int→long, float→double, wider
//! decimals at the same scale, required→optional). Never a drop or a rename.

use std::collections::HashSet;
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type,
};
use serde_json::Value;

/// How types of new fields are inferred from JSON values.
#[derive(Debug, Clone)]
pub struct InferOptions {
    /// JSON numbers with a fraction or exponent become `decimal(38, scale)` instead of `double`.
    pub decimal_scale: Option<u32>,
    /// ISO-8601 date-time strings become `timestamptz` instead of `string`.
    pub timestamps: bool,
    /// Match JSON keys to existing fields ignoring ASCII case.
    pub case_insensitive: bool,
    /// Widen existing column types (int→long, float→double, decimal precision);
    /// off, only columns are added and relaxed.
    pub widen: bool,
    /// Make a required field optional when a record lacks it (or holds
    /// null for it); off, such records fit no schema change.
    pub relax_required: bool,
    /// The records' declared types (a schema registry's Avro schema, mapped):
    /// a new field found here takes its declared type, even while its values
    /// are null, instead of one inferred from its JSON value.
    pub declared: Option<Arc<StructType>>,
}

impl Default for InferOptions {
    fn default() -> Self {
        Self {
            decimal_scale: None,
            timestamps: false,
            case_insensitive: false,
            widen: true,
            relax_required: false,
            declared: None,
        }
    }
}

/// A schema change the records need.
#[derive(Debug, Clone, PartialEq)]
pub struct Evolution {
    /// The evolved schema (same schema id; the catalog assigns the new one).
    pub schema: Schema,
    /// What changed, for logs and reports (e.g. `added optional payload.note: string`).
    pub changes: Vec<String>,
    /// Records whose new fields no schema can hold: they go to the dead
    /// letters, never into the table without those fields.
    pub refused: Vec<Refused>,
}

/// A record [`evolve`] cannot make fit, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// Its index among the records evolved for.
    pub record: usize,
    /// The field at fault, as Iceberg names it (`http.method`).
    pub field: String,
    /// Why, and what to do.
    pub reason: String,
}

/// The iceberg type for a JSON value; `None` for null or empty containers,
/// whose type is not known yet.
pub fn infer_type(value: &Value, opts: &InferOptions, next_id: &mut i32) -> Option<Type> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(_) => Type::Primitive(PrimitiveType::Boolean),
        Value::Number(n) if n.is_i64() || n.is_u64() => Type::Primitive(PrimitiveType::Long),
        Value::Number(_) => match opts.decimal_scale {
            Some(scale) => Type::Primitive(PrimitiveType::Decimal {
                precision: 38,
                scale,
            }),
            None => Type::Primitive(PrimitiveType::Double),
        },
        Value::String(s) if opts.timestamps && looks_like_timestamp(s) => {
            Type::Primitive(PrimitiveType::Timestamptz)
        }
        Value::String(_) => Type::Primitive(PrimitiveType::String),
        Value::Object(map) => {
            let mut fields = Vec::new();
            for (k, v) in map {
                let id = take_id(next_id);
                if let Some(t) = infer_type(v, opts, next_id) {
                    fields.push(Arc::new(NestedField::optional(id, k, t)));
                }
            }
            if fields.is_empty() {
                return None;
            }
            Type::Struct(StructType::new(fields))
        }
        Value::Array(items) => {
            let id = take_id(next_id);
            let element = items.iter().find_map(|v| infer_type(v, opts, next_id))?;
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id, element, false,
            ))))
        }
    })
}

/// Infers a whole schema from sample records (the union of their fields, in
/// order of appearance); records whose fields collide are left out of it.
pub fn infer_schema<'a>(
    records: impl IntoIterator<Item = &'a Value>,
    opts: &InferOptions,
) -> Result<Option<Schema>, iceberg::Error> {
    let empty = Schema::builder().build()?;
    Ok(evolve(&empty, 0, records, opts)?
        .filter(|e| !e.changes.is_empty())
        .map(|e| e.schema))
}

/// The schema change that lets `schema` hold every record it can, or `None`
/// if it already does. New field ids start after `last_column_id`. A record
/// whose new fields would give two fields one full name (the key
/// `"http.method"` beside the nested `http.method`) changes nothing and is
/// [`Refused`]; the others still evolve the schema. An error is a schema
/// Iceberg refuses for another reason: never read as "no change".
pub fn evolve<'a>(
    schema: &Schema,
    last_column_id: i32,
    records: impl IntoIterator<Item = &'a Value>,
    opts: &InferOptions,
) -> Result<Option<Evolution>, iceberg::Error> {
    let mut next_id = last_column_id.max(schema.highest_field_id()) + 1;
    let mut root = schema.as_struct().clone();
    let mut changes = Vec::new();
    let mut refused = Vec::new();
    // Identifier fields stay required whatever a record lacks: Iceberg needs them so.
    let keys: Vec<i32> = schema.identifier_field_ids().collect();
    let ctx = Ctx { opts, keys: &keys };
    let declared = opts.declared.as_deref();
    for (index, record) in records.into_iter().enumerate() {
        let Value::Object(map) = record else { continue };
        let before = changes.len();
        let evolved = evolve_struct(&root, map, declared, "", &ctx, &mut next_id, &mut changes);
        if changes.len() == before {
            root = evolved;
            continue;
        }
        match duplicate_name(&evolved) {
            None => root = evolved,
            Some(field) => {
                changes.truncate(before);
                refused.push(Refused {
                    record: index,
                    reason: format!(
                        "`{field}` would name two fields: a key with a dot in its name and a \
                         nested field (Iceberg joins nested names with dots); rename the key \
                         or send it nested"
                    ),
                    field,
                });
            }
        }
    }
    if changes.is_empty() && refused.is_empty() {
        return Ok(None);
    }
    let schema = Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_identifier_field_ids(schema.identifier_field_ids())
        .with_fields(root.fields().iter().cloned())
        .build()?;
    Ok(Some(Evolution {
        schema,
        changes,
        refused,
    }))
}

/// The first full name (as Iceberg indexes them: `a.b`, `l.element.x`,
/// `m.key`, `m.value.y`) that two fields of `st` share.
fn duplicate_name(st: &StructType) -> Option<String> {
    fn walk(prefix: &str, t: &Type, seen: &mut HashSet<String>) -> Option<String> {
        let mut visit = |name: &str, inner: &Type| {
            let full = join(prefix, name);
            match seen.insert(full.clone()) {
                false => Some(full),
                true => walk(&full, inner, seen),
            }
        };
        match t {
            Type::Primitive(_) => None,
            Type::Struct(st) => st
                .fields()
                .iter()
                .find_map(|f| visit(&f.name, &f.field_type)),
            Type::List(l) => visit("element", &l.element_field.field_type),
            Type::Map(m) => visit("key", &m.key_field.field_type)
                .or_else(|| visit("value", &m.value_field.field_type)),
        }
    }
    walk("", &Type::Struct(st.clone()), &mut HashSet::new())
}

struct Ctx<'a> {
    opts: &'a InferOptions,
    keys: &'a [i32],
}

fn evolve_struct(
    st: &StructType,
    map: &serde_json::Map<String, Value>,
    declared: Option<&StructType>,
    path: &str,
    ctx: &Ctx<'_>,
    next_id: &mut i32,
    changes: &mut Vec<String>,
) -> StructType {
    let opts = ctx.opts;
    let mut fields: Vec<NestedFieldRef> = st.fields().to_vec();
    // Required fields a record lacks become optional.
    for f in fields.iter_mut() {
        if f.required
            && opts.relax_required
            && !ctx.keys.contains(&f.id)
            && lookup(map, &f.name, opts).is_none_or(Value::is_null)
        {
            changes.push(format!("made {} optional", join(path, &f.name)));
            *f = Arc::new(with_type(f, (*f.field_type).clone(), false));
        }
    }
    for (key, value) in map {
        let existing = fields.iter().position(|f| names_match(&f.name, key, opts));
        let declared_field =
            declared.and_then(|d| d.fields().iter().find(|f| names_match(&f.name, key, opts)));
        match existing {
            None => {
                let id = take_id(next_id);
                let t = match declared_field {
                    Some(f) => Some(renumber(&f.field_type, next_id)),
                    None => infer_type(value, opts, next_id),
                };
                if let Some(t) = t {
                    changes.push(format!(
                        "added optional {}: {}",
                        join(path, key),
                        crate::type_text::type_text(&t)
                    ));
                    fields.push(Arc::new(NestedField::optional(id, key, t)));
                }
            }
            Some(i) => {
                let f = &fields[i];
                let p = join(path, &f.name);
                let inner = declared_field.and_then(|d| match d.field_type.as_ref() {
                    Type::Struct(st) => Some(st),
                    _ => None,
                });
                let t = evolve_type(&f.field_type, value, inner, &p, ctx, next_id, changes);
                if t != *f.field_type {
                    fields[i] = Arc::new(with_type(f, t, f.required));
                }
            }
        }
    }
    StructType::new(fields)
}

fn evolve_type(
    t: &Type,
    value: &Value,
    declared: Option<&StructType>,
    path: &str,
    ctx: &Ctx<'_>,
    next_id: &mut i32,
    changes: &mut Vec<String>,
) -> Type {
    let opts = ctx.opts;
    match (t, value) {
        (Type::Struct(st), Value::Object(map)) => Type::Struct(evolve_struct(
            st, map, declared, path, ctx, next_id, changes,
        )),
        (Type::List(list), Value::Array(items)) => {
            let mut element = list.element_field.clone();
            for item in items {
                if item.is_null() && element.required && opts.relax_required {
                    changes.push(format!("made {path}[] optional"));
                    element = Arc::new(with_type(&element, (*element.field_type).clone(), false));
                    continue;
                }
                let et = evolve_type(
                    &element.field_type,
                    item,
                    None,
                    &format!("{path}[]"),
                    ctx,
                    next_id,
                    changes,
                );
                if et != *element.field_type {
                    element = Arc::new(with_type(&element, et, element.required));
                }
            }
            Type::List(ListType::new(element))
        }
        (Type::Map(map), Value::Object(entries)) => {
            let mut value_field = map.value_field.clone();
            for v in entries.values() {
                if v.is_null() && value_field.required && opts.relax_required {
                    changes.push(format!("made {path}{{}} optional"));
                    value_field = Arc::new(with_type(
                        &value_field,
                        (*value_field.field_type).clone(),
                        false,
                    ));
                    continue;
                }
                let vt = evolve_type(
                    &value_field.field_type,
                    v,
                    None,
                    &format!("{path}{{}}"),
                    ctx,
                    next_id,
                    changes,
                );
                if vt != *value_field.field_type {
                    value_field = Arc::new(with_type(&value_field, vt, value_field.required));
                }
            }
            Type::Map(MapType::new(map.key_field.clone(), value_field))
        }
        (Type::Primitive(p), v) if opts.widen => match widen(p, v) {
            Some(w) => {
                changes.push(format!("widened {path} from {p} to {w}"));
                Type::Primitive(w)
            }
            None => t.clone(),
        },
        // Anything else is incompatible: the shredder rejects those records.
        _ => t.clone(),
    }
}

/// `schema` with the top-level column `column` promoted to `to`, if Iceberg
/// allows that promotion (int→long, float→double, decimal(p,s)→decimal(P,s), P ≥ p).
pub fn widen_column(schema: &Schema, column: &str, to: &PrimitiveType) -> Result<Schema, String> {
    let field = schema
        .field_by_name(column)
        .filter(|f| schema.as_struct().fields().iter().any(|t| t.id == f.id))
        .ok_or_else(|| format!("no top-level column `{column}`"))?;
    let Type::Primitive(from) = field.field_type.as_ref() else {
        return Err(format!(
            "`{column}` is {}, not a primitive",
            field.field_type
        ));
    };
    let allowed = match (from, to) {
        (a, b) if a == b => true,
        (PrimitiveType::Int, PrimitiveType::Long) => true,
        (PrimitiveType::Float, PrimitiveType::Double) => true,
        (
            PrimitiveType::Decimal {
                precision: p,
                scale: s,
            },
            PrimitiveType::Decimal {
                precision: q,
                scale: t,
            },
        ) => s == t && q >= p,
        _ => false,
    };
    if !allowed {
        return Err(format!(
            "cannot change `{column}` from {from} to {to} (Iceberg allows int→long, float→double, and a larger decimal precision at the same scale)"
        ));
    }
    let fields = schema.as_struct().fields().iter().map(|f| {
        if f.id == field.id {
            Arc::new(with_type(f, Type::Primitive(to.clone()), f.required))
        } else {
            f.clone()
        }
    });
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_identifier_field_ids(schema.identifier_field_ids())
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())
}

/// `schema` with the field named `column` (a full name: `device.os`,
/// `items.element.sku`) made optional, as `floe table alter --optional` asks.
pub fn relax_column(schema: &Schema, column: &str) -> Result<Schema, String> {
    let field = schema
        .field_by_name(column)
        .ok_or_else(|| format!("no column `{column}`"))?;
    if schema.identifier_field_ids().any(|id| id == field.id) {
        return Err(format!(
            "`{column}` is an identifier field, which Iceberg keeps required"
        ));
    }
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_identifier_field_ids(schema.identifier_field_ids())
        .with_fields(relax_in(schema.as_struct(), field.id).fields().to_vec())
        .build()
        .map_err(|e| e.to_string())
}

fn relax_in(st: &StructType, id: i32) -> StructType {
    StructType::new(st.fields().iter().map(|f| relax_field(f, id)).collect())
}

fn relax_field(f: &NestedFieldRef, id: i32) -> NestedFieldRef {
    let t = match f.field_type.as_ref() {
        Type::Struct(st) => Type::Struct(relax_in(st, id)),
        Type::List(l) => Type::List(ListType::new(relax_field(&l.element_field, id))),
        Type::Map(m) => Type::Map(MapType::new(
            m.key_field.clone(),
            relax_field(&m.value_field, id),
        )),
        p => p.clone(),
    };
    Arc::new(with_type(f, t, f.required && f.id != id))
}

/// The wider primitive a value needs, if the type can widen to hold it.
fn widen(p: &PrimitiveType, v: &Value) -> Option<PrimitiveType> {
    match (p, v) {
        (PrimitiveType::Int, Value::Number(n)) => {
            let fits = n.as_i64().is_some_and(|i| i32::try_from(i).is_ok());
            (!fits && (n.is_i64() || n.is_u64()) && n.as_i64().is_some())
                .then_some(PrimitiveType::Long)
        }
        (PrimitiveType::Float, Value::Number(n)) => {
            let f = n.as_f64()?;
            (f.is_finite() && (f as f32).is_infinite()).then_some(PrimitiveType::Double)
        }
        (PrimitiveType::Decimal { precision, scale }, v) => {
            let text = match v {
                Value::Number(n) => n.to_string(),
                Value::String(s) => s.clone(),
                _ => return None,
            };
            let int_digits = integer_digits(&text)?;
            let needed = int_digits + scale;
            (needed > *precision && needed <= 38).then_some(PrimitiveType::Decimal {
                precision: needed,
                scale: *scale,
            })
        }
        _ => None,
    }
}

/// Digits before the decimal point of a plain decimal literal (no exponent).
fn integer_digits(text: &str) -> Option<u32> {
    let t = text.trim().trim_start_matches(['-', '+']);
    if t.contains(['e', 'E']) {
        return None;
    }
    let int = t.split('.').next()?.trim_start_matches('0');
    int.bytes()
        .all(|b| b.is_ascii_digit())
        .then_some(int.len() as u32)
}

fn with_type(f: &NestedField, t: Type, required: bool) -> NestedField {
    let mut out = NestedField::new(f.id, &f.name, t, required);
    out.doc = f.doc.clone();
    out
}

fn lookup<'a>(
    map: &'a serde_json::Map<String, Value>,
    name: &str,
    opts: &InferOptions,
) -> Option<&'a Value> {
    if opts.case_insensitive {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    } else {
        map.get(name)
    }
}

fn names_match(field: &str, key: &str, opts: &InferOptions) -> bool {
    if opts.case_insensitive {
        field.eq_ignore_ascii_case(key)
    } else {
        field == key
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `t` with fresh field ids from `next_id`, for a declared type entering a table.
fn renumber(t: &Type, next_id: &mut i32) -> Type {
    match t {
        Type::Primitive(_) => t.clone(),
        Type::Struct(st) => Type::Struct(StructType::new(
            st.fields()
                .iter()
                .map(|f| {
                    let id = take_id(next_id);
                    let inner = renumber(&f.field_type, next_id);
                    let mut field = NestedField::new(id, &f.name, inner, false);
                    field.doc = f.doc.clone();
                    Arc::new(field)
                })
                .collect(),
        )),
        Type::List(list) => {
            let id = take_id(next_id);
            let element = renumber(&list.element_field.field_type, next_id);
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id,
                element,
                list.element_field.required,
            ))))
        }
        Type::Map(map) => {
            let key_id = take_id(next_id);
            let value_id = take_id(next_id);
            let key = renumber(&map.key_field.field_type, next_id);
            let value = renumber(&map.value_field.field_type, next_id);
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key)),
                Arc::new(NestedField::map_value_element(
                    value_id,
                    value,
                    map.value_field.required,
                )),
            ))
        }
    }
}

fn take_id(next_id: &mut i32) -> i32 {
    let id = *next_id;
    *next_id += 1;
    id
}

fn looks_like_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 19
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && b[16] == b':'
        && b[..4].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(json: &str) -> Schema {
        serde_json::from_str(json).unwrap()
    }

    const BASE: &str = r#"{"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"id","required":true,"type":"long"},
        {"id":2,"name":"n","required":false,"type":"int"},
        {"id":3,"name":"amount","required":false,"type":"decimal(5,2)"},
        {"id":4,"name":"payload","required":false,"type":{"type":"struct","fields":[
            {"id":5,"name":"a","required":false,"type":"string"}]}}]}"#;

    #[test]
    fn adds_optional_columns_at_top_level_and_nested_with_fresh_ids() {
        let s = schema(BASE);
        let recs = [json!({"id":1,"payload":{"a":"x","b":{"c":1.5}},"tags":["t"],"seen":true})];
        let e = evolve(&s, 5, recs.iter(), &InferOptions::default())
            .unwrap()
            .unwrap();
        let payload = e.schema.field_by_name("payload").unwrap();
        let Type::Struct(st) = payload.field_type.as_ref() else {
            panic!()
        };
        let b = st.field_by_name("b").unwrap();
        assert!(b.id > 5 && !b.required);
        let Type::Struct(bs) = b.field_type.as_ref() else {
            panic!()
        };
        assert_eq!(
            *bs.field_by_name("c").unwrap().field_type,
            Type::Primitive(PrimitiveType::Double)
        );
        let tags = e.schema.field_by_name("tags").unwrap();
        assert!(matches!(tags.field_type.as_ref(), Type::List(_)));
        assert_eq!(
            *e.schema.field_by_name("seen").unwrap().field_type,
            Type::Primitive(PrimitiveType::Boolean)
        );
        // Every id is unique.
        let mut ids: Vec<i32> = (1..=e.schema.highest_field_id())
            .filter(|id| e.schema.field_by_id(*id).is_some())
            .collect();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert!(
            e.changes
                .iter()
                .any(|c| c == "added optional payload.b: struct<c: double>"),
            "{:?}",
            e.changes
        );
    }

    #[test]
    fn widens_int_decimal_and_relaxes_required_but_never_changes_kind() {
        let s = schema(BASE);
        let recs = [
            json!({"n": 3_000_000_000i64, "amount": "123456.7"}),
            json!({"id": 2, "n": "text"}),
        ];
        let relax = InferOptions {
            relax_required: true,
            ..InferOptions::default()
        };
        let e = evolve(&s, 5, recs.iter(), &relax).unwrap().unwrap();
        assert_eq!(
            *e.schema.field_by_name("n").unwrap().field_type,
            Type::Primitive(PrimitiveType::Long)
        );
        assert_eq!(
            *e.schema.field_by_name("amount").unwrap().field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 8,
                scale: 2
            })
        );
        assert!(!e.schema.field_by_name("id").unwrap().required);
        assert_eq!(e.changes.len(), 3, "{:?}", e.changes);
        // By default a required field stays required: its misfits are dead-lettered.
        let e = evolve(&s, 5, recs.iter(), &InferOptions::default())
            .unwrap()
            .unwrap();
        assert!(e.schema.field_by_name("id").unwrap().required);
        assert_eq!(e.changes.len(), 2, "{:?}", e.changes);
    }

    #[test]
    fn widens_columns_only_along_iceberg_promotions() {
        let s = schema(BASE);
        let w = widen_column(&s, "n", &PrimitiveType::Long).unwrap();
        assert_eq!(
            *w.field_by_name("n").unwrap().field_type,
            Type::Primitive(PrimitiveType::Long)
        );
        let d = PrimitiveType::Decimal {
            precision: 10,
            scale: 2,
        };
        assert!(widen_column(&s, "amount", &d).is_ok());
        let e = widen_column(
            &s,
            "amount",
            &PrimitiveType::Decimal {
                precision: 10,
                scale: 3,
            },
        )
        .unwrap_err();
        assert!(e.contains("cannot change `amount`"), "{e}");
        assert!(widen_column(&s, "id", &PrimitiveType::String).is_err());
        assert!(widen_column(&s, "missing", &PrimitiveType::Long).is_err());
    }

    #[test]
    fn relaxes_a_nested_column_and_never_a_key() {
        let s = schema(
            r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
            {"id":1,"name":"id","required":true,"type":"long"},
            {"id":2,"name":"items","required":true,"type":{"type":"list","element-id":3,"element-required":true,
              "element":{"type":"struct","fields":[{"id":4,"name":"sku","required":true,"type":"string"}]}}}]}"#,
        );
        let r = relax_column(&s, "items.element.sku").unwrap();
        assert!(!r.field_by_id(4).unwrap().required);
        assert!(r.field_by_id(2).unwrap().required && r.field_by_id(3).unwrap().required);
        assert!(
            !relax_column(&r, "items")
                .unwrap()
                .field_by_id(2)
                .unwrap()
                .required
        );
        assert!(relax_column(&s, "id").unwrap_err().contains("identifier"));
        assert!(relax_column(&s, "nope").unwrap_err().contains("no column"));
    }

    #[test]
    fn adds_fields_inside_list_elements_and_map_values() {
        let s = schema(
            r#"{"type":"struct","schema-id":0,"fields":[
            {"id":1,"name":"items","required":false,"type":{"type":"list","element-id":2,"element-required":true,
              "element":{"type":"struct","fields":[{"id":3,"name":"sku","required":true,"type":"string"}]}}},
            {"id":4,"name":"attrs","required":false,"type":{"type":"map","key-id":5,"key":"string","value-id":6,"value-required":false,
              "value":{"type":"struct","fields":[{"id":7,"name":"v","required":false,"type":"long"}]}}}]}"#,
        );
        let recs = [json!({"items":[{"sku":"a","qty":2}],"attrs":{"k":{"v":1,"unit":"kg"}}})];
        let e = evolve(&s, 7, recs.iter(), &InferOptions::default())
            .unwrap()
            .unwrap();
        let Type::List(items) = e.schema.field_by_name("items").unwrap().field_type.as_ref() else {
            panic!()
        };
        let Type::Struct(el) = items.element_field.field_type.as_ref() else {
            panic!()
        };
        assert!(
            el.field_by_name("qty")
                .is_some_and(|f| f.id > 7 && !f.required)
        );
        let Type::Map(attrs) = e.schema.field_by_name("attrs").unwrap().field_type.as_ref() else {
            panic!()
        };
        let Type::Struct(val) = attrs.value_field.field_type.as_ref() else {
            panic!()
        };
        assert_eq!(
            *val.field_by_name("unit").unwrap().field_type,
            Type::Primitive(PrimitiveType::String)
        );
        assert_eq!(e.changes.len(), 2, "{:?}", e.changes);
    }

    #[test]
    fn identifier_fields_are_never_relaxed() {
        let s = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            ))])
            .with_identifier_field_ids([1])
            .build()
            .unwrap();
        let recs = [json!({"other": 1})];
        let e = evolve(&s, 1, recs.iter(), &InferOptions::default())
            .unwrap()
            .unwrap();
        assert!(e.schema.field_by_name("id").unwrap().required);
        assert_eq!(e.changes, ["added optional other: long"]);
    }

    #[test]
    fn declared_types_win_over_inferred_ones_even_for_nulls() {
        let declared = StructType::new(vec![
            Arc::new(NestedField::required(
                1,
                "day",
                Type::Primitive(PrimitiveType::Date),
            )),
            Arc::new(NestedField::optional(
                2,
                "note",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::optional(
                3,
                "amount",
                Type::Primitive(PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                }),
            )),
        ]);
        let opts = InferOptions {
            declared: Some(Arc::new(declared)),
            ..InferOptions::default()
        };
        let recs = [json!({"day":"2026-11-30","note":null,"amount":12.5,"extra":1})];
        let s = infer_schema(recs.iter(), &opts).unwrap().unwrap();
        let types: Vec<String> = s
            .as_struct()
            .fields()
            .iter()
            .map(|f| format!("{}:{}", f.name, f.field_type))
            .collect();
        assert_eq!(
            types,
            [
                "day:date",
                "note:string",
                "amount:decimal(10, 2)",
                "extra:long"
            ]
        );
    }

    #[test]
    fn nothing_to_do_when_records_fit() {
        let s = schema(BASE);
        let recs = [json!({"id":1,"n":5,"amount":"1.50","payload":{"a":"x"}})];
        assert!(
            evolve(&s, 5, recs.iter(), &InferOptions::default())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn infers_a_schema_with_configured_timestamps_and_decimals() {
        let opts = InferOptions {
            decimal_scale: Some(4),
            timestamps: true,
            ..InferOptions::default()
        };
        let recs =
            [json!({"id":1,"ts":"2026-11-30T10:00:00Z","price":1.25,"name":"a","nothing":null})];
        let s = infer_schema(recs.iter(), &opts).unwrap().unwrap();
        let names: Vec<_> = s
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect();
        assert_eq!(names, ["id", "ts", "price", "name"]);
        assert_eq!(
            *s.field_by_name("ts").unwrap().field_type,
            Type::Primitive(PrimitiveType::Timestamptz)
        );
        assert_eq!(
            *s.field_by_name("price").unwrap().field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 38,
                scale: 4
            })
        );
    }

    #[test]
    fn a_dotted_key_colliding_with_a_nested_field_is_refused_and_the_rest_evolves() {
        let s = schema(
            r#"{"type":"struct","schema-id":0,"fields":[
            {"id":1,"name":"http","required":false,"type":{"type":"struct","fields":[
                {"id":2,"name":"method","required":false,"type":"string"}]}}]}"#,
        );
        let recs = [
            json!({"http":{"method":"GET"},"msg":"a"}),
            json!({"http.method":"POST","host":"h"}),
            json!({"host":"h2"}),
        ];
        let e = evolve(&s, 2, recs.iter(), &InferOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(e.refused.len(), 1, "{:?}", e.refused);
        assert_eq!(e.refused[0].record, 1);
        assert_eq!(e.refused[0].field, "http.method");
        assert!(e.refused[0].reason.contains("rename the key"));
        // The other records' new fields joined; the colliding key did not.
        assert!(e.schema.field_by_name("msg").is_some());
        assert!(e.schema.field_by_name("host").is_some());
        let top: Vec<&str> = e
            .schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(top, ["http", "msg", "host"]);
    }

    #[test]
    fn one_record_colliding_with_itself_is_refused_on_a_new_table() {
        let recs = [json!({"a.b":1,"a":{"b":2}}), json!({"c":3})];
        let opts = InferOptions::default();
        let e = evolve(&Schema::builder().build().unwrap(), 0, recs.iter(), &opts)
            .unwrap()
            .unwrap();
        assert_eq!(e.refused.iter().map(|r| r.record).collect::<Vec<_>>(), [0]);
        assert_eq!(e.refused[0].field, "a.b");
        let s = infer_schema(recs.iter(), &opts).unwrap().unwrap();
        assert!(s.field_by_name("c").is_some() && s.field_by_name("a").is_none());
        // Within a list's struct and a map's value too.
        let recs = [json!({"l":[{"x":1}],"l.element.x":2})];
        let e = evolve(&Schema::builder().build().unwrap(), 0, recs.iter(), &opts)
            .unwrap()
            .unwrap();
        assert_eq!(e.refused[0].field, "l.element.x");
    }
}
