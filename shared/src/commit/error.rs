//! Why a commit fails, and whether committing the same requests again may help.

use crate::catalog::CatalogError;
use crate::error::{Classify, ErrorKind};
use crate::ledger::LedgerError;
use crate::request::RequestError;

/// Why a commit failed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The catalog failed in a way a retry cannot fix.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A request cannot be bound to the table.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Rewriting data files (copy-on-write) failed.
    #[error(transparent)]
    Write(#[from] crate::write::WriteError),
    /// A request names another table than the one committed.
    #[error("commit request {batch_id} is for {request_table}, not {table}")]
    WrongTable {
        /// The table committed.
        table: String,
        /// The request's batch.
        batch_id: String,
        /// The table the request names.
        request_table: String,
    },
    /// The ledger could not be read or written.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The ledger head the table names is gone and the table has not moved
    /// on: until it is rebuilt, nothing can be committed exactly once.
    #[error(
        "table {table}: its ledger head {path} is missing (deleted outside floe?); run `floe ledger repair {table}` to rebuild it from what the table holds; commit requests stay queued until then"
    )]
    LedgerMissing {
        /// The table.
        table: String,
        /// The head it names.
        path: String,
    },
    /// The table holds floe's commits longer than a commit waits
    /// (`floe.commit.paused-until`, for another writer's job); the requests
    /// stay queued and commit once it ends.
    #[error(
        "table {table}: floe's commits are paused until {until_ms} (epoch ms, `floe.commit.paused-until`); commit requests stay queued until then"
    )]
    Paused {
        /// The table.
        table: String,
        /// When commits may go on.
        until_ms: i64,
    },
    /// A table property that decides when floe commits cannot be read.
    #[error("table {table}: {source}")]
    Property {
        /// The table.
        table: String,
        /// What is wrong with it.
        source: Box<crate::error::ConfigError>,
    },
    /// Checking or reading a request's files failed.
    #[error("table {table}: reading the files of a request: {source}")]
    Storage {
        /// The table.
        table: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
    /// Building manifests or metadata failed.
    #[error("table {table}: building the snapshot: {source}")]
    Build {
        /// The table.
        table: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
    /// What the action planned was changed by a concurrent commit in a way
    /// planning again cannot adapt to (another compaction rewrote its
    /// inputs); nothing was committed, and planning anew from the table as
    /// it is now is the way on.
    #[error("table {table}: {reason}; nothing was committed")]
    Superseded {
        /// The table.
        table: String,
        /// What changed.
        reason: String,
    },
    /// Every attempt conflicted or had an unknown outcome.
    #[error(
        "table {table}: gave up after {attempts} attempts ({last}); the requests stay queued and will be retried"
    )]
    Exhausted {
        /// The table.
        table: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: CatalogError,
    },
}

/// Storage, catalog or ledger failures and contention may pass when the
/// same requests are committed again; requests at fault never do.
impl Classify for CommitError {
    fn kind(&self) -> ErrorKind {
        match self {
            CommitError::Catalog(e) => e.kind(),
            CommitError::Request(e) => e.kind(),
            CommitError::WrongTable { .. } => ErrorKind::Input,
            CommitError::Write(e) => e.kind(),
            CommitError::Ledger(e) => e.kind(),
            CommitError::Storage { source, .. } | CommitError::Build { source, .. } => {
                Classify::kind(source.as_ref())
            }
            CommitError::Exhausted { .. } | CommitError::Superseded { .. } => ErrorKind::Contention,
            CommitError::LedgerMissing { .. } => ErrorKind::Repair,
            CommitError::Paused { .. } => ErrorKind::Contention,
            CommitError::Property { .. } => ErrorKind::Config,
        }
    }
}
