//! Which column metrics a data file's entry keeps: Iceberg's metrics modes
//! (`write.metadata.metrics.*`), as Iceberg Java applies them. Wide tables
//! set `counts` or `none` to keep manifests small; the default,
//! `truncate(16)`, keeps a long string's bounds as a 16-character prefix
//! instead of dropping them.

use std::collections::HashMap;

use iceberg::spec::{Datum, PrimitiveLiteral, PrimitiveType, Schema};

use crate::error::ConfigError;

/// `write.metadata.metrics.default`.
pub const DEFAULT_MODE: &str = "write.metadata.metrics.default";
/// `write.metadata.metrics.column.<column>`, the column by its full name.
pub const COLUMN_MODE: &str = "write.metadata.metrics.column.";
/// `write.metadata.metrics.max-inferred-column-defaults`.
pub const MAX_INFERRED: &str = "write.metadata.metrics.max-inferred-column-defaults";

/// Iceberg's default: columns past the first 100 keep no metrics unless the
/// default mode or the column's own is set.
const DEFAULT_MAX_INFERRED: usize = 100;

/// What a column's entry keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsMode {
    /// Nothing but its size.
    None,
    /// Value, null and NaN counts.
    Counts,
    /// Counts, and bounds of strings (characters) and binary (bytes) cut to
    /// this length: the lower a prefix, the upper a prefix raised just
    /// enough to stay above every value.
    Truncate(usize),
    /// Counts and exact bounds.
    Full,
}

impl MetricsMode {
    fn parse(key: &str, value: &str) -> Result<Self, ConfigError> {
        let v = value.trim().to_ascii_lowercase();
        let truncate = v
            .strip_prefix("truncate(")
            .and_then(|n| n.strip_suffix(')'))
            .map(|n| n.trim().parse::<usize>());
        Ok(match (v.as_str(), truncate) {
            ("none", _) => Self::None,
            ("counts", _) => Self::Counts,
            ("full", _) => Self::Full,
            (_, Some(Ok(n))) if n > 0 => Self::Truncate(n),
            _ => {
                return Err(ConfigError::Property {
                    key: key.into(),
                    value: value.into(),
                    reason: "not a metrics mode (none, counts, truncate(N) with N > 0, full)"
                        .into(),
                });
            }
        })
    }

    /// `bound` as this mode keeps it: `upper` says which side it is.
    pub fn bound(self, bound: Datum, upper: bool) -> Option<Datum> {
        let Self::Truncate(n) = self else {
            return Some(bound);
        };
        match bound.literal() {
            PrimitiveLiteral::String(s) if s.chars().nth(n).is_some() => {
                let prefix: String = s.chars().take(n).collect();
                match upper {
                    false => Some(Datum::string(prefix)),
                    true => raise_chars(&prefix).map(Datum::string),
                }
            }
            PrimitiveLiteral::Binary(b)
                if b.len() > n && *bound.data_type() == PrimitiveType::Binary =>
            {
                match upper {
                    false => Some(Datum::binary(b[..n].to_vec())),
                    true => raise_bytes(&b[..n]).map(Datum::binary),
                }
            }
            _ => Some(bound),
        }
    }
}

/// The smallest string above every string starting with `prefix`: its last
/// character that can be raised, raised, and what follows dropped.
fn raise_chars(prefix: &str) -> Option<String> {
    let chars: Vec<char> = prefix.chars().collect();
    (0..chars.len()).rev().find_map(|i| {
        let next = (chars[i] as u32 + 1..=char::MAX as u32).find_map(char::from_u32)?;
        Some(chars[..i].iter().chain([&next]).collect())
    })
}

/// [`raise_chars`] for bytes.
fn raise_bytes(prefix: &[u8]) -> Option<Vec<u8>> {
    let i = prefix.iter().rposition(|b| *b < u8::MAX)?;
    let mut out = prefix[..=i].to_vec();
    out[i] += 1;
    Some(out)
}

/// A table's metrics settings, resolved per column by [`Self::modes`].
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsConfig {
    default: MetricsMode,
    /// Whether the table sets its default (else it applies to the first
    /// `max_inferred` columns only).
    explicit: bool,
    max_inferred: usize,
    columns: HashMap<String, MetricsMode>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            default: MetricsMode::Truncate(16),
            explicit: false,
            max_inferred: DEFAULT_MAX_INFERRED,
            columns: HashMap::new(),
        }
    }
}

impl MetricsConfig {
    /// Every column's metrics in full: delete files, whose entries readers
    /// and floe's own commit match on.
    pub fn full() -> Self {
        Self {
            default: MetricsMode::Full,
            explicit: true,
            ..Self::default()
        }
    }

