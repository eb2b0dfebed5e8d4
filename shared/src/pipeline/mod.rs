//! The two steps of floe, the same code in Lambda and embedded: the writer
//! step (source batch → data files + dead letters → commit request enqueued)
//! and the committer step (commit requests → coalesced snapshots).

pub mod changelog;
mod classify;
pub mod committer;
mod env;
mod evolving;
mod files;
mod group;
mod identity;
pub mod keyed;
mod part;
mod report;
mod scope;
mod upsert;
pub mod writer;

use crate::catalog::CatalogError;
use crate::commit::CommitError;
use crate::dlq::DlqError;
use crate::faults::InjectedFault;
use crate::queue::QueueError;
use crate::request::RequestError;
use crate::shred::ShredError;
use crate::write::WriteError;

pub use committer::{CommitReport, Committer, TableCommitReport};
pub use writer::{WriteReport, Writer, WriterParts};

/// Why a pipeline step failed; the batch must not be acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Writing data files failed.
    #[error("batch {batch_id}: {source}")]
    Write {
        /// The batch.
        batch_id: String,
        /// The error.
        source: WriteError,
    },
    /// The table schema cannot be shredded into.
    #[error("table {table} batch {batch_id}: {source}")]
    Shred {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// The error.
        source: Box<ShredError>,
    },
    /// Dead-lettering rejected records failed.
    #[error(transparent)]
    DeadLetter(#[from] DlqError),
    /// The commit queue failed.
    #[error("table {table} batch {batch_id}: {source}")]
    Queue {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// The error.
        source: QueueError,
    },
    /// A commit request could not be built or read.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The routing rules cannot be used.
    #[error("config: {0}")]
    Routing(#[from] crate::route::RuleError),
    /// A batch names no table and no routing is configured.
    #[error("config: no target table: give one, or configure [routing]")]
    NoTable,
    /// A table to create on first write has a definition floe cannot use.
    #[error("table {table}: {reason}")]
    TableDef {
        /// The table.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// The run's deadline came before this table's commit could start or
    /// finish; its requests go back to the queue and the next run commits
    /// them (trying again helps).
    #[error(
        "table {table}: the committer run's deadline came before its commit {}; its requests go back to the queue for the next run",
        if *started { "finished" } else { "could start" }
    )]
    Deadline {
        /// The table.
        table: String,
        /// Whether its commit had started (it may have landed; the ledger
        /// finds it on redelivery).
        started: bool,
    },
    /// An injected fault fired.
    #[error("table {table} batch {batch_id}: {source}")]
    Fault {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// The fault.
        source: InjectedFault,
    },
}

impl PipelineError {
    /// True when the same batch may succeed if it comes again (storage,
    /// catalog, queue, contention, a deadline, a crash); false when only a
    /// change of config, table or input can fix it. Writers dead-letter a
    /// batch's records, and committers its requests, on a false answer
    /// instead of having them redelivered forever.
    pub fn is_transient(&self) -> bool {
        match self {
            PipelineError::Catalog(e) => e.is_transient(),
            PipelineError::Write { source, .. } => source.is_transient(),
            PipelineError::Commit(e) => e.is_transient(),
            // A queue set up wrongly (a sharded queue asked to receive,
            // too many shards) stays wrong.
            PipelineError::Queue { source, .. } => {
                matches!(source, QueueError::Service(_) | QueueError::Closed)
            }
            PipelineError::DeadLetter(_)
            | PipelineError::Deadline { .. }
            | PipelineError::Fault { .. } => true,
            PipelineError::Shred { .. }
            | PipelineError::Request(_)
            | PipelineError::Routing(_)
            | PipelineError::NoTable
            | PipelineError::TableDef { .. } => false,
        }
    }
}
