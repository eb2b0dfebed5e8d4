//! Which table a record goes to, per `[routing]` (see [`crate::config`]).
//!
//! Routed names are built from a template, normalised (lower case; characters
//! of a filled-in value outside `[a-z0-9_-]` become `_`), validated by
//! [`crate::ident::parse_table`] and checked against `routing.allow`. Results
//! are cached per distinct value, so routing a record to a table already seen
//! costs one hash lookup (plus, in `field` mode, the scan of the record).

mod allow;
mod field;
mod settings;
mod template;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use iceberg::TableIdent;

use crate::error::{Classify, ConfigError, ErrorKind};
use crate::ident::{InvalidName, MAX_NAME_LEN, parse_table};
use crate::source::SourceKind;
pub use allow::Allow;
use field::Found;
pub use settings::{RoutingConfig, RoutingMode};
use template::{Placeholder, Template};

/// Where a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceInfo<'a> {
    /// The kind of source.
    pub kind: SourceKind,
    /// Queue, stream, topic, table or file name.
    pub name: &'a str,
}

impl<'a> SourceInfo<'a> {
    /// A source of `kind` named `name`.
    pub fn new(kind: SourceKind, name: &'a str) -> Self {
        Self { kind, name }
    }
}

/// Why a record could not be routed; messages name the field or placeholder and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The record is not a JSON object, so the routing field cannot be read.
    #[error("cannot read routing field `{field}`: record is not a JSON object ({reason})")]
    NotJson {
        /// `routing.field`.
        field: String,
        /// The JSON parser's message.
        reason: String,
    },
    /// The record has no routing field.
    #[error("record has no field `{field}` to route by")]
    MissingField {
        /// `routing.field`.
        field: String,
    },
    /// The routing field is `null`.
    #[error("routing field `{field}` is null")]
    NullField {
        /// `routing.field`.
        field: String,
    },
    /// The routing field holds neither a string nor an integer.
    #[error("routing field `{field}` is {found}, expected a string or an integer")]
    NotScalar {
        /// `routing.field`.
        field: String,
        /// What it holds (`an object`).
        found: &'static str,
    },
    /// A placeholder that needs another kind of source.
    #[error("placeholder {placeholder} needs {needs}, but the record came from {kind} `{name}`")]
    WrongSource {
        /// The placeholder (`{topic}`).
        placeholder: &'static str,
        /// The kinds it accepts (`a Kafka topic`).
        needs: &'static str,
        /// The record's source kind.
        kind: SourceKind,
        /// The record's source name.
        name: String,
    },
    /// The rendered name is not a valid table name.
    #[error("{origin} value {value:?} gives an unusable table name: {error}")]
    InvalidName {
        /// What supplied the value: ``field `type` `` or `placeholder {topic}`.
        origin: String,
        /// The value (shortened when very long).
        value: String,
        /// Why the name was refused.
        error: InvalidName,
    },
    /// The rendered name matches no `routing.allow` pattern.
    #[error("table `{table}` is not allowed by routing.allow ({})", patterns.join(", "))]
    NotAllowed {
        /// The rendered table name.
        table: String,
        /// `routing.allow`.
        patterns: Vec<String>,
    },
}

/// A record that names no usable table is dead-lettered; the rest route.
impl Classify for RouteError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

type Routed = Result<TableIdent, RouteError>;

#[derive(Debug)]
enum Rule {
    Fixed(TableIdent),
    Field { field: String, template: Template },
    Source(Template),
}

/// More distinct values than this means routing by something close to unique
/// (an id); the cache is then dropped and refilled rather than grown without bound.
const CACHE_LIMIT: usize = 4096;

#[derive(Debug, Default)]
struct Cache {
    by_value: HashMap<String, Routed>,
    by_source: HashMap<SourceKind, HashMap<String, Routed>>,
    entries: usize,
}

/// Picks the table of each record; cheap to share between threads.
#[derive(Debug)]
pub struct Router {
    rule: Rule,
    allow: Allow,
    cache: RwLock<Cache>,
}

