//! The single list of config keys. Unknown-key errors, type errors, "did you
//! mean" hints and the parsing of `FLOE_*` overrides all come from it, so a key
//! added here is accepted, checked and overridable everywhere at once.

use toml::{Table, Value};

use super::ConfigError;
use crate::ident::parse_table;
use crate::spelling::closest;

/// How a key's value is checked (and, for env overrides, parsed from text).
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// A non-blank string.
    Text,
    /// `true` / `false`.
    Bool,
    /// An integer within bounds.
    Int { min: i64, max: i64 },
    /// One string out of a fixed set.
    Choice(&'static [&'static str]),
    /// An array of non-blank strings.
    List,
    /// An array of strings, each out of a fixed set.
    Choices(&'static [&'static str]),
    /// A table of string-valued properties; numbers and booleans are accepted
    /// and turned into strings, since Iceberg properties are all strings and
    /// `write.target-file-size-bytes = 134217728` is the natural way to write one.
    Props,
}

/// One key of a section.
#[derive(Debug, Clone, Copy)]
pub(super) struct Key {
    pub name: &'static str,
    pub kind: Kind,
}

const fn key(name: &'static str, kind: Kind) -> Key {
    Key { name, kind }
}

pub(super) const MODES: &[&str] = &["fixed", "field", "source"];
pub(super) const UNKNOWN_FIELDS: &[&str] = &["ignore", "reject"];
pub(super) const EPOCH_UNITS: &[&str] = &["s", "ms", "us", "ns"];
pub(super) const MERGE_STRATEGIES: &[&str] =
    &["merge-on-read", "equality-deletes", "copy-on-write"];
pub(super) const CHANGELOGS: &[&str] = &["off", "beside", "only"];
pub(super) const CATALOG_TYPES: &[&str] = &["sqlite", "glue", "rest"];
pub(super) const ENVELOPES: &[&str] = &[
    "auto",
    "none",
    "sns",
    "eventbridge",
    "s3-notification",
    "cloudwatch-logs",
];
pub(super) const REMOVES: &[&str] = &["skip", "keep"];
pub(super) const COERCIONS: &[&str] = &["numeric_strings", "to_string"];
pub(super) const CHANGE_ORDERS: &[&str] = &["position", "ts_ms"];

