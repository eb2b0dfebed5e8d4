//! A writer's schema as Iceberg types, so a table created or evolved from
//! registry Avro gets the declared types (a `decimal(10,2)`, a `date`), not
//! ones guessed from values; and the named types a schema refers to.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::{Name, RecordSchema};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};

/// Every named type `schema` defines, by name.
pub(super) fn collect_names(schema: &AvroSchema, names: &mut HashMap<Name, AvroSchema>) {
    match schema {
        AvroSchema::Record(r) => {
            names.insert(r.name.clone(), schema.clone());
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        AvroSchema::Enum(e) => {
            names.insert(e.name.clone(), schema.clone());
        }
        AvroSchema::Fixed(f) => {
            names.insert(f.name.clone(), schema.clone());
        }
        AvroSchema::Array(a) => collect_names(&a.items, names),
        AvroSchema::Map(m) => collect_names(&m.types, names),
        AvroSchema::Union(u) => u.variants().iter().for_each(|v| collect_names(v, names)),
        AvroSchema::Decimal(d) => collect_names(&d.inner, names),
        _ => {}
    }
}

/// True when `schema` names a type it defined elsewhere (`Ref`).
pub(super) fn refers(schema: &AvroSchema) -> bool {
    match schema {
        AvroSchema::Ref { .. } => true,
        AvroSchema::Record(r) => r.fields.iter().any(|f| refers(&f.schema)),
        AvroSchema::Array(a) => refers(&a.items),
        AvroSchema::Map(m) => refers(&m.types),
        AvroSchema::Union(u) => u.variants().iter().any(refers),
        AvroSchema::Decimal(d) => refers(&d.inner),
        _ => false,
    }
}

/// Nesting deeper than this is a recursive schema (a linked list), which
/// no Iceberg type can hold.
pub(super) const MAX_DEPTH: usize = 64;

/// `schema`, or the named type it refers to.
pub(super) fn resolve<'a>(
    schema: &'a AvroSchema,
    names: &'a HashMap<Name, AvroSchema>,
) -> Result<&'a AvroSchema, String> {
    match schema {
        AvroSchema::Ref { name } => names
            .get(name)
            .ok_or_else(|| format!("the schema refers to {name:?}, which it does not define")),
        s => Ok(s),
    }
}

/// The Iceberg struct of a record's fields (ids from `next_id` on).
pub(super) fn record_type(
    record: &RecordSchema,
    names: &HashMap<Name, AvroSchema>,
    next_id: &mut i32,
    depth: usize,
) -> Result<StructType, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "record {} nests deeper than {MAX_DEPTH} levels (a recursive schema?)",
            record.name
        ));
    }
    let mut fields = Vec::with_capacity(record.fields.len());
    for f in &record.fields {
        let id = *next_id;
        *next_id += 1;
        // A field that is always null has no column.
        if let Some(t) = iceberg_type(&f.schema, names, next_id, depth + 1)? {
            let mut field = NestedField::optional(id, &f.name, t);
            field.doc = f.doc.clone();
            fields.push(Arc::new(field));
        }
    }
    Ok(StructType::new(fields))
}

/// The non-null branch of a `["null", T]` union (either order).
pub(super) fn nullable(u: &apache_avro::schema::UnionSchema) -> Option<&AvroSchema> {
    match u.variants() {
        [AvroSchema::Null, t] | [t, AvroSchema::Null] => Some(t),
        _ => None,
    }
}

fn primitive(p: PrimitiveType) -> Option<Type> {
    Some(Type::Primitive(p))
}

/// The Iceberg type of an Avro schema; `None` for `null`, which holds nothing.
///
/// Long because it is one match with an arm per Avro schema kind and
/// logical type.
fn iceberg_type(
    schema: &AvroSchema,
    names: &HashMap<Name, AvroSchema>,
    next_id: &mut i32,
    depth: usize,
) -> Result<Option<Type>, String> {
    let schema = resolve(schema, names)?;
    Ok(match schema {
        AvroSchema::Null => None,
        AvroSchema::Boolean => primitive(PrimitiveType::Boolean),
        AvroSchema::Int => primitive(PrimitiveType::Int),
        AvroSchema::Long => primitive(PrimitiveType::Long),
        AvroSchema::Float => primitive(PrimitiveType::Float),
        AvroSchema::Double => primitive(PrimitiveType::Double),
        AvroSchema::Bytes => primitive(PrimitiveType::Binary),
        AvroSchema::String | AvroSchema::Enum(_) => primitive(PrimitiveType::String),
        AvroSchema::Fixed(f) => primitive(PrimitiveType::Fixed(f.size as u64)),
        // Iceberg decimals hold 38 digits; wider ones keep their digits as text.
        AvroSchema::Decimal(d) if d.precision <= 38 => primitive(PrimitiveType::Decimal {
            precision: d.precision as u32,
            scale: d.scale as u32,
        }),
        AvroSchema::Decimal(_) | AvroSchema::BigDecimal => primitive(PrimitiveType::String),
        AvroSchema::Uuid => primitive(PrimitiveType::Uuid),
        AvroSchema::Date => primitive(PrimitiveType::Date),
        AvroSchema::TimeMillis | AvroSchema::TimeMicros => primitive(PrimitiveType::Time),
        // An instant: Iceberg's timestamptz, microseconds, so millis are exact.
        AvroSchema::TimestampMillis | AvroSchema::TimestampMicros => {
            primitive(PrimitiveType::Timestamptz)
        }
        AvroSchema::LocalTimestampMillis | AvroSchema::LocalTimestampMicros => {
            primitive(PrimitiveType::Timestamp)
        }
        // Nanoseconds do not fit a v2 table's microsecond timestamps
        // exactly: they stay the number they are.
        AvroSchema::TimestampNanos | AvroSchema::LocalTimestampNanos => {
            primitive(PrimitiveType::Long)
        }
        AvroSchema::Duration => {
            let mut part = |name: &str| {
                let id = *next_id;
                *next_id += 1;
                Arc::new(NestedField::optional(
                    id,
                    name,
                    Type::Primitive(PrimitiveType::Long),
                ))
            };
            Some(Type::Struct(StructType::new(vec![
                part("months"),
                part("days"),
                part("millis"),
            ])))
        }
        AvroSchema::Record(r) => Some(Type::Struct(record_type(r, names, next_id, depth)?)),
        AvroSchema::Array(a) => {
            let id = *next_id;
            *next_id += 1;
            iceberg_type(&a.items, names, next_id, depth + 1)?.map(|t| {
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    id, t, false,
                ))))
            })
        }
        AvroSchema::Map(m) => {
            let (key, value) = (*next_id, *next_id + 1);
            *next_id += 2;
            iceberg_type(&m.types, names, next_id, depth + 1)?.map(|t| {
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(
                        key,
                        Type::Primitive(PrimitiveType::String),
                    )),
                    Arc::new(NestedField::map_value_element(value, t, false)),
                ))
            })
        }
        AvroSchema::Union(u) => match nullable(u) {
            Some(t) => iceberg_type(t, names, next_id, depth + 1)?,
            // A union of several types has no one Iceberg type: the value
            // is kept as its JSON text.
            None => primitive(PrimitiveType::String),
        },
        AvroSchema::Ref { .. } => None,
    })
}
