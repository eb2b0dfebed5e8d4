//! A setting floe cannot use, whichever layer reads it.

use std::path::PathBuf;

use super::{BoxError, Classify, ErrorKind};

/// A setting floe cannot use: the one error of the settings layer, whether
/// the config file, a `[routing]` rule, an environment variable, a table
/// property or a secret the config names is at fault. Every message names
/// the file, key, variable or property to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{origin}: {}", .source.to_string().trim_end())]
    Syntax {
        /// Where the text came from (`config file floe.toml`, `FLOE_CONFIG_TOML`).
        origin: String,
        /// The parser's error, which shows the line and column.
        source: toml::de::Error,
    },
    /// A key is unknown, missing, of the wrong type or has an unusable value.
    #[error("config key {key}{}: {message}", from_var(var))]
    Key {
        /// The key's path, e.g. `routing.template` or `tables."bronze.events".sort[1]`.
        key: String,
        /// The environment variable that set the key, if one did.
        var: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// An environment variable cannot be used.
    #[error("environment variable {var}: {message}")]
    Env {
        /// The variable.
        var: String,
        /// What is wrong.
        message: String,
    },
    /// A table property has a value floe cannot use.
    #[error("table property {key}={value}: {reason}")]
    Property {
        /// The property.
        key: String,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// A secret the config names by ARN could not be read.
    #[error("config key {key}: reading secret {arn}: {source}")]
    Secret {
        /// The config key holding the ARN.
        key: String,
        /// The ARN.
        arn: String,
        /// What Secrets Manager said.
        source: BoxError,
    },
}

fn from_var(var: &Option<String>) -> String {
    var.as_ref()
        .map(|v| format!(" (from {v})"))
        .unwrap_or_default()
}

/// A setting stays unusable until someone changes it; only a secret
/// Secrets Manager failed to hand over may come with the next try (one
/// without a string value is a [`ConfigError::Key`]).
impl Classify for ConfigError {
    fn kind(&self) -> ErrorKind {
        match self {
            ConfigError::Secret { .. } => ErrorKind::Service,
            _ => ErrorKind::Config,
        }
    }
}
