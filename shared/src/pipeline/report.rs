//! What the writer step did with a batch, added up across its tables.

use crate::dlq::Rejected;
use crate::metrics::emf::{Emf, Unit};

/// What the writer step did with a batch.
#[derive(Debug, Clone, Default)]
pub struct WriteReport {
    /// Records written to data files.
    pub records: u64,
    /// Data files written.
    pub files: usize,
    /// Bytes of data files written.
    pub bytes: u64,
    /// Records dead-lettered.
    pub rejected: Vec<Rejected>,
    /// Where they were dead-lettered.
    pub dead_letter_locations: Vec<String>,
    /// Tables created for this batch.
    pub created: Vec<String>,
    /// Schema changes made for this batch.
    pub evolved: Vec<String>,
}

impl WriteReport {
    /// Adds `other`'s records, files and dead letters to this report (one
    /// source batch written as several, like the objects an S3
    /// notification names).
    pub fn add(&mut self, other: WriteReport) {
        self.records += other.records;
        self.files += other.files;
        self.bytes += other.bytes;
        self.rejected.extend(other.rejected);
        self.dead_letter_locations
            .extend(other.dead_letter_locations);
        self.created.extend(other.created);
        self.evolved.extend(other.evolved);
    }

    /// The report's metrics (records, bytes, files, dead-lettered records)
    /// for `function`'s EMF line; callers add what names the batch.
    pub fn emf(&self, function: &str) -> Emf {
        Emf::new()
            .dimension("function", function)
            .metric("records", Unit::Count, self.records as f64)
            .metric("bytes", Unit::Bytes, self.bytes as f64)
            .metric("files", Unit::Count, self.files as f64)
            .metric(
                "dead_lettered_records",
                Unit::Count,
                self.rejected.len() as f64,
            )
    }
}
