//! Iceberg types as people read them, in the spelling of a schema's JSON:
//! iceberg-rust's own `Display` writes a struct's field types back to back
//! without their names (`struct<longstring>`).

use iceberg::spec::{PrimitiveType, Type};

/// `t` as `struct<a: long, b: list<string>>`, `map<string, decimal(10,2)>`.
pub fn type_text(t: &Type) -> String {
    match t {
        Type::Primitive(PrimitiveType::Decimal { precision, scale }) => {
            format!("decimal({precision},{scale})")
        }
        Type::Primitive(PrimitiveType::Fixed(size)) => format!("fixed[{size}]"),
        Type::Primitive(p) => p.to_string(),
        Type::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .iter()
                .map(|f| format!("{}: {}", f.name, type_text(&f.field_type)))
                .collect();
            format!("struct<{}>", fields.join(", "))
        }
        Type::List(l) => format!("list<{}>", type_text(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{}, {}>",
            type_text(&m.key_field.field_type),
            type_text(&m.value_field.field_type)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_types_name_their_fields() {
        let t: Type = serde_json::from_value(serde_json::json!({"type": "struct", "fields": [
            {"id": 1, "name": "method", "required": false, "type": "string"},
            {"id": 2, "name": "tags", "required": false, "type":
                {"type": "list", "element-id": 3, "element-required": false, "element": "long"}},
            {"id": 4, "name": "attrs", "required": false, "type":
                {"type": "map", "key-id": 5, "key": "string", "value-id": 6,
                 "value-required": false, "value": "decimal(10,2)"}},
            {"id": 7, "name": "h", "required": false, "type": "fixed[16]"}]}))
        .unwrap();
        assert_eq!(
            type_text(&t),
            "struct<method: string, tags: list<long>, attrs: map<string, decimal(10,2)>, h: fixed[16]>"
        );
    }
}
