//! Whether trying again can help, for the errors of iceberg-rust that floe's
//! own errors wrap: each error type's `is_transient` defers to this for them.
//! A batch whose error is transient is redelivered; any other is dead-lettered
//! with its reason, since the same input would fail the same way forever (and
//! block its Kinesis shard or Kafka partition until retention).

use iceberg::ErrorKind;

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

/// True unless iceberg-rust says the input or the feature is at fault
/// (storage and service failures come as `Unexpected`, and may pass).
pub fn iceberg(e: &iceberg::Error) -> bool {
    match e.kind() {
        ErrorKind::FeatureUnsupported => false,
        ErrorKind::DataInvalid => LOCAL_READ_FAILURES
            .iter()
            .any(|p| e.message().starts_with(p)),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_read_failure_passes_once_the_disk_is_back_bad_data_does_not() {
        let io = iceberg::Error::new(
            ErrorKind::DataInvalid,
            "Failed to read file /w/t/metadata/snap-1.avro: Not a directory (os error 20)",
        );
        assert!(iceberg(&io));
        let bad = iceberg::Error::new(ErrorKind::DataInvalid, "cannot cast 'x' to long");
        assert!(!iceberg(&bad));
        let unsupported = iceberg::Error::new(ErrorKind::FeatureUnsupported, "v4");
        assert!(!iceberg(&unsupported));
        assert!(iceberg(&iceberg::Error::new(ErrorKind::Unexpected, "503")));
    }
}
