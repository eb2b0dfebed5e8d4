//! Config values kept in AWS Secrets Manager: a secret key (`catalog.token`,
//! `catalog.client_secret`, `http.token`) may hold a secret's ARN instead of
//! the value, so the value never sits in a Lambda environment or in Terraform
//! state. Resolved once, at start.

use aws_sdk_secretsmanager::error::DisplayErrorContext;

use crate::aws::AwsClients;
use crate::config::{Config, Secret};

/// The prefix that marks a value as a Secrets Manager ARN.
pub const ARN_PREFIX: &str = "arn:aws:secretsmanager:";

/// A secret named by the config could not be read.
#[derive(Debug, thiserror::Error)]
#[error("config key {key}: reading secret {arn}: {message}")]
pub struct SecretError {
    /// The config key holding the ARN.
    pub key: &'static str,
    /// The ARN.
    pub arn: String,
    /// What Secrets Manager said.
    pub message: String,
}

/// Replaces each secret key's ARN by the secret's string value.
pub async fn resolve(config: &mut Config, clients: &AwsClients) -> Result<(), SecretError> {
    let slots: [(&'static str, &mut Option<Secret>); 3] = [
        ("catalog.token", &mut config.catalog.token),
        ("catalog.client_secret", &mut config.catalog.client_secret),
        ("http.token", &mut config.http.token),
    ];
    for (key, slot) in slots {
        let Some(arn) = slot
            .as_ref()
            .map(|s| s.expose().trim())
            .filter(|v| v.starts_with(ARN_PREFIX))
            .map(str::to_string)
        else {
            continue;
        };
        let fail = |message: String| SecretError {
            key,
            arn: arn.clone(),
            message,
        };
        let out = clients
            .secrets
            .get_secret_value()
            .secret_id(&arn)
            .send()
            .await
            .map_err(|e| fail(DisplayErrorContext(&e).to_string()))?;
        let value = out
            .secret_string()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| fail("the secret has no string value".into()))?;
        *slot = Some(Secret::from(value.trim()));
    }
    Ok(())
}