const WAREHOUSE: &[Key] = &[key("path", Kind::Text), key("uri", Kind::Text)];
const DEAD_LETTER: &[Key] = &[key("location", Kind::Text)];
const ROUTING: &[Key] = &[
    key("mode", Kind::Choice(MODES)),
    key("table", Kind::Text),
    key("field", Kind::Text),
    key("template", Kind::Text),
    key("allow", Kind::List),
    key("create", Kind::Bool),
];
const DEFAULTS: &[Key] = &[
    key("evolution", Kind::Bool),
    key("unknown_fields", Kind::Choice(UNKNOWN_FIELDS)),
    key("format_version", Kind::Int { min: 1, max: 3 }),
    key("properties", Kind::Props),
    key("infer_timestamps", Kind::Bool),
    // 38 is Iceberg's largest decimal precision, so the largest usable scale.
    key("infer_decimal_scale", Kind::Int { min: 0, max: 38 }),
    key("case_insensitive", Kind::Bool),
    key("epoch_unit", Kind::Choice(EPOCH_UNITS)),
    key("widen_types", Kind::Bool),
    key("relax_required", Kind::Bool),
    key("coerce", Kind::Choices(COERCIONS)),
    key("merge_strategy", Kind::Choice(MERGE_STRATEGIES)),
    key("changelog", Kind::Choice(CHANGELOGS)),
    key("order_changes_by", Kind::Choice(CHANGE_ORDERS)),
];
const AWS: &[Key] = &[
    key("region", Kind::Text),
    key("endpoint", Kind::Text),
    key("path_style", Kind::Bool),
];
pub(super) const SIGV4_SERVICES: &[&str] = &["glue", "s3tables"];
const CATALOG: &[Key] = &[
    key("type", Kind::Choice(CATALOG_TYPES)),
    key("catalog_id", Kind::Text),
    key("uri", Kind::Text),
    key("prefix", Kind::Text),
    key("token", Kind::Text),
    key("client_id", Kind::Text),
    key("client_secret", Kind::Text),
    key("oauth2_server_uri", Kind::Text),
    key("scope", Kind::Text),
    key("sigv4_service", Kind::Choice(SIGV4_SERVICES)),
    key("path", Kind::Text),
];
// SQS keeps messages 60 s to 14 days.
const RETENTION: Kind = Kind::Int {
    min: 60,
    max: 1_209_600,
};
const QUEUE: &[Key] = &[
    key("url", Kind::Text),
    key("urls", Kind::List),
    key("claim_prefix", Kind::Text),
    key("retention_seconds", RETENTION),
    key("dlq_retention_seconds", RETENTION),
    key("table_concurrency", Kind::Int { min: 1, max: 256 }),
];
const HTTP: &[Key] = &[
    key("token", Kind::Text),
    // A Lambda request payload is at most 6 MB, so a larger limit could never apply.
    key(
        "max_body_bytes",
        Kind::Int {
            min: 1,
            max: 6_291_456,
        },
    ),
    // API Gateway's HTTP APIs give up on an integration after 30 s.
    key("wait_seconds", Kind::Int { min: 0, max: 29 }),
    key(
        "max_record_bytes",
        Kind::Int {
            min: 1,
            max: 6_291_456,
        },
    ),
    key(
        "max_new_columns",
        Kind::Int {
            min: 0,
            max: 10_000,
        },
    ),
    key("redact_values", Kind::Bool),
    key("create_tables", Kind::Bool),
    key("buffer_stream", Kind::Text),
    // Lambda's Kinesis batching window is at most 300 s; `floe serve` keeps to it.
    key(
        "buffer_window_ms",
        Kind::Int {
            min: 0,
            max: 300_000,
        },
    ),
];
const MAINTENANCE: &[Key] = &[
    key("tables", Kind::List),
    // Up to a year; the floor is checked against the queue's retention.
    key(
        "orphan_window_seconds",
        Kind::Int {
            min: 60,
            max: 31_536_000,
        },
    ),
];
const POSTGRES: &[Key] = &[
    key("conninfo", Kind::Text),
    key("secret", Kind::Text),
    key("slot", Kind::Text),
    key("publication", Kind::Text),
    key("tables", Kind::List),
    key("namespace", Kind::Text),
    key(
        "chunk_rows",
        Kind::Int {
            min: 1,
            max: 10_000_000,
        },
    ),
    key(
        "max_changes",
        Kind::Int {
            min: 1,
            max: 10_000_000,
        },
    ),
    key("peek", Kind::Bool),
    // A Lambda runs 15 minutes at most; the CLI may run a day.
    key(
        "max_seconds",
        Kind::Int {
            min: 1,
            max: 86_400,
        },
    ),
];
/// `[sources."name"]`: how one source's records are opened.
const SOURCE: &[Key] = &[
    key("envelope", Kind::Choice(ENVELOPES)),
    key("registry", Kind::Text),
    key("registry_username", Kind::Text),
    key("registry_password", Kind::Text),
    key("removes", Kind::Choice(REMOVES)),
    key("metadata", Kind::Bool),
];
const TABLE_ONLY: &[Key] = &[
    key("schema", Kind::Text),
    key("partition", Kind::List),
    key("sort", Kind::List),
    key("identifier_fields", Kind::List),
];

/// Sections whose keys can be overridden from the environment, in file order.
pub(super) const SECTIONS: &[(&str, &[Key])] = &[
    ("warehouse", WAREHOUSE),
    ("dead_letter", DEAD_LETTER),
    ("routing", ROUTING),
    ("defaults", DEFAULTS),
    ("aws", AWS),
    ("catalog", CATALOG),
    ("queue", QUEUE),
    ("http", HTTP),
    ("maintenance", MAINTENANCE),
    ("postgres", POSTGRES),
];

/// The section of per-table overrides.
pub(super) const TABLES: &str = "tables";
/// The section of per-source settings.
pub(super) const SOURCES: &str = "sources";

fn table_keys() -> impl Iterator<Item = &'static Key> + Clone {
    DEFAULTS.iter().chain(TABLE_ONLY)
}

fn find_table_key(name: &str) -> Option<&'static Key> {
    table_keys().find(|k| k.name == name)
}

