//! The Iceberg schema as Glue columns, so Athena, Redshift Spectrum and the
//! Glue console show the table's columns (engines that read Iceberg take the
//! schema from the metadata file; these columns are for discovery only).
//! Field ids ride in each column's parameters, as Java's Glue catalog writes them.

use aws_sdk_glue::types::Column;
use iceberg::spec::{PrimitiveType, Schema, Type};

/// The Glue (Hive) type name of an Iceberg type.
pub fn glue_type(ty: &Type) -> String {
    match ty {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "int".into(),
            PrimitiveType::Long => "bigint".into(),
            PrimitiveType::Float => "float".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            PrimitiveType::Date => "date".into(),
            // Hive has no time of day; Athena's Iceberg tables show it as a string.
            PrimitiveType::Time => "string".into(),
            PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs
            | PrimitiveType::TimestamptzNs => "timestamp".into(),
            PrimitiveType::String | PrimitiveType::Uuid => "string".into(),
            PrimitiveType::Fixed(_) | PrimitiveType::Binary => "binary".into(),
        },
        Type::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .iter()
                .map(|f| format!("{}:{}", f.name, glue_type(&f.field_type)))
                .collect();
            format!("struct<{}>", fields.join(","))
        }
        Type::List(l) => format!("array<{}>", glue_type(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{},{}>",
            glue_type(&m.key_field.field_type),
            glue_type(&m.value_field.field_type)
        ),
    }
}

/// The top-level fields of `schema` as Glue columns.
pub fn columns(schema: &Schema) -> Vec<Column> {
    schema
        .as_struct()
        .fields()
        .iter()
        .filter_map(|f| {
            Column::builder()
                .name(&f.name)
                .r#type(glue_type(&f.field_type))
                .set_comment(f.doc.clone())
                .parameters("iceberg.field.id", f.id.to_string())
                .parameters("iceberg.field.optional", (!f.required).to_string())
                .parameters("iceberg.field.current", "true")
                .build()
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{ListType, NestedField, StructType};

    use super::*;

    #[test]
    fn nested_types_read_as_hive_types() {
        let item = NestedField::optional(3, "tag", Type::Primitive(PrimitiveType::String));
        let nested = Type::Struct(StructType::new(vec![
            NestedField::required(1, "at", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            NestedField::optional(2, "tags", Type::List(ListType::new(item.into()))).into(),
        ]));
        assert_eq!(
            glue_type(&nested),
            "struct<at:timestamp,tags:array<string>>"
        );
        let dec = Type::Primitive(PrimitiveType::Decimal {
            precision: 10,
            scale: 2,
        });
        assert_eq!(glue_type(&dec), "decimal(10,2)");
    }
}
