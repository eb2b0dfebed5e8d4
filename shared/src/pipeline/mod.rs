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
mod reads;
mod report;
mod scope;
#[cfg(test)]
mod tests;
mod upsert;
pub mod writer;

use crate::catalog::CatalogError;
use crate::commit::CommitError;
use crate::dlq::DlqError;
use crate::error::{Classify, ErrorKind};
use crate::faults::InjectedFault;
use crate::queue::QueueError;
use crate::request::RequestError;
use crate::shred::ShredError;
use crate::write::WriteError;

pub use committer::{CommitReport, Committer, TableCommitReport};
pub use part::infer_options;
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
    /// A setting the step reads (the routing rules) cannot be used.
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
    /// A batch names no table and no routing is configured.
    #[error("config: no target table: give one, or configure [routing]")]
    NoTable,
    /// The schema the batch's new fields need is one Iceberg refuses (a
    /// name that collides is not this: its records are dead-lettered).
    #[error("table {table} batch {batch_id}: evolving the schema: {source}")]
    Evolve {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// Iceberg's refusal.
        source: Box<iceberg::Error>,
    },
    /// A table to create on first write has a definition floe cannot use.
    #[error("table {table}: {source}")]
    TableDef {
        /// The table.
        table: String,
        /// What is wrong: the definition's error, or the schema's.
        source: crate::error::BoxError,
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
    /// Rows a source read into columns ([`crate::source::Reads`]) do not
    /// fit the table, or the table cannot take them as they are.
    #[error("table {table} batch {batch_id}: rows read into columns: {reason}")]
    Reads {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// What does not fit.
        reason: String,
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

/// Writers dead-letter a batch's records, and committers its requests, when
/// the answer is not transient, instead of having them redelivered forever.
impl Classify for PipelineError {
    fn kind(&self) -> ErrorKind {
        match self {
            PipelineError::Catalog(e) => e.kind(),
            PipelineError::Write { source, .. } => source.kind(),
            PipelineError::Commit(e) => e.kind(),
            PipelineError::Queue { source, .. } => source.kind(),
            PipelineError::Shred { source, .. } => source.kind(),
            PipelineError::Request(e) => e.kind(),
            PipelineError::DeadLetter(e) => e.kind(),
            PipelineError::Deadline { .. } | PipelineError::Fault { .. } => ErrorKind::Interrupted,
            PipelineError::Evolve { .. } | PipelineError::Reads { .. } => ErrorKind::Input,
            PipelineError::Config(_) | PipelineError::NoTable | PipelineError::TableDef { .. } => {
                ErrorKind::Config
            }
        }
    }
}
