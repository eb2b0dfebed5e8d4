//! Counters the pipeline keeps while it runs: read by the CLI's progress bar
//! and summary, and emitted as metrics by the Lambda functions.

pub mod emf;

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals of one process.
#[derive(Debug, Default)]
pub struct Counters {
    /// Records read from sources.
    pub records_in: AtomicU64,
    /// Input bytes read from sources.
    pub bytes_in: AtomicU64,
    /// Records written to data files.
    pub records_written: AtomicU64,
    /// Records sent to the dead-letter location.
    pub records_rejected: AtomicU64,
    /// Data files written.
    pub data_files: AtomicU64,
    /// Data file bytes written.
    pub data_bytes: AtomicU64,
    /// Commit requests enqueued.
    pub requests: AtomicU64,
    /// Catalog commits made.
    pub commits: AtomicU64,
    /// Snapshots added.
    pub snapshots: AtomicU64,
    /// Batches put in tables.
    pub batches_committed: AtomicU64,
    /// Records put in tables.
    pub records_committed: AtomicU64,
    /// Redelivered batches found already committed.
    pub duplicates: AtomicU64,
    /// Catalog attempts beyond the first (conflicts, unknown outcomes).
    pub commit_retries: AtomicU64,
    /// Commit requests sent to the dead-letter location instead of committed.
    pub requests_dead_lettered: AtomicU64,
    /// Batches (one table's part of one) dead-lettered whole: an error no
    /// retry can cure, such as a table definition floe cannot create.
    pub batches_dead_lettered: AtomicU64,
    /// Rows dropped from committed requests: their records were in the table
    /// already, or newer changes superseded them.
    pub rows_dropped: AtomicU64,
}

impl Counters {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