/// `parent.key`, quoting `key` the way TOML would need it (`tables."a.b"`).
pub(super) fn join(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let key = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key: key.into(),
        var: None,
        message: message.into(),
    }
}

/// Checks every key and value of a parsed file (after env overrides), and turns
/// property values into strings so the typed structs can stay `String` maps.
pub(super) fn check(root: &mut Table) -> Result<(), ConfigError> {
    for (name, value) in root.iter_mut() {
        if let Some((_, keys)) = SECTIONS.iter().find(|(s, _)| s == name) {
            let table = as_section(name, value)?;
            check_keys(name, table, keys.iter())?;
        } else if name == TABLES {
            for (table_name, section) in as_section(name, value)?.iter_mut() {
                check_table_section(table_name, section)?;
            }
        } else if name == SOURCES {
            for (source, section) in as_section(name, value)?.iter_mut() {
                let path = join(SOURCES, source);
                let table = as_section(&path, section)?;
                check_keys(&path, table, SOURCE.iter())?;
            }
        } else {
            let known = SECTIONS.iter().map(|(s, _)| *s).chain([TABLES, SOURCES]);
            return Err(invalid(
                join("", name),
                unknown_message(
                    "section",
                    name,
                    known,
                    "warehouse, dead_letter, routing, defaults, aws, catalog, queue, http, maintenance, postgres, tables or sources",
                ),
            ));
        }
    }
    Ok(())
}

fn as_section<'a>(path: &str, value: &'a mut Value) -> Result<&'a mut Table, ConfigError> {
    let found = type_name(value);
    value
        .as_table_mut()
        .ok_or_else(|| invalid(path, format!("expected a table ([{path}]), got {found}")))
}

fn check_table_section(name: &str, section: &mut Value) -> Result<(), ConfigError> {
    let path = join(TABLES, name);
    if let Err(e) = parse_table(name) {
        // `[tables.bronze.events]` without quotes nests tables; say how to write it.
        let nested = section.as_table().and_then(|t| {
            t.iter()
                .find(|(k, v)| v.is_table() && find_table_key(k).is_none())
        });
        let hint = match nested {
            Some((sub, _)) => format!(" (quote names with dots: [tables.\"{name}.{sub}\"])"),
            None => String::new(),
        };
        return Err(invalid(path, format!("{e}{hint}")));
    }
    let table = as_section(&path, section)?;
    check_keys(&path, table, table_keys())
}

fn check_keys<'k>(
    path: &str,
    table: &mut Table,
    keys: impl Iterator<Item = &'k Key> + Clone,
) -> Result<(), ConfigError> {
    for (name, value) in table.iter_mut() {
        let at = join(path, name);
        match keys.clone().find(|k| k.name == name) {
            Some(k) => check_value(&at, k.kind, value)?,
            None => {
                let list: Vec<&str> = keys.clone().map(|k| k.name).collect();
                let names = list.join(", ");
                return Err(invalid(
                    at,
                    unknown_message("key", name, list.iter().copied(), &names),
                ));
            }
        }
    }
    Ok(())
}

fn unknown_message<'a>(
    what: &str,
    name: &str,
    known: impl Iterator<Item = &'a str> + Clone,
    listing: &str,
) -> String {
    match closest(name, known) {
        Some(best) => format!("unknown {what} (did you mean {best}?)"),
        None => format!("unknown {what} (expected {listing})"),
    }
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

fn check_text(at: &str, value: &Value) -> Result<(), ConfigError> {
    match value.as_str() {
        Some(s) if s.trim().is_empty() => Err(invalid(at, "must not be empty")),
        Some(_) => Ok(()),
        None => Err(invalid(
            at,
            format!("expected a string, got {}", type_name(value)),
        )),
    }
}

fn check_value(at: &str, kind: Kind, value: &mut Value) -> Result<(), ConfigError> {
    match kind {
        Kind::Text => check_text(at, value),
        Kind::Bool => match value {
            Value::Boolean(_) => Ok(()),
            other => Err(invalid(
                at,
                format!("expected true or false, got {}", type_name(other)),
            )),
        },
        Kind::Int { min, max } => match value {
            Value::Integer(n) if (min..=max).contains(n) => Ok(()),
            Value::Integer(n) => Err(invalid(
                at,
                format!("must be between {min} and {max}, got {n}"),
            )),
            other => Err(invalid(
                at,
                format!("expected an integer, got {}", type_name(other)),
            )),
        },
        Kind::Choice(choices) => match value.as_str() {
            Some(s) if choices.contains(&s) => Ok(()),
            Some(s) => Err(invalid(
                at,
                format!("unknown value {s:?} (use {})", or_list(choices)),
            )),
            None => Err(invalid(
                at,
                format!(
                    "expected one of {}, got {}",
                    or_list(choices),
                    type_name(value)
                ),
            )),
        },
        Kind::List => match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| check_text(&format!("{at}[{i}]"), item)),
            other => Err(invalid(
                at,
                format!("expected an array of strings, got {}", type_name(other)),
            )),
        },
        Kind::Choices(choices) => {
            check_value(at, Kind::List, value)?;
            let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                let at = format!("{at}[{i}]");
                check_value(&at, Kind::Choice(choices), &mut item.clone())?;
            }
            Ok(())
        }
        Kind::Props => check_props(at, value),
    }
}

