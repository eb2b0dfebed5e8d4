//! floe's error policy: every error names its [`ErrorKind`], and whether
//! trying again can help is decided here, from the kind, and nowhere else.
//!
//! A batch whose error is transient is redelivered; any other is
//! dead-lettered with its reason, since the same input would fail the same
//! way forever (and block its Kinesis shard or Kafka partition until
//! retention). Each error type says what it is ([`Classify::kind`]); an
//! error that wraps another asks the wrapped one. Errors keep what they wrap
//! as their `source`, and what floe was doing (the table, the batch, the
//! file) in their message, so a log line reads as the whole chain.
//!
//! Two errors are raised alike by every layer, so they live here, below
//! all of them: a record floe cannot use ([`RecordError`], dead-lettered
//! alone while the rest of its batch is written) and a setting floe cannot
//! use ([`ConfigError`]).

mod config;
mod record;

pub use config::ConfigError;
pub use record::{RecordError, RecordErrorKind};

use iceberg::ErrorKind as IcebergKind;

/// An error whose source may be any error type, for the services (SQS,
/// S3, Glue, the schema registry) whose SDKs each have their own.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What kind of failure an error is, in the terms that decide what happens
/// to the work that met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A record, request or change that floe cannot use: the same input
    /// fails the same way.
    Input,
    /// A setting, rule, credential form or table property floe cannot use,
    /// until someone changes it.
    Config,
    /// A table or a feature this build of floe does not support.
    Unsupported,
    /// The table is not as the call needs it: missing, or already there.
    Table,
    /// A file floe keeps (a ledger file) that this build cannot read.
    Damaged,
    /// Storage, a catalog's store, a queue, the network or a database
    /// failed, or refused for now.
    Service,
    /// Another writer moved first, or the answer to a call was lost:
    /// another attempt, against the table as it is then, decides.
    Contention,
    /// State floe relies on is gone (a ledger head another engine's cleanup
    /// deleted, a replication slot Postgres dropped); the work waits,
    /// queued, until it is repaired (`floe ledger repair`, a resync).
    Repair,
    /// The run stopped short: a deadline, a crash injected by a test, a
    /// task that died.
    Interrupted,
}

impl ErrorKind {
    /// True when the same work may succeed if it comes again with nothing
    /// else changed; false when only a change of input, config or table
    /// can fix it.
    pub fn is_transient(self) -> bool {
        match self {
            ErrorKind::Service
            | ErrorKind::Contention
            | ErrorKind::Repair
            | ErrorKind::Interrupted => true,
            ErrorKind::Input
            | ErrorKind::Config
            | ErrorKind::Unsupported
            | ErrorKind::Table
            | ErrorKind::Damaged => false,
        }
    }
}

/// An error that knows its [`ErrorKind`].
pub trait Classify {
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;

    /// True when the same work may succeed if it comes again (see
    /// [`ErrorKind::is_transient`]).
    fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }
}

/// `: source` after an error's context, so its message reads whole wherever
/// it is shown without its chain; nothing when it wraps no error.
pub fn cause(source: &Option<BoxError>) -> String {
    source
        .as_ref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default()
}

/// What a service failed doing, with its own error when there is one: how
/// a queue (SQS, the spool) or a schema registry failure is reported.
#[derive(Debug, thiserror::Error)]
#[error("{context}{}", cause(.source))]
pub struct Failure {
    /// What was being done, and where; for a refusal, the service's answer.
    pub context: String,
    /// The service's own error, when there is one.
    #[source]
    pub source: Option<BoxError>,
}

impl Failure {
    /// Doing `context` failed with the service's error `source`.
    pub fn new(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// Doing `context` failed for the reason it gives, with no error to keep.
    pub fn message(context: impl Into<String>) -> Self {
        Self {
            context: context.into(),
            source: None,
        }
    }
}

/// Reads of iceberg-rust's local file storage that fail on the file system
/// (a directory swapped for a file, a disk gone): it reports them as
/// `DataInvalid` with no source, though they pass once the disk is back.
const LOCAL_READ_FAILURES: [&str; 5] = [
    "Failed to get metadata for ",
    "Failed to read file ",
    "Failed to open file ",
    "Failed to seek to position ",
    "Failed to read ",
];

/// iceberg-rust says when the input or the feature is at fault; storage and
/// service failures come as `Unexpected`.
impl Classify for iceberg::Error {
    fn kind(&self) -> ErrorKind {
        match self.kind() {
            IcebergKind::FeatureUnsupported => ErrorKind::Unsupported,
            IcebergKind::DataInvalid
                if !LOCAL_READ_FAILURES
                    .iter()
                    .any(|p| self.message().starts_with(p)) =>
            {
                ErrorKind::Input
            }
            _ => ErrorKind::Service,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_read_failure_passes_once_the_disk_is_back_bad_data_does_not() {
        let io = iceberg::Error::new(
            IcebergKind::DataInvalid,
            "Failed to read file /w/t/metadata/snap-1.avro: Not a directory (os error 20)",
        );
        assert!(io.is_transient());
        let bad = iceberg::Error::new(IcebergKind::DataInvalid, "cannot cast 'x' to long");
        assert_eq!(Classify::kind(&bad), ErrorKind::Input);
        assert!(!bad.is_transient());
        let unsupported = iceberg::Error::new(IcebergKind::FeatureUnsupported, "v4");
        assert!(!unsupported.is_transient());
        assert!(iceberg::Error::new(IcebergKind::Unexpected, "503").is_transient());
    }
}
