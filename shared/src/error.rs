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
    /// State floe keeps is gone (a ledger head deleted by someone else's
    /// cleanup); the work waits, queued, until it is repaired.
    Repair,
    /// The run stopped short: a deadline, a crash injected by a test.
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

/// Why one record was rejected: the one error of the input layer,
/// whichever stage found the fault (opening its envelope, decoding its
/// change, folding its key, shredding its values). The pipeline
/// dead-letters the record with its table, position, field and reason, and
/// writes the rest of its batch.
///
/// `field` is the path of the offending value (`payload.items[3].price`, `tags{"k"}` for a
/// map value), empty when the record as a whole is at fault (not an object, malformed JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.field, .reason))]
pub struct RecordError {
    /// Path of the offending field, empty for the whole record.
    pub field: String,
    /// What is wrong, phrased so a user can fix the producer.
    pub reason: String,
    /// The class of the problem, for callers that route or count rejections by cause.
    pub kind: RecordErrorKind,
}

/// The class of problem that rejected a record (the `reason` text says the specifics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordErrorKind {
    /// Malformed JSON or an empty record: the input is not one JSON value.
    Syntax,
    /// Well-formed JSON the column does not take (wrong JSON type, text not of the column's type).
    TypeMismatch,
    /// Out of the column's range: int/long/float/double, decimal integer digits, dates, times.
    OutOfRange,
    /// More fractional digits than the column keeps (decimal scale, time or timestamp unit).
    Precision,
    /// A required field, or a map entry's key or required value, is absent.
    MissingRequired,
    /// `null` in a required field, list element or map value.
    NullRequired,
    /// A key twice in one object, a repeated map key, or a key naming several fields (any case).
    Duplicate,
    /// A key that matches no field of its struct, under
    /// [`crate::shred::UnknownFields::Reject`].
    UnknownField,
    /// The batch outgrew Arrow's 32-bit offsets: not the record's fault; finish and push it again.
    BatchFull,
    /// Not in the encoding its source declares: not the envelope it says
    /// (SNS, EventBridge, an S3 event), a codec that does not inflate, Avro
    /// that does not decode by its writer's schema.
    Envelope,
    /// Not a change floe reads: an unknown operation, no row image, a
    /// tombstone.
    Change,
}

impl RecordError {
    /// A record rejected for `reason`, at `field` (empty for the whole record).
    pub fn new(kind: RecordErrorKind, field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
            kind,
        }
    }

    /// A record that cannot be opened (see [`RecordErrorKind::Envelope`]).
    pub fn envelope(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(RecordErrorKind::Envelope, field, reason)
    }

    /// A record that is not a change floe reads (see [`RecordErrorKind::Change`]).
    pub fn change(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(RecordErrorKind::Change, field, reason)
    }
}

/// Only another record, or the producer fixed, gets past it.
impl Classify for RecordError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

fn render(field: &str, reason: &str) -> String {
    if field.is_empty() {
        reason.to_string()
    } else {
        format!("field `{field}`: {reason}")
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
