//! Table definitions as users write them: an Iceberg schema JSON file (the
//! spec's `struct` form), partition expressions like `day(ts)` or
//! `bucket(16, id)`, and `key=value` properties.

use std::collections::HashMap;

use std::sync::Arc;

use iceberg::TableCreation;
use iceberg::spec::{
    FormatVersion, NestedField, NullOrder, PrimitiveType, Schema, SortDirection, SortField,
    SortOrder, Transform, Type, UnboundPartitionSpec,
};

use crate::config::ResolvedTable;
use crate::error::{Classify, ErrorKind};
use crate::schema_json;
use crate::write::COMPRESSION_CODEC;

/// A table definition that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TableDefError {
    /// The schema JSON does not parse as an Iceberg schema.
    #[error("schema: {0}")]
    SchemaJson(#[source] serde_json::Error),
    /// A field of the schema JSON is not one Iceberg has. Found by floe
    /// itself: the parser's own error ("did not match any variant of
    /// untagged enum") names neither the field nor the type, so it is not
    /// kept beside this.
    #[error("schema: {0}")]
    SchemaField(String),
    /// The schema file could not be read.
    #[error("schema file {}: {source}", path.display())]
    SchemaFile {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No schema is given, and the batch has no record to infer one from.
    #[error("cannot infer a schema: no record in the batch has a non-null field")]
    Uninferable,
    /// iceberg-rust refused the schema (an identifier field it cannot take).
    #[error("schema: {0}")]
    Schema(#[source] iceberg::Error),
    /// A partition expression is malformed or names an unknown column.
    #[error("partition `{expr}`: {reason}")]
    Partition {
        /// The expression.
        expr: String,
        /// What is wrong.
        reason: String,
    },
    /// A property is not `key=value`.
    #[error("property `{0}`: expected KEY=VALUE")]
    Property(String),
    /// A sort expression is malformed or names an unknown column.
    #[error("sort `{expr}`: {reason}")]
    Sort {
        /// The expression.
        expr: String,
        /// What is wrong.
        reason: String,
    },
    /// An identifier field names no top-level column.
    #[error("identifier field `{0}`: no such top-level column")]
    Identifier(String),
    /// A column's type needs a later format version than the table's.
    #[error(
        "column `{column}`: {type_name} needs format version 3 (format_version = 3 in the table's config section), the table would be v{version}"
    )]
    FormatVersion {
        /// The column (dotted for nested fields).
        column: String,
        /// Its type.
        type_name: String,
        /// The table's format version.
        version: u8,
    },
}

/// A table definition is a setting: it stays unusable until changed.
impl Classify for TableDefError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Config
    }
}

/// Parses an Iceberg schema from its JSON form.
pub fn parse_schema(json: &str) -> Result<Schema, TableDefError> {
    serde_json::from_str(json).map_err(|e| {
        // iceberg-rust's answer for a bad field is "did not match any variant
        // of untagged enum": find the field and say what is wrong with it.
        let found = serde_json::from_str::<serde_json::Value>(json)
            .ok()
            .and_then(|v| schema_json::fault(&v, ""));
        match found {
            Some(reason) => TableDefError::SchemaField(reason),
            None => TableDefError::SchemaJson(e),
        }
    })
}

