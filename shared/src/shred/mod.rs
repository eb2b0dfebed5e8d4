//! Shredding: JSON records into Arrow record batches shaped exactly by an Iceberg schema.
//!
//! Each [`Shredder::push`] parses one JSON object with a hand-written scanner straight into
//! owned column buffers (no intermediate JSON tree); a rejected record is rolled back by
//! truncating every buffer to the previous row count. [`Shredder::finish`] hands the buffers to
//! Arrow without copying.
//!
//! Keys that match no field are skipped, rejected, or skipped and reported by
//! [`Shredder::take_unknown`], as [`ShredOptions::unknown_fields`] says; every rejection carries
//! a [`crate::error::RecordErrorKind`].

mod avro;
mod binary;
mod bitmap;
mod build;
mod column;
mod decimal;
mod error;
mod finish;
mod json;
mod lookup;
mod parse;
mod scalar;
mod temporal;
pub use crate::calendar::{format_date, format_utc_micros, format_utc_millis};
#[cfg(test)]
mod tests;
mod unknown;

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;

pub use error::ShredError;
pub use unknown::{Unknown, UnknownFields};

use crate::error::RecordError;
use column::StructCol;
use json::Cursor;
use parse::{Ctx, Scratch};

/// Unit of plain JSON numbers given for timestamp and time columns.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum EpochUnit {
    /// Seconds since the epoch (or since midnight for `time`).
    #[serde(rename = "s")]
    Seconds,
    /// Milliseconds, the unit of JavaScript's `Date.now()`.
    #[default]
    #[serde(rename = "ms")]
    Milliseconds,
    /// Microseconds.
    #[serde(rename = "us")]
    Microseconds,
    /// Nanoseconds.
    #[serde(rename = "ns")]
    Nanoseconds,
}

/// Options for matching JSON to the table schema.
#[derive(Debug, Clone, Default)]
pub struct ShredOptions {
    /// Match JSON keys to field names ignoring ASCII case (default: exact).
    pub case_insensitive: bool,
    /// Unit of plain JSON numbers given for timestamp / time columns (default: milliseconds).
    pub epoch_unit: EpochUnit,
    /// What to do with keys that match no field (default: ignore them).
    pub unknown_fields: UnknownFields,
    /// Values of another JSON type a column takes anyway (default: none).
    pub coerce: Coercions,
}

/// Opt-in conversions of values whose JSON type the column does not take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coercions {
    /// A string holding a JSON number (`"1009635"`, surrounding spaces
    /// allowed) goes to numeric, date, time and timestamp columns as that
    /// number would; `"true"`/`"false"` to boolean columns.
    pub numeric_strings: bool,
    /// Numbers and booleans go to string columns as their JSON text, and so
    /// do objects and arrays (compact, as sent).
    pub to_string: bool,
}

/// Turns JSON records into Arrow record batches of one Iceberg table schema.
pub struct Shredder {
    schema: SchemaRef,
    root: StructCol,
    rows: usize,
    options: ShredOptions,
    scratch: Scratch,
    /// Registry Avro read straight into the columns.
    avro: avro::State,
}

impl std::fmt::Debug for Shredder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shredder")
            .field("columns", &self.schema.fields().len())
            .field("rows", &self.rows)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Shredder {
    /// Builds a shredder for this Iceberg schema (fails only on a schema it cannot represent).
    pub fn new(schema: &iceberg::spec::Schema, options: ShredOptions) -> Result<Self, ShredError> {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let root = build::struct_col(
            schema.as_struct().fields(),
            arrow.fields(),
            build::At {
                path: "",
                shape: "",
            },
            options.case_insensitive,
        )?;
        Ok(Shredder {
            schema: arrow,
            root,
            rows: 0,
            scratch: Scratch {
                unknown: options.unknown_fields,
                ..Scratch::default()
            },
            options,
            avro: avro::State::default(),
        })
    }

    /// The Arrow schema of the batches it produces: exactly `iceberg::arrow::schema_to_arrow_schema(schema)`.
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends one JSON object. On error nothing of this record stays in the buffers.
    pub fn push(&mut self, record: &[u8]) -> Result<(), RecordError> {
        let mut ctx = Ctx {
            cur: Cursor::new(record),
            scratch: &mut self.scratch,
            epoch: self.options.epoch_unit,
            case_insensitive: self.options.case_insensitive,
            coerce: self.options.coerce,
        };
        match parse::record(&mut ctx, &mut self.root, self.rows) {
            Ok(()) => {
                self.scratch.collector.accept(self.rows);
                self.rows += 1;
                Ok(())
            }
            Err(fail) => {
                self.root.truncate(self.rows);
                self.scratch.collector.reject();
                Err(report(*fail, record))
            }
        }
    }

    /// Takes the unknown keys seen under [`UnknownFields::Collect`] and restarts the numbering.
    ///
    /// Ordinals count pushes since the last `finish` or `take_unknown`, whichever came last, and
    /// `finish` keeps what was collected: take it once per batch, just before or after `finish`.
    pub fn take_unknown(&mut self) -> Unknown {
        self.scratch.collector.take(self.rows)
    }

    /// Records appended since the last finish.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no record was appended since the last finish.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Approximate bytes buffered (for callers that bound memory); walks the columns.
    pub fn buffered_bytes(&self) -> usize {
        self.root.buffered_bytes()
    }

    /// Takes the buffered records as a batch and resets for reuse (keeps allocations where cheap).
    pub fn finish(&mut self) -> Result<RecordBatch, ShredError> {
        let rows = std::mem::take(&mut self.rows);
        // Push ordinals restart with the batch; what was collected waits for `take_unknown`.
        self.scratch.collector.restart();
        let batch = finish::children(&mut self.root).and_then(|columns| {
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            Ok(RecordBatch::try_new_with_options(
                self.schema.clone(),
                columns,
                &options,
            )?)
        });
        if batch.is_err() {
            // Some columns may be taken and others not: drop everything to stay aligned.
            self.root.truncate(0);
        }
        batch
    }
}

/// The error for a failed record; malformed JSON anywhere wins over a type error seen first,
/// so broken input is always reported as such (against the whole record).
#[cold]
fn report(fail: error::Fail, record: &[u8]) -> RecordError {
    if !fail.syntax
        && let Err(syntax) = json::check_syntax(record)
    {
        return syntax.into_record_error();
    }
    fail.into_record_error()
}
