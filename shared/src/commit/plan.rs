//! What commit plans are made of, shared by the engine and its actions:
//! the table an attempt plans against, the action that plans its
//! snapshots, and what a commit did.

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use super::error::CommitError;
use super::{live, locate, rows, snapshot};
use crate::catalog::LoadedTable;
use crate::ident::display;
use crate::ledger::LedgerStore;
use crate::request::CommitRequest;

/// What an action plans against: the table as loaded for this attempt.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    /// The table as loaded.
    pub table: &'a LoadedTable,
    /// Where its files are.
    pub file_io: &'a FileIO,
    /// Ledger files (key files), read through the engine's cache.
    pub ledger: &'a LedgerStore,
    /// What the table's files hold, read through the engine's cache.
    pub locator: &'a locate::Locator,
    /// Each keyed table's live rows, kept between commits.
    pub known: &'a rows::KnownRows,
    /// The table's manifests, read through the engine's cache.
    pub manifests: &'a live::ManifestCache,
}

impl PlanContext<'_> {
    /// The table's metadata.
    pub fn metadata(&self) -> &TableMetadata {
        &self.table.metadata
    }

    /// The table's name, for errors.
    pub fn table_name(&self) -> String {
        display(&self.table.ident)
    }

    /// Wraps an iceberg-rust error met while planning.
    pub fn build_err(&self, source: iceberg::Error) -> CommitError {
        CommitError::Build {
            table: self.table_name(),
            source: Box::new(source),
        }
    }
}

/// What a commit does with the requests not yet in the table: the snapshots to
/// add, in order. Planned anew on every attempt, against the reloaded table.
#[async_trait]
pub trait Action: std::fmt::Debug + Send + Sync {
    /// Plans the snapshots for `requests` on top of the table in `ctx`.
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        requests: &[CommitRequest],
    ) -> Result<Vec<snapshot::SnapshotPlan>, CommitError>;

    /// True for actions whose requests apply per key in source order.
    fn keyed(&self) -> bool {
        false
    }
}

/// What a commit did.
#[derive(Debug, Clone, Default)]
pub struct CommitOutcome {
    /// Batches this call put in the table (some maybe only in part: the rows
    /// of records the table already held were dropped).
    pub committed: Vec<String>,
    /// Batches whose records were all in the table already (redeliveries), skipped.
    pub duplicates: Vec<String>,
    /// Batches that must go to the dead-letter location, with why; never
    /// committed, never retried.
    pub refused: Vec<(String, String)>,
    /// Keyed batches whose every change newer committed changes superseded.
    pub superseded: Vec<String>,
    /// Rows dropped from committed batches because the table held their
    /// records already, or newer changes superseded them.
    pub rows_dropped: u64,
    /// Snapshots added.
    pub snapshot_ids: Vec<i64>,
    /// Records added.
    pub records: u64,
    /// Data files added.
    pub data_files: usize,
    /// Catalog attempts made (1 when nothing conflicted).
    pub attempts: u32,
}

/// Wraps a storage error met while committing to `table`.
pub(super) fn storage_err(table: &str, source: iceberg::Error) -> CommitError {
    CommitError::Storage {
        table: table.to_string(),
        source: Box::new(source),
    }
}

/// Removes files an attempt wrote and will not commit.
pub(super) async fn discard(file_io: &FileIO, paths: &[String]) {
    for p in paths {
        let _ = file_io.delete(p).await;
    }
}