/// Parses `transform(args, column)` or a bare column (identity).
pub fn parse_partition(
    schema: &Schema,
    exprs: &[String],
) -> Result<UnboundPartitionSpec, TableDefError> {
    let mut builder = UnboundPartitionSpec::builder();
    for expr in exprs {
        let bad = |reason: &str| TableDefError::Partition {
            expr: expr.clone(),
            reason: reason.to_string(),
        };
        let e = expr.trim();
        let (transform, column) = match e.split_once('(') {
            None => (Transform::Identity, e.to_string()),
            Some((name, rest)) => {
                let args = rest.strip_suffix(')').ok_or_else(|| bad("missing `)`"))?;
                let args: Vec<&str> = args.split(',').map(str::trim).collect();
                let width = |a: &str| a.parse::<u32>().map_err(|_| bad("width must be a number"));
                match (name.trim(), args.as_slice()) {
                    ("identity", [c]) => (Transform::Identity, c.to_string()),
                    ("year" | "years", [c]) => (Transform::Year, c.to_string()),
                    ("month" | "months", [c]) => (Transform::Month, c.to_string()),
                    ("day" | "days", [c]) => (Transform::Day, c.to_string()),
                    ("hour" | "hours", [c]) => (Transform::Hour, c.to_string()),
                    ("bucket", [n, c]) => (Transform::Bucket(width(n)?), c.to_string()),
                    ("truncate", [w, c]) => (Transform::Truncate(width(w)?), c.to_string()),
                    _ => {
                        return Err(bad(
                            "expected identity(c), year(c), month(c), day(c), hour(c), bucket(N, c) or truncate(W, c)",
                        ));
                    }
                }
            }
        };
        let field = schema
            .field_by_name(&column)
            .ok_or_else(|| bad(&format!("no column `{column}` in the schema")))?;
        let name = match transform {
            Transform::Identity => column.clone(),
            Transform::Bucket(n) => format!("{column}_bucket_{n}"),
            Transform::Truncate(w) => format!("{column}_trunc_{w}"),
            t => format!("{column}_{}", t.to_string().to_lowercase()),
        };
        builder = builder
            .add_partition_field(field.id, name, transform)
            .map_err(|e| bad(&e.to_string()))?;
    }
    Ok(builder.build())
}

/// Parses `KEY=VALUE` properties.
pub fn parse_properties(kvs: &[String]) -> Result<HashMap<String, String>, TableDefError> {
    kvs.iter()
        .map(|kv| {
            kv.split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| TableDefError::Property(kv.clone()))
        })
        .collect()
}

/// Parses sort expressions `col [asc|desc] [nulls first|nulls last]`.
pub fn parse_sort(schema: &Schema, exprs: &[String]) -> Result<SortOrder, TableDefError> {
    if exprs.is_empty() {
        return Ok(SortOrder::unsorted_order());
    }
    let mut builder = SortOrder::builder();
    builder.with_order_id(1);
    for expr in exprs {
        let bad = |reason: &str| TableDefError::Sort {
            expr: expr.clone(),
            reason: reason.to_string(),
        };
        let words: Vec<String> = expr.split_whitespace().map(str::to_lowercase).collect();
        let (column, rest) = words.split_first().ok_or_else(|| bad("empty"))?;
        let field = schema
            .field_by_name(column)
            .ok_or_else(|| bad(&format!("no column `{column}` in the schema")))?;
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        let (direction, nulls) = match rest.split_first() {
            Some((&"desc", n)) => (SortDirection::Descending, n),
            Some((&"asc", n)) => (SortDirection::Ascending, n),
            _ => (SortDirection::Ascending, rest.as_slice()),
        };
        let null_order = match nulls {
            [] if direction == SortDirection::Descending => NullOrder::Last,
            [] => NullOrder::First,
            ["nulls", "first"] => NullOrder::First,
            ["nulls", "last"] => NullOrder::Last,
            _ => return Err(bad("expected `col [asc|desc] [nulls first|nulls last]`")),
        };
        builder.with_sort_field(SortField {
            source_id: field.id,
            transform: Transform::Identity,
            direction,
            null_order,
        });
    }
    builder.build(schema).map_err(|e| TableDefError::Sort {
        expr: exprs.join(", "),
        reason: e.to_string(),
    })
}

