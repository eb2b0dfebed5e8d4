//! Whether trying again can help, for the errors of iceberg-rust that floe's
//! own errors wrap: each error type's `is_transient` defers to this for them.
//! A batch whose error is transient is redelivered; any other is dead-lettered
//! with its reason, since the same input would fail the same way forever (and
//! block its Kinesis shard or Kafka partition until retention).

use iceberg::ErrorKind;

/// True unless iceberg-rust says the input or the feature is at fault
/// (storage and service failures come as `Unexpected`, and may pass).
pub fn iceberg(e: &iceberg::Error) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::DataInvalid | ErrorKind::FeatureUnsupported
    )
}