/// A table of properties: names not empty, and every value a string (a
/// number or boolean is written as one), as Iceberg keeps properties.
fn check_props(at: &str, value: &mut Value) -> Result<(), ConfigError> {
    let found = type_name(value);
    let table = value.as_table_mut().ok_or_else(|| {
        invalid(
            at,
            format!("expected a table of properties ({{ \"key\" = \"value\" }}), got {found}"),
        )
    })?;
    for (name, v) in table.iter_mut() {
        let prop = join(at, name);
        if name.trim().is_empty() {
            return Err(invalid(prop, "property name must not be empty"));
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Integer(n) => n.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Boolean(b) => b.to_string(),
            other => {
                return Err(invalid(
                    prop,
                    format!(
                        "expected a string, number or boolean, got {}",
                        type_name(other)
                    ),
                ));
            }
        };
        *v = Value::String(text);
    }
    Ok(())
}

/// `a, b or c`.
pub(super) fn or_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// The environment variable that overrides `section.key`.
pub(super) fn env_var(section: &str, key: &str) -> String {
    format!("FLOE_{}_{}", section.to_uppercase(), key.to_uppercase())
}

/// Parses an override's text as the key's kind. `Err` is the reason, for an
/// error that names the variable.
pub(super) fn parse_env(kind: Kind, text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    match kind {
        Kind::Text | Kind::Choice(_) => Ok(Value::String(trimmed.to_string())),
        Kind::Bool => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(Value::Boolean(true)),
            "false" | "0" | "no" => Ok(Value::Boolean(false)),
            _ => Err(format!("expected true or false, got {trimmed:?}")),
        },
        Kind::Int { .. } => trimmed
            .parse::<i64>()
            .map(Value::Integer)
            .map_err(|_| format!("expected an integer, got {trimmed:?}")),
        Kind::List | Kind::Choices(_) => Ok(Value::Array(
            trimmed
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
        Kind::Props => {
            let mut table = Table::new();
            for item in trimmed.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (k, v) = item
                    .split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .ok_or_else(|| format!("expected KEY=VALUE[,KEY=VALUE...], got {item:?}"))?;
                table.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
            }
            Ok(Value::Table(table))
        }
    }
}

/// Refuses `FLOE_ROUTING_TEMPALTE` and the like: a mistyped override would
/// otherwise be ignored without a word.
pub(super) fn check_env_names(names: impl Iterator<Item = String>) -> Result<(), ConfigError> {
    for name in names {
        for (section, keys) in SECTIONS {
            let prefix = format!("FLOE_{}_", section.to_uppercase());
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            if keys.iter().any(|k| k.name.to_uppercase() == rest) {
                continue;
            }
            let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
            let typed = rest.to_ascii_lowercase();
            let hint = match closest(&typed, names.iter().copied()) {
                Some(best) => format!("did you mean {}?", env_var(section, best)),
                None => format!("{section} keys are {}", or_list(&names)),
            };
            return Err(ConfigError::Env {
                var: name.clone(),
                message: format!("not a config key ({hint})"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_quotes_key_paths() {
        assert_eq!(join("", "routing"), "routing");
        assert_eq!(join("routing", "mode"), "routing.mode");
        assert_eq!(join("tables", "bronze.events"), "tables.\"bronze.events\"");
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }
}