/// The creation of a table from its configured settings and a (declared or
/// inferred) schema: identifier fields become required, then partitioning,
/// sort order, properties and format version are applied.
pub fn configured_creation(
    name: &str,
    schema: Schema,
    table: &ResolvedTable,
) -> Result<TableCreation, TableDefError> {
    let mut fields: Vec<_> = schema.as_struct().fields().to_vec();
    // The schema file's own identifier fields count as much as the config's.
    let mut identifier_ids: Vec<i32> = schema.identifier_field_ids().collect();
    for id_name in &table.identifier_fields {
        let pos = fields
            .iter()
            .position(|f| &f.name == id_name)
            .ok_or_else(|| TableDefError::Identifier(id_name.clone()))?;
        let f = &fields[pos];
        if !identifier_ids.contains(&f.id) {
            identifier_ids.push(f.id);
        }
        fields[pos] = Arc::new(NestedField::required(
            f.id,
            &f.name,
            (*f.field_type).clone(),
        ));
    }
    let schema = Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_fields(fields)
        .with_identifier_field_ids(identifier_ids)
        .build()
        .map_err(TableDefError::Schema)?;
    let partition = parse_partition(&schema, &table.partition)?;
    // Equality deletes reach only their own partition, and copy-on-write
    // lists keys as such; position deletes follow a key wherever it lives.
    let positions = table
        .properties
        .get(crate::keyed_mode::KEYED_DELETES)
        .is_none_or(|v| v == "position")
        && table.merge_strategy == crate::config::MergeStrategy::MergeOnRead;
    if schema.identifier_field_ids().next().is_some()
        && !partition.fields().is_empty()
        && !positions
    {
        return Err(TableDefError::Partition {
            expr: table.partition.join(", "),
            reason: "keyed tables with equality deletes or copy-on-write are unpartitioned: use merge_strategy = \"merge-on-read\" (position deletes) to partition one".into(),
        });
    }
    let sort = parse_sort(&schema, &table.sort)?;
    let format_version = match table.format_version {
        1 => FormatVersion::V1,
        3 => FormatVersion::V3,
        _ => FormatVersion::V2,
    };
    if format_version < FormatVersion::V3 {
        let root = Type::Struct(schema.as_struct().clone());
        if let Some((column, type_name)) = v3_type(&root, "") {
            return Err(TableDefError::FormatVersion {
                column,
                type_name,
                version: format_version as u8,
            });
        }
    }
    let mut creation = creation(
        name,
        schema,
        partition,
        table.properties.clone().into_iter().collect(),
    );
    creation.sort_order = Some(sort);
    creation.format_version = format_version;
    Ok(creation)
}

/// The first column (dotted path) under `path` whose type only v3 tables
/// may hold, with that type.
fn v3_type(ty: &Type, path: &str) -> Option<(String, String)> {
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    match ty {
        Type::Primitive(p @ (PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)) => {
            Some((path.to_string(), p.to_string()))
        }
        Type::Primitive(_) => None,
        Type::Struct(s) => s
            .fields()
            .iter()
            .find_map(|f| v3_type(&f.field_type, &join(&f.name))),
        Type::List(l) => v3_type(&l.element_field.field_type, path),
        Type::Map(m) => v3_type(&m.key_field.field_type, path)
            .or_else(|| v3_type(&m.value_field.field_type, path)),
    }
}

/// Table property floe sets on the tables it creates: maintenance looks
/// after them without being told to (see `maintain::owned`).
pub const MANAGED: &str = "floe.managed";

/// `commit.retry.num-retries` on tables floe creates, for the other engines
/// that write them (floe follows it too).
pub const RETRIES_FOR_OTHER_WRITERS: u32 = 20;

