//! `[routing]`, the section of the config this module reads.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `[routing]`: which table a record goes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// How the table is chosen.
    pub mode: RoutingMode,
    /// `fixed`: the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// `field`: the top-level record field whose value picks the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `field` / `source`: the table name with placeholders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Patterns a routed table must match; empty allows any valid name.
    pub allow: Vec<String>,
    /// Create missing tables on first write.
    pub create: bool,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            mode: RoutingMode::default(),
            table: None,
            field: None,
            template: None,
            allow: Vec::new(),
            create: true,
        }
    }
}

/// `routing.mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    /// Every record goes to `routing.table`.
    #[default]
    Fixed,
    /// A record field's value fills `{value}` in `routing.template`.
    Field,
    /// The source's name fills the placeholders of `routing.template`.
    Source,
}

impl RoutingMode {
    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Field => "field",
            Self::Source => "source",
        }
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
