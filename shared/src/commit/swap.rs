//! The swap stage: a built commit handed to the catalog, and what its
//! answer means. A conflict (another commit landed first) or a lost answer
//! sends the commit round again; files are discarded only when the answer
//! proves the commit did not apply.

use tracing::warn;

use super::build::Built;
use super::error::CommitError;
use super::retry::{Attempt, Driven};
use crate::catalog::{CatalogError, CatalogRef, Committed, LoadedTable};
use crate::error::Classify;

/// What became of one catalog commit: the retry loops decide what next.
pub(super) enum Submitted {
    /// The table points at the new metadata.
    Landed,
    /// Another commit landed first; the files written for this one are gone.
    Conflict(CatalogError),
    /// No answer: it may have landed; its files are kept.
    Ambiguous(CatalogError),
}

/// Hands `built` to the catalog and keeps the files it wrote while they
/// may be referenced: only a commit that did not apply
/// ([`Committed::NotApplied`]: a conflict, a refusal) discards them; an
/// unknown outcome keeps them, since the table (or a commit built on it
/// since) may name them. A landed commit drops the metadata versions it
/// expired. Errors other than a conflict or a lost answer are final.
pub(super) async fn submit(catalog: &CatalogRef, built: Built) -> Result<Submitted, CatalogError> {
    let Built {
        commit,
        written,
        versions,
        ..
    } = built;
    match catalog.commit(commit).await {
        Committed::Landed(_) => {
            forget(catalog, versions).await;
            Ok(Submitted::Landed)
        }
        Committed::NotApplied(e) => {
            written.discard(catalog.file_io()).await;
            match e {
                CatalogError::Conflict { .. } => Ok(Submitted::Conflict(e)),
                e => Err(e),
            }
        }
        Committed::Unknown(e) if e.is_retryable() => Ok(Submitted::Ambiguous(e)),
        Committed::Unknown(e) => {
            warn!(error = %e, "commit outcome unknown; keeping its files");
            Err(e)
        }
    }
}

/// Deletes metadata versions the new metadata's log no longer lists.
pub(super) async fn forget(catalog: &CatalogRef, versions: Vec<String>) {
    for path in versions {
        // An orphan at worst: maintenance removes it later.
        let _ = catalog.file_io().delete(&path).await;
    }
}

/// An attempt failed reading a file of the table it loaded. When the
/// table has moved on since (another writer's commit replaced the ledger
/// head it read, or an expiry removed the manifests of the snapshot it
/// planned on), that is no failure: the next attempt reloads. Otherwise
/// the error stands.
pub(super) async fn retry_if_moved(
    catalog: &CatalogRef,
    base: &LoadedTable,
    e: CommitError,
) -> Result<(), CommitError> {
    if !e.is_transient() {
        return Err(e);
    }
    match catalog.load_table(&base.ident).await {
        Ok(now) if now.metadata_location != base.metadata_location => {
            warn!(error = %e, "the table moved on while this attempt read it; reloading");
            Ok(())
        }
        _ => Err(e),
    }
}

impl Submitted {
    /// The attempt's end: `done` once landed, round again otherwise (the
    /// next load shows whether a lost answer landed).
    pub(super) fn attempt<T>(self, done: T) -> Attempt<T> {
        match self {
            Submitted::Landed => Attempt::Done(done),
            Submitted::Conflict(e) | Submitted::Ambiguous(e) => Attempt::Again(Some(e)),
        }
    }
}

/// `driven`'s outcome, or the error of a commit whose every attempt the
/// policy allowed conflicted or had an unknown outcome.
pub(super) fn finished<T>(table: String, driven: Driven<T>) -> Result<T, CommitError> {
    match driven {
        Driven::Done(done) => Ok(done),
        Driven::Exhausted { attempts, last } => Err(CommitError::Exhausted {
            table,
            attempts,
            last: last.unwrap_or(CatalogError::failed("no attempt made")),
        }),
    }
}