/// A table creation with floe's defaults (format v2, zstd) under the given settings.
pub fn creation(
    name: &str,
    schema: Schema,
    partition: UnboundPartitionSpec,
    mut properties: HashMap<String, String>,
) -> TableCreation {
    properties.insert(MANAGED.to_string(), "true".to_string());
    properties
        .entry(COMPRESSION_CODEC.to_string())
        .or_insert_with(|| "zstd".to_string());
    // A commit every few seconds would otherwise leave a metadata file each.
    properties
        .entry(crate::commit::DELETE_AFTER_COMMIT.to_string())
        .or_insert_with(|| "true".to_string());
    // Spark's and Flink's writers retry a lost commit 4 times by default:
    // too few beside a committer that lands a snapshot every few seconds.
    properties
        .entry(crate::commit::retry::NUM_RETRIES.to_string())
        .or_insert_with(|| RETRIES_FOR_OTHER_WRITERS.to_string());
    // Keyed tables take position deletes, which every engine reads, unless
    // their properties choose another way.
    let chosen = crate::keyed_mode::MODE_PROPERTIES
        .iter()
        .any(|p| properties.get(*p).is_some_and(|v| v == "copy-on-write"));
    if schema.identifier_field_ids().next().is_some() && !chosen {
        properties
            .entry(crate::keyed_mode::KEYED_DELETES.to_string())
            .or_insert_with(|| "position".to_string());
    }
    TableCreation::builder()
        .name(name.to_string())
        .schema(schema)
        .partition_spec(partition)
        .properties(properties)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_type_is_named_with_its_field_and_the_likely_type() {
        let text = r#"{"type":"struct","fields":[
            {"id":1,"name":"id","required":true,"type":"long"},
            {"id":2,"name":"info","required":false,"type":{"type":"struct","fields":[
                {"id":3,"name":"ts","required":false,"type":"timestamtz"}]}}]}"#;
        let err = parse_schema(text).unwrap_err().to_string();
        assert!(err.contains("field `info.ts`"), "{err}");
        assert!(err.contains("unknown type `timestamtz`"), "{err}");
        assert!(err.contains("did you mean `timestamptz`?"), "{err}");
        let err = parse_schema(r#"{"type":"struct","fields":[{"id":1,"name":"n","type":"int"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `n`: no \"required\""), "{err}");
        // A v3 type floe cannot write says so, and what to use instead.
        let err = parse_schema(
            r#"{"type":"struct","fields":[{"id":1,"name":"payload","required":false,"type":"variant"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("field `payload`: type `variant` (Iceberg v3) is not supported yet"),
            "{err}"
        );
        assert!(err.contains("`string` column"), "{err}");
        // Broken JSON keeps serde's line and column.
        let err = parse_schema("{\"type\": ").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }

    const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"id","required":true,"type":"long"},
        {"id":2,"name":"ts","required":false,"type":"timestamptz"},
        {"id":3,"name":"name","required":false,"type":"string"}]}"#;

    #[test]
    fn parses_schema_and_partition_expressions() {
        let schema = parse_schema(SCHEMA).unwrap();
        let spec = parse_partition(
            &schema,
            &["day(ts)".into(), "bucket(16, id)".into(), "name".into()],
        )
        .unwrap();
        let fields = spec.fields();
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[0].transform, Transform::Day);
        assert_eq!(fields[0].name, "ts_day");
        assert_eq!(fields[1].transform, Transform::Bucket(16));
        assert_eq!(fields[1].source_id, 1);
        assert_eq!(fields[2].transform, Transform::Identity);
    }

    #[test]
    fn parses_sort_orders() {
        let schema = parse_schema(SCHEMA).unwrap();
        let order = parse_sort(&schema, &["ts desc".into(), "id asc nulls last".into()]).unwrap();
        assert_eq!(order.fields.len(), 2);
        assert_eq!(order.fields[0].direction, SortDirection::Descending);
        assert_eq!(order.fields[0].null_order, NullOrder::Last);
        assert_eq!(order.fields[1].source_id, 1);
        assert_eq!(order.fields[1].null_order, NullOrder::Last);
        assert!(parse_sort(&schema, &["nope".into()]).is_err());
        assert!(parse_sort(&schema, &["id sideways".into()]).is_err());
    }

    #[test]
    fn names_what_is_wrong() {
        let schema = parse_schema(SCHEMA).unwrap();
        let e = parse_partition(&schema, &["day(nope)".into()]).unwrap_err();
        assert!(e.to_string().contains("no column `nope`"), "{e}");
        assert!(parse_partition(&schema, &["bucket(x, id)".into()]).is_err());
        assert!(parse_schema("{}").is_err());
        assert!(parse_properties(&["novalue".into()]).is_err());
        assert_eq!(
            parse_properties(&["a=b=c".into()]).unwrap()["a"],
            "b=c".to_string()
        );
    }

    #[test]
    fn nanosecond_timestamps_need_a_v3_table_wherever_they_nest() {
        let schema = parse_schema(
            r#"{"type":"struct","schema-id":0,"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"attrs","required":false,"type":{"type":"map","key-id":3,"key":"string",
                "value-id":4,"value":{"type":"struct","fields":[
                  {"id":5,"name":"at","required":false,"type":"timestamptz_ns"}]},"value-required":false}}]}"#,
        )
        .unwrap();
        let config = crate::config::Config::from_toml_str(
            "[tables.\"a.v3\"]\nformat_version = 3\n",
            std::path::Path::new("."),
            &|_| None,
        )
        .unwrap();
        let err = configured_creation("t", schema.clone(), &config.table("a.v2")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column `attrs.at`: timestamptz_ns needs format version 3 (format_version = 3 in the table's config section), the table would be v2"
        );
        let v3 = configured_creation("t", schema, &config.table("a.v3")).unwrap();
        assert_eq!(v3.format_version, FormatVersion::V3);
    }
}
