//! What is wrong with an Iceberg schema's JSON, in words a user can act on:
//! iceberg-rust's deserializer answers any bad field with "did not match any
//! variant of untagged enum", naming neither the field nor the type.

/// Iceberg's primitive type names (`decimal(P,S)` and `fixed[N]` aside).
const PRIMITIVES: &[&str] = &[
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timestamp_ns",
    "timestamptz_ns",
    "string",
    "uuid",
    "binary",
];

/// Why a table's metadata (its JSON) did not parse, when one of its schemas
/// is the cause: iceberg-rust's own answer names no field.
fn metadata_fault(metadata: &serde_json::Value) -> Option<String> {
    let schemas = metadata.get("schemas").and_then(|s| s.as_array());
    let legacy = metadata.get("schema");
    let current = metadata.get("current-schema-id").and_then(|id| id.as_i64());
    schemas
        .into_iter()
        .flatten()
        .chain(legacy)
        .find_map(|schema| {
            let fault = fault(schema, "")?;
            match (schema.get("schema-id").and_then(|id| id.as_i64()), current) {
                (Some(id), Some(current)) if id != current => Some(format!(
                    "schema {id}, {fault}; only earlier schemas hold it, not the current \
                     one ({current}): expiring the snapshots that use them with Iceberg \
                     Java's `CALL system.expire_snapshots(table => 'NS.TABLE', \
                     clean_expired_metadata => true)` drops those schemas, after which \
                     floe loads the table"
                )),
                (Some(id), _) => Some(format!("schema {id}, {fault}")),
                (None, _) => Some(fault),
            }
        })
}

/// The error for table metadata iceberg-rust could not parse because of
/// one of its schemas, naming `whence` (its file, the catalog's answer):
/// unsupported, so nothing retries it. `None` when its schemas are not why.
/// iceberg-rust's own error is left out: "did not match any variant of
/// untagged enum TableMetadataEnum" says nothing the fault does not say
/// better.
pub fn unsupported(whence: &str, metadata: &serde_json::Value) -> Option<iceberg::Error> {
    let fault = metadata_fault(metadata)?;
    Some(iceberg::Error::new(
        iceberg::ErrorKind::FeatureUnsupported,
        format!("{whence}: {fault}"),
    ))
}

/// Iceberg v3 types floe cannot write yet: iceberg-rust 0.10.1, which floe
/// reads and writes table metadata with, has none of them, so a table
/// holding one could not even be loaded.
const NOT_YET: &[&str] = &["variant", "unknown", "geometry", "geography"];

/// The first field of a schema (or nested type) that cannot parse, described.
pub(crate) fn fault(ty: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    let at = |what: String| match path {
        "" => what,
        p => format!("field `{p}`: {what}"),
    };
    match ty {
        Value::String(name) => {
            let known = PRIMITIVES.contains(&name.as_str())
                || name.starts_with("decimal(")
                || name.starts_with("fixed[");
            let base = name.split('(').next().unwrap_or_default();
            if NOT_YET.contains(&base) {
                return Some(at(format!(
                    "type `{base}` (Iceberg v3) is not supported yet: iceberg-rust 0.10.1, \
                     which floe reads table metadata with, has no such type; until it does, \
                     keep such values as text (JSON, WKT) in a `string` column"
                )));
            }
            (!known).then(|| {
                let hint = crate::spelling::closest(name, PRIMITIVES.iter().copied())
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                at(format!("unknown type `{name}`{hint}; types are {}, decimal(P,S), fixed[N], struct, list and map", PRIMITIVES.join(", ")))
            })
        }
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("struct") => {
                let fields = o.get("fields").and_then(Value::as_array)?;
                fields.iter().enumerate().find_map(|(i, f)| {
                    let name = f.get("name").and_then(Value::as_str);
                    let here = match (path, name) {
                        (_, None) => return Some(at(format!("field #{} has no \"name\"", i + 1))),
                        ("", Some(n)) => n.to_string(),
                        (p, Some(n)) => format!("{p}.{n}"),
                    };
                    for key in ["id", "required", "type"] {
                        if f.get(key).is_none() {
                            return Some(format!("field `{here}`: no \"{key}\""));
                        }
                    }
                    fault(&f["type"], &here)
                })
            }
            Some("list") => fault(o.get("element")?, &format!("{path}[]")),
            Some("map") => fault(o.get("key")?, &format!("{path}.key"))
                .or_else(|| fault(o.get("value")?, &format!("{path}.value"))),
            Some(other) => Some(at(format!(
                "unknown nested type `{other}` (struct, list or map)"
            ))),
            None => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_metadata_whose_schema_holds_a_v3_type_says_where() {
        let metadata = serde_json::json!({"format-version": 3, "schemas": [
            {"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"}]},
            {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"},
                {"id": 2, "name": "shape", "required": false, "type": "geometry(srid:4326)"}]}]});
        let fault = metadata_fault(&metadata).unwrap();
        assert!(
            fault.starts_with("schema 1, field `shape`: type `geometry` (Iceberg v3)"),
            "{fault}"
        );
        assert!(!fault.contains("expire_snapshots"), "{fault}");
    }

    /// Another engine dropped the column: only an older schema has the type,
    /// and the way out is to drop that schema.
    #[test]
    fn a_v3_type_only_earlier_schemas_hold_names_the_way_out() {
        let metadata = serde_json::json!({"format-version": 3, "current-schema-id": 1, "schemas": [
            {"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"},
                {"id": 2, "name": "payload", "required": false, "type": "variant"}]},
            {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"}]}]});
        let fault = metadata_fault(&metadata).unwrap();
        assert!(
            fault.starts_with("schema 0, field `payload`: type `variant` (Iceberg v3)"),
            "{fault}"
        );
        assert!(
            fault.contains("not the current one (1)")
                && fault.contains("clean_expired_metadata => true"),
            "{fault}"
        );
    }
}
