//! How floe reaches AWS: one SDK configuration (region, credentials from the
//! standard chain, retries, timeouts, an optional endpoint for moto or MinIO)
//! from which the S3, SQS and Glue clients are all built, so they share one
//! HTTP connector, one credentials cache and one retry policy.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::error::DisplayErrorContext;
use serde::{Deserialize, Serialize};

use crate::error::BoxError;

/// Attempts per AWS call when the settings name none: the SDK's standard retry
/// mode backs off exponentially with jitter on throttling (`SlowDown`) and 5xx.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// How long any AWS call may wait for the first byte of its answer. It
/// bounds a hung connection; an SQS long poll (20 s at most) and an 8 MiB
/// upload part on a slow link both answer well within it.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// One Glue call's attempt: Glue answers in well under a second, so an
/// attempt that takes this long is hung and the SDK tries again.
pub const GLUE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// One Glue call with all its attempts: a catalog that does not answer fails
/// the call (a commit's outcome is then unknown, and re-read) instead of
/// holding the CLI or the function forever.
pub const GLUE_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where and how to reach AWS. Credentials are never part of it: they come from
/// the standard chain (environment, profile, web identity, container, IMDS).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsSettings {
    /// The region; `None` leaves it to the standard chain (`AWS_REGION`, profile).
    pub region: Option<String>,
    /// An endpoint for every service (moto serves S3, SQS and Glue on one port);
    /// `None` uses AWS's own endpoints or `AWS_ENDPOINT_URL`.
    pub endpoint_url: Option<String>,
    /// Address buckets as `endpoint/bucket/key` instead of `bucket.endpoint/key`,
    /// as MinIO and moto need.
    pub force_path_style: bool,
    /// Attempts per call, first included; `0` means [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: u32,
}

impl AwsSettings {
    /// Settings for a local emulator at `endpoint_url`: path-style addressing.
    pub fn local(endpoint_url: &str, region: &str) -> Self {
        Self {
            region: Some(region.to_string()),
            endpoint_url: Some(endpoint_url.to_string()),
            force_path_style: true,
            max_attempts: 0,
        }
    }

    /// Loads the SDK configuration (resolving credentials lazily, on first use).
    pub async fn sdk_config(&self) -> SdkConfig {
        let attempts = if self.max_attempts == 0 {
            DEFAULT_MAX_ATTEMPTS
        } else {
            self.max_attempts
        };
        // A connect timeout turns a dead endpoint into a retryable error
        // quickly, a first-byte timeout a hung one; no overall operation
        // timeout here, since an 8 MiB part on a slow link is fine (Glue's
        // calls get one: `glue_client`).
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .read_timeout(FIRST_BYTE_TIMEOUT)
            .build();
        // rustls on ring: the SDK's default client would link aws-lc as well.
        let https = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(https)
            .retry_config(RetryConfig::standard().with_max_attempts(attempts))
            .timeout_config(timeouts);
        if let Some(region) = &self.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(endpoint) = &self.endpoint_url {
            loader = loader.endpoint_url(endpoint);
        }
        loader.load().await
    }

    /// An S3 client on `sdk`, with these settings' addressing style.
    pub fn s3_client(&self, sdk: &SdkConfig) -> aws_sdk_s3::Client {
        let conf = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(self.force_path_style)
            .build();
        aws_sdk_s3::Client::from_conf(conf)
    }
}

/// A Glue client on `sdk` whose calls, attempts and all, end within
/// [`GLUE_CALL_TIMEOUT`].
pub fn glue_client(sdk: &SdkConfig) -> aws_sdk_glue::Client {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .read_timeout(FIRST_BYTE_TIMEOUT)
        .operation_attempt_timeout(GLUE_ATTEMPT_TIMEOUT)
        .operation_timeout(GLUE_CALL_TIMEOUT)
        .build();
    let conf = aws_sdk_glue::config::Builder::from(sdk)
        .timeout_config(timeouts)
        .build();
    aws_sdk_glue::Client::from_conf(conf)
}

/// Every AWS client floe uses, built from one [`SdkConfig`].
#[derive(Debug, Clone)]
pub struct AwsClients {
    /// The settings they were built from (storage re-creates its client from them
    /// when a serialised FileIO is revived in another process).
    pub settings: AwsSettings,
    /// S3: table data, metadata, claim-check bodies.
    pub s3: aws_sdk_s3::Client,
    /// SQS: the commit queue.
    pub sqs: aws_sdk_sqs::Client,
    /// Glue: the catalog.
    pub glue: aws_sdk_glue::Client,
    /// Secrets Manager: config values given as secret ARNs.
    pub secrets: aws_sdk_secretsmanager::Client,
    /// Kinesis: the HTTP function's buffer of accepted POSTs.
    pub kinesis: aws_sdk_kinesis::Client,
}

impl AwsClients {
    /// Builds the clients from `settings`.
    pub async fn new(settings: AwsSettings) -> Self {
        let sdk = settings.sdk_config().await;
        Self {
            s3: settings.s3_client(&sdk),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            glue: glue_client(&sdk),
            secrets: aws_sdk_secretsmanager::Client::new(&sdk),
            kinesis: aws_sdk_kinesis::Client::new(&sdk),
            settings,
        }
    }
}

/// An AWS SDK error shown with its whole context: the SDK's own `Display`
/// names only its kind ("service error"), the service's answer sits beneath.
#[derive(Debug)]
pub struct AwsError(BoxError);

impl AwsError {
    /// Keeps `e` (an `SdkError` of any operation) as a source.
    pub(crate) fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(e))
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", DisplayErrorContext(&*self.0))
    }
}

impl std::error::Error for AwsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