    /// Reads the settings from table properties.
    pub fn from_properties(props: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        if let Some(v) = props.get(DEFAULT_MODE) {
            config.default = MetricsMode::parse(DEFAULT_MODE, v)?;
            config.explicit = true;
        }
        if let Some(n) = super::number(props, MAX_INFERRED)? {
            config.max_inferred = n;
        }
        for (key, value) in props {
            if let Some(column) = key.strip_prefix(COLUMN_MODE) {
                let mode = MetricsMode::parse(key, value)?;
                config.columns.insert(column.to_string(), mode);
            }
        }
        Ok(config)
    }

    /// Each leaf field's mode, by id: the column's own, else the default
    /// (an unset default reaches the first `max-inferred-column-defaults`
    /// leaves by field id, and the rest keep none). A column setting
    /// that names no field of `schema` is ignored, as a column dropped since.
    pub fn modes(&self, schema: &Schema) -> HashMap<i32, MetricsMode> {
        let mut ids: Vec<i32> = schema
            .field_id_to_name_map()
            .keys()
            .copied()
            .filter(|id| {
                schema
                    .field_by_id(*id)
                    .is_some_and(|f| f.field_type.is_primitive())
            })
            .collect();
        ids.sort_unstable();
        let mut modes: HashMap<i32, MetricsMode> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let inferred = self.explicit || i < self.max_inferred;
                (
                    *id,
                    if inferred {
                        self.default
                    } else {
                        MetricsMode::None
                    },
                )
            })
            .collect();
        for (column, mode) in &self.columns {
            if let Some(field) = schema.field_by_name(column) {
                modes.insert(field.id, *mode);
            }
        }
        modes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, Type};

    use super::*;
    use crate::write::props;

    #[test]
    fn truncated_bounds_stay_bounds() {
        let t = MetricsMode::Truncate(3);
        let s = |v: &str| Datum::string(v);
        assert_eq!(t.bound(s("abcdef"), false), Some(s("abc")));
        assert_eq!(t.bound(s("abcdef"), true), Some(s("abd")));
        assert_eq!(
            t.bound(s("abc"), true),
            Some(s("abc")),
            "short enough: exact"
        );
        // Characters, not bytes; the highest one carries to the one before.
        assert_eq!(t.bound(s("éé\u{10FFFF}x"), true), Some(s("éê")));
        // Past the surrogates, which are no characters.
        assert_eq!(
            t.bound(s("a\u{D7FF}\u{10FFFF}x"), true),
            Some(s("a\u{E000}"))
        );
        assert_eq!(t.bound(s("\u{10FFFF}\u{10FFFF}\u{10FFFF}x"), true), None);
        let b = |v: &[u8]| Datum::binary(v.to_vec());
        assert_eq!(t.bound(b(&[1, 0xFF, 0xFF, 9]), true), Some(b(&[2])));
        assert_eq!(
            t.bound(b(&[1, 0xFF, 0xFF, 9]), false),
            Some(b(&[1, 0xFF, 0xFF]))
        );
        assert_eq!(t.bound(b(&[0xFF; 4]), true), None);
        // Fixed and other types keep their bounds whole.
        let fixed = Datum::fixed(vec![1, 2, 3, 4]);
        assert_eq!(t.bound(fixed.clone(), true), Some(fixed));
        assert_eq!(t.bound(Datum::long(5), true), Some(Datum::long(5)));
        assert_eq!(
            MetricsMode::Full.bound(s("abcdef"), true),
            Some(s("abcdef"))
        );
    }

    #[test]
    fn modes_follow_the_default_the_column_and_the_inferred_limit() {
        let fields = (1..=4).map(|i| {
            Arc::new(NestedField::optional(
                i,
                format!("c{i}"),
                Type::Primitive(PrimitiveType::String),
            ))
        });
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        let m = MetricsConfig::from_properties(&props(&[
            (MAX_INFERRED, "2"),
            ("write.metadata.metrics.column.c4", "full"),
            ("write.metadata.metrics.column.gone", "counts"),
        ]))
        .unwrap()
        .modes(&schema);
        let t16 = MetricsMode::Truncate(16);
        assert_eq!(
            [m[&1], m[&2], m[&3], m[&4]],
            [t16, t16, MetricsMode::None, MetricsMode::Full]
        );
        let m = MetricsConfig::from_properties(&props(&[
            (MAX_INFERRED, "2"),
            (DEFAULT_MODE, "Counts"),
        ]))
        .unwrap()
        .modes(&schema);
        assert!(m.values().all(|v| *v == MetricsMode::Counts), "{m:?}");
        let e = MetricsConfig::from_properties(&props(&[(DEFAULT_MODE, "truncate(0)")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(DEFAULT_MODE) && e.contains("truncate(N)"), "{e}");
    }
}
