//! Table names as users type them (`ns.table`, `a.b.table`), validated before
//! they reach a catalog or become part of a storage path.

use iceberg::{NamespaceIdent, TableIdent};

/// Longest namespace level or table name accepted (Glue's limit).
pub const MAX_NAME_LEN: usize = 255;

/// A table name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid table name `{name}`: {reason}")]
pub struct InvalidName {
    /// The name as given.
    pub name: String,
    /// Why it was refused.
    pub reason: String,
}

/// Parses `ns[.ns2...].table` into a table identifier.
pub fn parse_table(name: &str) -> Result<TableIdent, InvalidName> {
    let invalid = |reason: &str| InvalidName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 2 {
        return Err(invalid("expected NAMESPACE.TABLE"));
    }
    for part in &parts {
        validate_part(part).map_err(|r| invalid(&r))?;
    }
    let (table, ns) = parts.split_last().ok_or_else(|| invalid("empty name"))?;
    let ns = NamespaceIdent::from_strs(ns.iter()).map_err(|e| invalid(&e.to_string()))?;
    Ok(TableIdent::new(ns, table.to_string()))
}

/// Renders an identifier as `ns.table`.
pub fn display(ident: &TableIdent) -> String {
    format!("{}.{}", ident.namespace().join("."), ident.name())
}

fn validate_part(part: &str) -> Result<(), String> {
    if part.is_empty() {
        return Err("empty name part".into());
    }
    if part.len() > MAX_NAME_LEN {
        return Err(format!("name part longer than {MAX_NAME_LEN} bytes"));
    }
    if part.len() >= 5 && part[..5].eq_ignore_ascii_case("_floe") {
        // floe keeps a namespace's ledgers in `<namespace>/_floe/`, and a
        // warehouse's keys, checkpoints and dead letters in `_floe/`: a
        // table or namespace of that name would share, and could purge,
        // another table's state.
        return Err("names starting with `_floe` are reserved for floe's own files".into());
    }
    if let Some(c) = part
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "character {c:?} not allowed (use letters, digits, `_` or `-`)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespaced_names() {
        let t = parse_table("bronze.events").unwrap();
        assert_eq!(t.namespace().join("."), "bronze");
        assert_eq!(t.name(), "events");
        assert_eq!(display(&parse_table("a.b.c").unwrap()), "a.b.c");
    }

    #[test]
    fn refuses_traversal_empty_and_long_names() {
        for bad in [
            "events",
            "../x.y",
            "a..b",
            ".t",
            "a.",
            "a/b.c",
            "a.b c",
            "ns._floe",
            "_floe.t",
            "ns._FLOE-ledger",
        ] {
            assert!(parse_table(bad).is_err(), "{bad} accepted");
        }
        let long = format!("ns.{}", "x".repeat(MAX_NAME_LEN + 1));
        assert!(parse_table(&long).unwrap_err().reason.contains("longer"));
    }
}