impl Router {
    /// Builds a router, checking the routing config (errors name `routing.*` keys).
    pub fn new(config: &RoutingConfig) -> Result<Router, ConfigError> {
        let mode = config.mode;
        let unused = |key: &str, value: &Option<String>| match value {
            Some(_) => Err(ConfigError::key(
                format!("routing.{key}"),
                format!(
                    "not used when routing.mode = \"{mode}\"; remove it (an empty FLOE_ROUTING_{} clears it)",
                    key.to_uppercase()
                ),
            )),
            None => Ok(()),
        };
        let required = |key: &str, value: &Option<String>| {
            value
                .clone()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| {
                    ConfigError::key(
                        format!("routing.{key}"),
                        format!(
                            "required when routing.mode = \"{mode}\" (set it in [routing] or FLOE_ROUTING_{})",
                            key.to_uppercase()
                        ),
                    )
                })
        };
        let template = |text: String| {
            Template::parse(&text, mode).map_err(|m| ConfigError::key("routing.template", m))
        };
        let allow = Allow::new(&config.allow, mode)?;
        let rule = match mode {
            RoutingMode::Fixed => {
                unused("field", &config.field)?;
                unused("template", &config.template)?;
                let table = required("table", &config.table)?;
                let ident = parse_table(&table)
                    .map_err(|e| ConfigError::key("routing.table", e.to_string()))?;
                if !allow.allows(&table) {
                    return Err(ConfigError::key(
                        "routing.table",
                        format!(
                            "`{table}` is not allowed by routing.allow ({})",
                            allow.patterns().join(", ")
                        ),
                    ));
                }
                Rule::Fixed(ident)
            }
            RoutingMode::Field => {
                unused("table", &config.table)?;
                let field = required("field", &config.field)?;
                let template = template(required("template", &config.template)?)?;
                Rule::Field { field, template }
            }
            RoutingMode::Source => {
                unused("table", &config.table)?;
                unused("field", &config.field)?;
                Rule::Source(template(required("template", &config.template)?)?)
            }
        };
        Ok(Router {
            rule,
            allow,
            cache: RwLock::new(Cache::default()),
        })
    }

    /// Whether routing reads a record's fields (a `field` rule), so a record
    /// must be JSON to be routed.
    pub fn reads_fields(&self) -> bool {
        matches!(self.rule, Rule::Field { .. })
    }

    /// The table of every record in `fixed` mode, so callers can skip routing.
    pub fn fixed(&self) -> Option<&TableIdent> {
        match &self.rule {
            Rule::Fixed(t) => Some(t),
            _ => None,
        }
    }

    /// The table that `record` (one JSON document) from `source` goes to.
    pub fn route(&self, record: &[u8], source: &SourceInfo<'_>) -> Result<TableIdent, RouteError> {
        match &self.rule {
            Rule::Fixed(table) => Ok(table.clone()),
            Rule::Field { field, template } => {
                let value = field_value(record, field)?;
                if let Some(hit) = self.cached(|c| c.by_value.get(value.as_ref()).cloned()) {
                    return hit;
                }
                let origin = || format!("field `{field}`");
                let routed = self.build(template, &value, origin, |_| Ok(value.as_ref()));
                self.remember(&value, routed, |c, v, r| {
                    c.by_value.insert(v.to_string(), r);
                })
            }
            Rule::Source(template) => {
                let hit = self.cached(|c| {
                    c.by_source
                        .get(&source.kind)
                        .and_then(|m| m.get(source.name))
                        .cloned()
                });
                if let Some(hit) = hit {
                    return hit;
                }
                let origin = || {
                    let hole = template.first_hole().unwrap_or(Placeholder::Source);
                    format!("placeholder {}", hole.as_str())
                };
                let routed = self.build(template, source.name, origin, |hole| {
                    source_name(hole, source)
                });
                self.remember(source.name, routed, |c, v, r| {
                    c.by_source
                        .entry(source.kind)
                        .or_default()
                        .insert(v.to_string(), r);
                })
            }
        }
    }

    fn build<'v>(
        &self,
        template: &Template,
        value: &str,
        origin: impl Fn() -> String,
        fill: impl Fn(Placeholder) -> Result<&'v str, RouteError>,
    ) -> Routed {
        let name = template.render(fill)?;
        let ident = parse_table(&name).map_err(|e| RouteError::InvalidName {
            origin: origin(),
            value: shorten(value),
            error: InvalidName {
                name: shorten(&e.name),
                reason: e.reason,
            },
        })?;
        if !self.allow.allows(&name) {
            return Err(RouteError::NotAllowed {
                table: name,
                patterns: self.allow.patterns().to_vec(),
            });
        }
        Ok(ident)
    }

    fn cached(&self, get: impl FnOnce(&Cache) -> Option<Routed>) -> Option<Routed> {
        // A panic while holding the lock cannot leave a half-made entry (each
        // update is one insert), so a poisoned cache is still good.
        let cache = self.cache.read().unwrap_or_else(PoisonError::into_inner);
        get(&cache)
    }

    fn remember(
        &self,
        value: &str,
        routed: Routed,
        insert: impl FnOnce(&mut Cache, &str, Routed),
    ) -> Routed {
        // A value this long can only give an over-long name; keeping it would
        // let one odd record pin a large string in memory.
        if value.len() <= MAX_NAME_LEN {
            let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
            if cache.entries >= CACHE_LIMIT {
                *cache = Cache::default();
            }
            cache.entries += 1;
            insert(&mut cache, value, routed.clone());
        }
        routed
    }
}

fn field_value<'r>(record: &'r [u8], field: &str) -> Result<Cow<'r, str>, RouteError> {
    let found = field::find(record, field).map_err(|e| RouteError::NotJson {
        field: field.to_string(),
        reason: e.to_string(),
    })?;
    match found {
        Found::Str(s) => Ok(s),
        Found::Int(n) => Ok(Cow::Owned(n.to_string())),
        Found::Missing => Err(RouteError::MissingField {
            field: field.to_string(),
        }),
        Found::Null => Err(RouteError::NullField {
            field: field.to_string(),
        }),
        Found::Other(found) => Err(RouteError::NotScalar {
            field: field.to_string(),
            found,
        }),
    }
}

fn source_name<'s>(hole: Placeholder, source: &SourceInfo<'s>) -> Result<&'s str, RouteError> {
    let needs = match hole {
        Placeholder::Source | Placeholder::Value => return Ok(source.name),
        Placeholder::Topic if source.kind == SourceKind::Kafka => return Ok(source.name),
        Placeholder::Queue if source.kind == SourceKind::Sqs => return Ok(source.name),
        Placeholder::Stream
            if matches!(source.kind, SourceKind::Kinesis | SourceKind::DynamoDb) =>
        {
            return Ok(source.name);
        }
        Placeholder::Topic => "a Kafka topic",
        Placeholder::Queue => "an SQS queue",
        Placeholder::Stream => "a Kinesis or DynamoDB stream",
    };
    Err(RouteError::WrongSource {
        placeholder: hole.as_str(),
        needs,
        kind: source.kind,
        name: shorten(source.name),
    })
}

/// Keeps error messages readable when a value is huge.
fn shorten(s: &str) -> String {
    const KEEP: usize = 64;
    match s.char_indices().nth(KEEP) {
        Some((cut, _)) => format!("{}… ({} bytes)", &s[..cut], s.len()),
        None => s.to_string(),
    }
}
