//! `routing.allow`: patterns that routed tables must match.

use iceberg::TableIdent;

use super::RouteError;
use super::settings::{RoutingConfig, RoutingMode};
use crate::error::ConfigError;
use crate::ident::display;

/// The allow-list; empty allows every valid name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    patterns: Vec<String>,
}

impl Allow {
    /// `routing.allow` of `config`, for tables a caller names itself (the
    /// HTTP function's URL path), which no routing rule produced.
    pub fn of(config: &RoutingConfig) -> Result<Allow, ConfigError> {
        Self::new(&config.allow, config.mode)
    }

    /// `Ok` when `ident` matches a pattern (or there are none).
    pub fn check(&self, ident: &TableIdent) -> Result<(), RouteError> {
        let name = display(ident);
        if self.allows(&name) {
            Ok(())
        } else {
            Err(RouteError::NotAllowed {
                table: name,
                patterns: self.patterns.clone(),
            })
        }
    }

    /// Checks each pattern's shape: `NAMESPACE.TABLE` parts of name characters and `*`.
    pub(super) fn new(patterns: &[String], mode: RoutingMode) -> Result<Allow, ConfigError> {
        for (i, pattern) in patterns.iter().enumerate() {
            let bad = |why: &str| {
                ConfigError::key(
                    format!("routing.allow[{i}]"),
                    format!("pattern `{pattern}` {why}"),
                )
            };
            let parts: Vec<&str> = pattern.split('.').collect();
            if parts.len() < 2 {
                return Err(bad("must be NAMESPACE.TABLE, e.g. raw.*"));
            }
            if parts.iter().any(|p| p.is_empty()) {
                return Err(bad("has an empty name part"));
            }
            if let Some(c) = pattern
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '.')))
            {
                return Err(bad(&format!(
                    "has {c:?}; use letters, digits, `_`, `-` and `*`"
                )));
            }
            // Names made from a template are lower-case, so such a pattern
            // would silently never match.
            if mode != RoutingMode::Fixed && pattern.chars().any(|c| c.is_ascii_uppercase()) {
                return Err(bad(
                    "has upper-case letters, but routed names are lower-case",
                ));
            }
        }
        Ok(Allow {
            patterns: patterns.to_vec(),
        })
    }

    /// The patterns as configured.
    pub(super) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `name` (`ns.table`) matches a pattern, or the list is empty.
    pub(super) fn allows(&self, name: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| matches_name(p, name))
    }
}

fn matches_name(pattern: &str, name: &str) -> bool {
    let mut pattern_parts = pattern.split('.');
    let mut name_parts = name.split('.');
    loop {
        match (pattern_parts.next(), name_parts.next()) {
            (None, None) => return true,
            (Some(p), Some(n)) if glob(p.as_bytes(), n.as_bytes()) => {}
            _ => return false,
        }
    }
}

/// `*` matches any run of bytes (possibly empty); everything else itself.
/// Backtracks only to the latest `*`, which is enough for `*`-only globs and
/// keeps matching linear-ish.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(patterns: &[&str]) -> Allow {
        let patterns: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        Allow::new(&patterns, RoutingMode::Field).unwrap()
    }

    #[test]
    fn star_stays_within_one_part() {
        let a = allow(&["raw.*", "bronze.events"]);
        assert!(a.allows("raw.orders"));
        assert!(a.allows("bronze.events"));
        assert!(!a.allows("raw.eu.orders"));
        assert!(!a.allows("bronze.events2"));
        assert!(!a.allows("silver.x"));
        assert!(allow(&["*.*"]).allows("a.b"));
        assert!(!allow(&["*.*"]).allows("a.b.c"));
    }

    #[test]
    fn globs_within_a_part() {
        assert!(glob(b"orders_*_v*", b"orders_eu_v2"));
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"aXbYbZc"));
        assert!(!glob(b"a*b", b"aXbY"));
        assert!(!glob(b"abc", b"ab"));
    }

    #[test]
    fn empty_list_allows_anything() {
        assert!(allow(&[]).allows("any.thing"));
    }

    #[test]
    fn refuses_malformed_patterns_by_index() {
        for (bad, why) in [
            ("raw", "NAMESPACE.TABLE"),
            ("raw..x", "empty name part"),
            ("raw/x.y", "'/'"),
            ("Raw.*", "upper-case"),
        ] {
            let patterns = vec!["ok.*".to_string(), bad.to_string()];
            let e = Allow::new(&patterns, RoutingMode::Source)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("config key routing.allow[1]: "), "{e}");
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(Allow::new(&["Bronze.Events".to_string()], RoutingMode::Fixed).is_ok());
    }
}
