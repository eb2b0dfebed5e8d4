//! A record floe cannot use, whichever stage found the fault.

use super::{Classify, ErrorKind};

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
