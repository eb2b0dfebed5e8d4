//! Config values kept in AWS Secrets Manager: a secret key (`catalog.token`,
//! `catalog.client_secret`, `http.token`) may hold a secret's ARN instead of
//! the value, so the value never sits in a Lambda environment or in Terraform
//! state. Resolved once, at start.

use crate::aws::{AwsClients, AwsError};
use crate::config::{Config, Secret};
use crate::error::ConfigError;

/// Whether `value` is a Secrets Manager secret ARN, in any partition
/// (`arn:aws:…`, `arn:aws-cn:…`, `arn:aws-us-gov:…`).
pub fn is_secret_arn(value: &str) -> bool {
    let mut parts = value.split(':');
    parts.next() == Some("arn")
        && parts.next().is_some_and(|p| p.starts_with("aws"))
        && parts.next() == Some("secretsmanager")
}

/// Replaces each secret key's ARN by the secret's string value.
pub async fn resolve(config: &mut Config, clients: &AwsClients) -> Result<(), ConfigError> {
    let mut slots: Vec<(&'static str, &mut Option<Secret>)> = vec![
        ("catalog.token", &mut config.catalog.token),
        ("catalog.client_secret", &mut config.catalog.client_secret),
        ("http.token", &mut config.http.token),
    ];
    slots.extend(
        config
            .sources
            .values_mut()
            .map(|s| ("sources.*.registry_password", &mut s.registry_password)),
    );
    for (key, slot) in slots {
        let Some(arn) = slot
            .as_ref()
            .map(|s| s.expose().trim())
            .filter(|v| is_secret_arn(v))
            .map(str::to_string)
        else {
            continue;
        };
        let value = read_secret(clients, key, &arn).await?;
        *slot = Some(Secret::from(value.as_str()));
    }
    Ok(())
}

/// The string value of secret `arn`, which config key `key` names, trimmed.
pub async fn read_secret(
    clients: &AwsClients,
    key: &'static str,
    arn: &str,
) -> Result<String, ConfigError> {
    let out = clients
        .secrets
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| ConfigError::Secret {
            key: key.to_string(),
            arn: arn.to_string(),
            source: Box::new(AwsError::new(e)),
        })?;
    out.secret_string()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ConfigError::key(key, format!("secret {arn} has no string value")))
}

#[cfg(test)]
mod tests {
    use super::is_secret_arn;

    #[test]
    fn secret_arns_of_every_partition_and_nothing_else() {
        assert!(is_secret_arn(
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:floe-AbCdEf"
        ));
        assert!(is_secret_arn(
            "arn:aws-cn:secretsmanager:cn-north-1:1:secret:t"
        ));
        assert!(is_secret_arn(
            "arn:aws-us-gov:secretsmanager:us-gov-west-1:1:secret:t"
        ));
        assert!(!is_secret_arn("arn:aws:ssm:eu-west-1:1:parameter/t"));
        assert!(!is_secret_arn("s3cret-token"));
        assert!(!is_secret_arn("arn:aws"));
    }
}
