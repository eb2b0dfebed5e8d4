//! floe's commit engine. iceberg-rust 0.10.1 can only fast-append through its
//! own catalogs, so floe builds manifests, manifest lists and snapshots itself
//! (see [`snapshot`]) and hands the catalog the finished metadata.
//!
//! Every commit is optimistic and idempotent: load the table, ask its ledger
//! which records of each request it already holds (dropping whole requests
//! and, from requests that overlap committed ones, exactly the rows it
//! holds), refuse what no queue message may do (files outside the table,
//! files that are gone), resolve late keyed requests per key, plan, write the
//! new ledger head, commit; on a conflict or an ambiguous answer, reload and
//! do it again, within a bounded number of attempts. Actions (append, row
//! delta, copy-on-write) only plan snapshots; this loop is the same for all.

pub mod append;
mod build;
pub mod copy_on_write;
mod error;
pub mod late;
pub mod lineage;
pub mod live;
pub mod locate;
pub mod mask;
mod plan;
pub mod position_delta;
pub mod read;
pub mod retry;
pub mod room;
pub mod row_delta;
pub mod rows;
pub mod snapshot;
mod swap;
#[cfg(test)]
pub(crate) mod tests;
mod triage;
pub mod trust;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::{FormatVersion, MAIN_BRANCH, Schema, TableMetadata, TableMetadataBuilder};
use iceberg::{TableIdent, TableRequirement};
use tracing::{Instrument as _, info, info_span, warn};

use crate::catalog::{CatalogRef, Committed, LoadedTable, TableCommit};
use crate::clock::now_ms;
use crate::ident::display;
use crate::ledger::{self, Ledger, LedgerError, LedgerStore};
use crate::request::CommitRequest;
pub use build::DELETE_AFTER_COMMIT;
use build::{Built, build};
pub use error::CommitError;
use plan::discard;
pub use plan::{Action, CommitOutcome, PlanContext};
pub use retry::RetryPolicy;
use retry::{Attempt, Plan};
use swap::Submitted;
use triage::{Memory, Stop, Triaged};

/// Commits requests to tables of one catalog.
#[derive(Debug, Clone)]
pub struct CommitEngine {
    catalog: CatalogRef,
    retry: RetryPolicy,
    ledger: Arc<LedgerStore>,
    locator: Arc<locate::Locator>,
    known: Arc<rows::KnownRows>,
    manifests: Arc<live::ManifestCache>,
}

impl CommitEngine {
    /// An engine on this catalog.
    pub fn new(catalog: CatalogRef, retry: RetryPolicy) -> Self {
        let ledger = Arc::new(LedgerStore::new(catalog.file_io().clone()));
        Self {
            catalog,
            retry,
            ledger,
            locator: Arc::default(),
            known: Arc::default(),
            manifests: Arc::default(),
        }
    }

    /// The same caches (ledger files, manifests, file keys) on another catalog: files
    /// never change once written, so what one engine read holds for both.
    pub fn with_catalog(&self, catalog: CatalogRef) -> Self {
        Self {
            catalog,
            ..self.clone()
        }
    }

    /// The planning context of one attempt on `base`.
    pub fn context<'a>(&'a self, base: &'a LoadedTable) -> PlanContext<'a> {
        PlanContext {
            table: base,
            file_io: self.catalog.file_io(),
            ledger: &self.ledger,
            locator: &self.locator,
            known: &self.known,
            manifests: &self.manifests,
        }
    }

    /// The ledger files it reads and writes, cached across commits.
    pub fn ledger_store(&self) -> &Arc<LedgerStore> {
        &self.ledger
    }

    /// The ledger of a table as it is now.
    pub async fn ledger(&self, ident: &TableIdent) -> Result<Ledger, CommitError> {
        let base = self.catalog.load_table(ident).await?;
        Ok(Ledger::open(self.ledger.clone(), &base.metadata).await?)
    }

    /// The catalog it commits to.
    pub fn catalog(&self) -> &CatalogRef {
        &self.catalog
    }

    /// Appends the files of every request in ONE snapshot, exactly once.
    pub async fn append(
        &self,
        ident: &TableIdent,
        requests: Vec<CommitRequest>,
    ) -> Result<CommitOutcome, CommitError> {
        self.commit(ident, requests, &append::Append).await
    }

    /// Commits the requests not yet in the table through `action`, exactly
    /// once: attempts (triage, plan and build, swap, settle) under one
    /// retry loop, each against the table as it is then.
    #[tracing::instrument(skip_all, fields(table = %display(ident), requests = requests.len()))]
    pub async fn commit(
        &self,
        ident: &TableIdent,
        requests: Vec<CommitRequest>,
        action: &dyn Action,
    ) -> Result<CommitOutcome, CommitError> {
        let table = display(ident);
        if let Some(r) = requests.iter().find(|r| &r.table != ident) {
            return Err(CommitError::WrongTable {
                table,
                batch_id: r.batch_id.clone(),
                request_table: display(&r.table),
            });
        }
        let requests = triage::dedup(requests);
        let driven = retry::drive(
            &self.retry,
            &mut Requests {
                engine: self,
                ident,
                requests,
                action,
                memory: Memory::default(),
            },
        )
        .await?;
        swap::finished(table, driven)
    }

    /// One attempt on `base`, from triage to settle.
    async fn attempt(
        &self,
        base: &LoadedTable,
        requests: &[CommitRequest],
        action: &dyn Action,
        memory: &mut Memory,
    ) -> Result<Attempt<CommitOutcome>, Stop> {
        let Some(ledger) = self.open_ledger(base).await? else {
            return Ok(Attempt::Again(None));
        };
        let ctx = self.context(base);
        let Triaged {
            mut fresh,
            mut outcome,
        } = triage::triage(memory, &ctx, &ledger, requests, action.keyed()).await?;
        if action.keyed() {
            fresh = late::apply(&ctx, &ledger, fresh, &mut memory.refused, &mut outcome).await?;
        }
        outcome.refused = memory
            .refused
            .iter()
            .map(|(id, reason)| (id.clone(), reason.clone()))
            .collect();
        if fresh.is_empty() {
            info!(
                duplicates = outcome.duplicates.len(),
                refused = outcome.refused.len(),
                "nothing new to commit"
            );
            return Ok(Attempt::Done(outcome));
        }
        let written: Vec<String> = fresh.iter().flat_map(|r| r.written.clone()).collect();
        let ready: Vec<CommitRequest> = fresh.iter().map(|r| r.request.clone()).collect();
        let (mut built, next) = match self.plan_and_build(&ctx, &ledger, &ready, action).await {
            Ok(planned) => planned,
            Err(e) => {
                discard(ctx.file_io, &written).await;
                return Err(Stop::Reread(e));
            }
        };
        built.written.add(written);
        let snapshot_ids = built.snapshot_ids.clone();
        match swap::submit(&self.catalog, built)
            .await
            .map_err(CommitError::from)?
        {
            Submitted::Landed => {
                let obsolete = fresh.iter().flat_map(|r| &r.obsolete).chain(&next.obsolete);
                self.settle(&mut outcome, &ready, snapshot_ids, obsolete)
                    .await;
                Ok(Attempt::Done(outcome))
            }
            Submitted::Conflict(e) => {
                warn!("commit conflicted; reloading");
                Ok(Attempt::Again(Some(e)))
            }
            Submitted::Ambiguous(e) => {
                // The reload's ledger decides what landed.
                warn!(error = %e, "commit outcome unknown; reloading");
                memory
                    .maybe_landed
                    .extend(ready.iter().map(|r| r.batch_id.clone()));
                Ok(Attempt::Again(Some(e)))
            }
        }
    }

    /// After a landed attempt: deletes the inputs the snapshot made
    /// redundant (a copy-on-write batch's key lists, a masked request's
    /// original files, ledger files the new head no longer names; a failure
    /// only leaves an orphan) and reports what landed.
    async fn settle(
        &self,
        outcome: &mut CommitOutcome,
        ready: &[CommitRequest],
        snapshot_ids: Vec<i64>,
        obsolete: impl Iterator<Item = &String>,
    ) {
        for path in obsolete {
            let _ = self.catalog.file_io().delete(path).await;
        }
        outcome
            .committed
            .extend(ready.iter().map(|r| r.batch_id.clone()));
        outcome.records += ready.iter().map(|r| r.record_count).sum::<u64>();
        outcome.data_files = ready.iter().map(|r| r.data_files.len()).sum();
        outcome.snapshot_ids = snapshot_ids;
        info!(
            batches = outcome.committed.len(),
            records = outcome.records,
            files = outcome.data_files,
            "committed"
        );
    }

    /// The table as loaded once it leaves floe room to commit
    /// ([`room`]): a hold shorter than [`room::MAX_WAIT`] is waited out,
    /// looking again every [`room::RECHECK`].
    async fn load_with_room(&self, ident: &TableIdent) -> Result<LoadedTable, CommitError> {
        loop {
            let base = self.catalog.load_table(ident).await?;
            let now = crate::clock::wall_ms();
            let hold = room::hold(&base.metadata, now).map_err(|e| CommitError::Property {
                table: display(ident),
                source: Box::new(e),
            })?;
            let Some(hold) = hold else {
                return Ok(base);
            };
            let wait = hold.wait(now);
            match hold {
                room::Hold::Paused(until_ms) if wait > room::MAX_WAIT => {
                    return Err(CommitError::Paused {
                        table: display(ident),
                        until_ms,
                    });
                }
                _ => {
                    info!(
                        wait_ms = wait.as_millis() as u64,
                        ?hold,
                        "leaving room for other writers"
                    );
                    tokio::time::sleep(wait.min(room::RECHECK)).await;
                }
            }
        }
    }

    /// The ledger of the table as loaded; `None` when its head is gone
    /// because the table moved on since (plan again on the new state).
    async fn open_ledger(&self, base: &LoadedTable) -> Result<Option<Ledger>, CommitError> {
        match Ledger::open(self.ledger.clone(), &base.metadata).await {
            Ok(ledger) => Ok(Some(ledger)),
            Err(LedgerError::Missing { path }) => {
                let now = self.catalog.load_table(&base.ident).await?;
                if now.metadata_location != base.metadata_location {
                    return Ok(None);
                }
                Err(CommitError::LedgerMissing {
                    table: display(&base.ident),
                    path,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Plans the action's snapshots for `ready`, writes the ledger head that
    /// records them and builds the catalog commit naming it.
    async fn plan_and_build(
        &self,
        ctx: &PlanContext<'_>,
        ledger: &Ledger,
        ready: &[CommitRequest],
        action: &dyn Action,
    ) -> Result<(Built, ledger::Next), CommitError> {
        let mut plans = action.plan(ctx, ready).await?;
        if plans.is_empty() && !self.catalog.swaps_pointer() {
            // A REST catalog checks only requirements, main's snapshot among
            // them: a commit that moved only the ledger property would go
            // unnoticed by a writer planned before it, whose head (lacking
            // its entries) would then replace it. An empty snapshot moves
            // main, so either commit's requirement catches the other.
            plans.push(snapshot::SnapshotPlan {
                operation: iceberg::spec::Operation::Append,
                ..Default::default()
            });
        }
        let refs: Vec<&CommitRequest> = ready.iter().collect();
        let next = ledger.next(&refs, now_ms()).await?;
        let ledger_files = ledger.write(&next).await?;
        for plan in &mut plans {
            plan.properties
                .push((ledger::PROPERTY.to_string(), next.path.clone()));
        }
        let property = HashMap::from([(ledger::PROPERTY.to_string(), next.path.clone())]);
        let table = ctx.table_name();
        match build(ctx.file_io, &table, ctx.table, plans, Some(property)).await {
            Ok(mut built) => {
                built.written.add(ledger_files);
                Ok((built, next))
            }
            Err(e) => {
                discard(ctx.file_io, &ledger_files).await;
                Err(e)
            }
        }
    }

    /// Makes the table's ledger one that outlives expiry, before maintenance
    /// expires anything: a table whose ledger is still in its snapshot
    /// summaries (an earlier build) gets its ledger files, and one another
    /// engine rolled back gets the ledger of its history (a repair), each in
    /// a commit of its own. Other tables are left alone.
    pub async fn adopt_ledger(&self, ident: &TableIdent) -> Result<(), CommitError> {
        let driven = retry::drive(
            &self.retry,
            &mut Adopt {
                engine: self,
                ident,
            },
        )
        .await?;
        // Out of attempts the ledger is still in the summaries: maintenance
        // must not expire them, so this is an error, not "nothing to adopt".
        swap::finished(display(ident), driven)
    }

    /// Rebuilds a table's ledger from the heads the table names that
    /// survive and what its snapshots record, and makes it the table's
    /// ledger in a commit that changes nothing else (see [`ledger::repair`]).
    pub async fn repair_ledger(
        &self,
        ident: &TableIdent,
    ) -> Result<ledger::repair::Rebuilt, CommitError> {
        let table = display(ident);
        let driven = retry::drive(
            &self.retry,
            &mut Repair {
                engine: self,
                ident,
                table: table.clone(),
                lost: Vec::new(),
            },
        )
        .await?;
        swap::finished(table, driven)
    }

    /// Commits an action that takes no requests (maintenance), planning it
    /// again on every attempt; a conflict means a concurrent commit landed,
    /// which the action's new plan must respect or refuse.
    #[tracing::instrument(skip_all, fields(table = %display(ident)))]
    pub async fn rewrite(
        &self,
        ident: &TableIdent,
        action: &dyn Action,
    ) -> Result<Vec<i64>, CommitError> {
        let table = display(ident);
        let driven = retry::drive(
            &self.retry,
            &mut Rewrite {
                engine: self,
                ident,
                table: table.clone(),
                action,
                ours: Vec::new(),
            },
        )
        .await?;
        swap::finished(table, driven)
    }

    /// Makes `evolve`'s schema current, re-deriving it from the table as it is
    /// on every attempt, so writers evolving one table at once converge: a
    /// column another writer added meanwhile is found, not added twice.
    pub async fn update_schema(
        &self,
        ident: &TableIdent,
        evolve: impl Fn(&TableMetadata) -> Option<Schema> + Send + Sync,
    ) -> Result<LoadedTable, CommitError> {
        self.update_metadata(
            ident,
            |m, b| evolve(m).map(|schema| b.add_current_schema(schema)),
            |m| TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: m.current_schema_id(),
            },
        )
        .await
    }

    /// Upgrades the table to format `version` in place (data and manifests
    /// stay as they are; v3 row lineage starts with the next snapshot, which
    /// hands the rows already in the table their ids). Never downgrades.
    pub async fn upgrade_format_version(
        &self,
        ident: &TableIdent,
        version: FormatVersion,
    ) -> Result<LoadedTable, CommitError> {
        self.update_metadata(
            ident,
            |m, b| (m.format_version() < version).then(|| b.upgrade_format_version(version)),
            |m| TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: m.current_snapshot_id(),
            },
        )
        .await
    }

    /// Commits `change` (`None`: nothing to do) to the table as it is on each
    /// attempt, guarded by the table's identity and `requirement`.
    #[tracing::instrument(skip_all, fields(table = %display(ident)))]
    async fn update_metadata(
        &self,
        ident: &TableIdent,
        change: impl Fn(
            &TableMetadata,
            TableMetadataBuilder,
        ) -> Option<iceberg::Result<TableMetadataBuilder>>
        + Send
        + Sync,
        requirement: impl Fn(&TableMetadata) -> TableRequirement + Send + Sync,
    ) -> Result<LoadedTable, CommitError> {
        let table = display(ident);
        let driven = retry::drive(
            &self.retry,
            &mut Metadata {
                engine: self,
                ident,
                table: table.clone(),
                change,
                requirement,
            },
        )
        .await?;
        swap::finished(table, driven)
    }
}

/// Has each of a rewrite's snapshots name the ledger head the table names
/// now, as every commit of records does: a rewrite changes no record, so
/// that head is its ledger too. Without it, another engine's rollback to a
/// compaction whose ancestors expired left no head in main's history, and
/// the ledger rebuilt for it forgot every record the table holds.
fn name_ledger(metadata: &TableMetadata, plans: &mut [snapshot::SnapshotPlan]) {
    let Some(head) = metadata
        .properties()
        .get(ledger::PROPERTY)
        .filter(|_| !ledger::repair::rolled_back(metadata))
    else {
        return;
    };
    for plan in plans {
        plan.properties
            .push((ledger::PROPERTY.to_string(), head.clone()));
    }
}

/// The attempts of [`CommitEngine::commit`]: triage, plan and build, swap and settle; what a lost answer may have landed is remembered for the next triage.
struct Requests<'a> {
    engine: &'a CommitEngine,
    ident: &'a TableIdent,
    requests: Vec<CommitRequest>,
    action: &'a dyn Action,
    memory: Memory,
}

#[async_trait]
impl Plan for Requests<'_> {
    type Done = CommitOutcome;
    type Error = CommitError;

    async fn load(&mut self) -> Result<LoadedTable, CommitError> {
        self.engine.load_with_room(self.ident).await
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        attempt: u32,
    ) -> Result<Attempt<CommitOutcome>, CommitError> {
        let attempted = self
            .engine
            .attempt(&base, &self.requests, self.action, &mut self.memory)
            .instrument(info_span!("attempt", attempt))
            .await;
        match attempted {
            Ok(Attempt::Done(mut outcome)) => {
                outcome.attempts = attempt;
                Ok(Attempt::Done(outcome))
            }
            Ok(again) => Ok(again),
            Err(Stop::Reread(e)) => {
                swap::retry_if_moved(&self.engine.catalog, &base, e).await?;
                Ok(Attempt::Again(None))
            }
            Err(Stop::Fail(e)) => Err(e),
        }
    }
}

/// The attempts of [`CommitEngine::adopt_ledger`]: done once the table names ledger files (or holds no ledger at all).
struct Adopt<'a> {
    engine: &'a CommitEngine,
    ident: &'a TableIdent,
}

#[async_trait]
impl Plan for Adopt<'_> {
    type Done = ();
    type Error = CommitError;

    async fn load(&mut self) -> Result<LoadedTable, CommitError> {
        Ok(self.engine.catalog.load_table(self.ident).await?)
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        _attempt: u32,
    ) -> Result<Attempt<()>, CommitError> {
        if base.metadata.properties().contains_key(ledger::PROPERTY) {
            if ledger::repair::rolled_back(&base.metadata) {
                // Another engine rolled the table back past floe's
                // last commit. Only the undone snapshot, still in the
                // metadata, shows it; expiry is about to remove it,
                // after which the ledger would count the undone
                // records as committed and skip them when they are
                // sent again. Opening it first refuses, as a commit
                // would, where the rebuild would forget what the
                // table holds.
                if self.engine.open_ledger(&base).await?.is_none() {
                    return Ok(Attempt::Again(None));
                }
                self.engine.repair_ledger(self.ident).await?;
            }
            return Ok(Attempt::Done(()));
        }
        let ledger = Ledger::open(self.engine.ledger.clone(), &base.metadata).await?;
        if ledger.head().recent.is_empty() && ledger.head().sources.is_empty() {
            return Ok(Attempt::Done(()));
        }
        let ctx = self.engine.context(&base);
        let (built, _) = self
            .engine
            .plan_and_build(&ctx, &ledger, &[], &append::Append)
            .await?;
        Ok(swap::submit(&self.engine.catalog, built).await?.attempt(()))
    }
}

/// The attempts of [`CommitEngine::repair_ledger`]: the ledger rebuilt from the table as loaded, and a commit naming it; one whose answer was lost landed if the table names its head.
struct Repair<'a> {
    engine: &'a CommitEngine,
    ident: &'a TableIdent,
    table: String,
    /// The heads of attempts whose answer was lost: any may land late.
    lost: Vec<(String, ledger::repair::Rebuilt)>,
}

#[async_trait]
impl Plan for Repair<'_> {
    type Done = ledger::repair::Rebuilt;
    type Error = CommitError;

    async fn load(&mut self) -> Result<LoadedTable, CommitError> {
        Ok(self.engine.catalog.load_table(self.ident).await?)
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        _attempt: u32,
    ) -> Result<Attempt<ledger::repair::Rebuilt>, CommitError> {
        let named = base.metadata.properties().get(ledger::PROPERTY);
        if let Some((_, rebuilt)) = self.lost.iter().find(|(path, _)| Some(path) == named) {
            return Ok(Attempt::Done(rebuilt.clone()));
        }
        let rebuilt = ledger::repair::rebuild(&self.engine.ledger, &base.metadata).await?;
        let path = ledger::repair::head_path(&base.metadata, &rebuilt.head);
        self.engine
            .ledger
            .put_head(&path, Arc::new(rebuilt.head.clone()))
            .await?;
        let property = HashMap::from([(ledger::PROPERTY.to_string(), path.clone())]);
        let file_io = self.engine.catalog.file_io();
        let mut built = build(file_io, &self.table, &base, Vec::new(), Some(property)).await?;
        built.written.add([path.clone()]);
        let submitted = swap::submit(&self.engine.catalog, built).await?;
        if let Submitted::Ambiguous(_) = &submitted {
            self.lost.push((path, rebuilt.clone()));
        }
        Ok(submitted.attempt(rebuilt))
    }
}

/// The attempts of [`CommitEngine::rewrite`]: the action planned again on each; snapshots of an attempt whose answer was lost count as landed once the table holds one.
struct Rewrite<'a> {
    engine: &'a CommitEngine,
    ident: &'a TableIdent,
    table: String,
    action: &'a dyn Action,
    ours: Vec<i64>,
}

#[async_trait]
impl Plan for Rewrite<'_> {
    type Done = Vec<i64>;
    type Error = CommitError;

    async fn load(&mut self) -> Result<LoadedTable, CommitError> {
        self.engine.load_with_room(self.ident).await
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        attempt: u32,
    ) -> Result<Attempt<Vec<i64>>, CommitError> {
        // An earlier attempt's answer was lost, but it landed (other
        // commits may have been built on it since).
        let landed: Vec<i64> = self
            .ours
            .iter()
            .copied()
            .filter(|id| base.metadata.snapshot_by_id(*id).is_some())
            .collect();
        if !landed.is_empty() {
            return Ok(Attempt::Done(landed));
        }
        let ctx = self.engine.context(&base);
        let built = match self.action.plan(&ctx, &[]).await {
            Ok(mut plans) => {
                name_ledger(&base.metadata, &mut plans);
                build(
                    self.engine.catalog.file_io(),
                    &self.table,
                    &base,
                    plans,
                    None,
                )
                .await
            }
            Err(e) => Err(e),
        };
        let built = match built {
            Ok(built) => built,
            Err(e) => {
                swap::retry_if_moved(&self.engine.catalog, &base, e).await?;
                return Ok(Attempt::Again(None));
            }
        };
        let snapshot_ids = built.snapshot_ids.clone();
        Ok(match swap::submit(&self.engine.catalog, built).await? {
            Submitted::Landed => {
                info!(attempt, "rewrite committed");
                Attempt::Done(snapshot_ids)
            }
            Submitted::Conflict(e) => {
                warn!(attempt, "rewrite conflicted; planning again");
                Attempt::Again(Some(e))
            }
            Submitted::Ambiguous(e) => {
                warn!(attempt, error = %e, "rewrite outcome unknown; reloading");
                self.ours.extend(snapshot_ids);
                Attempt::Again(Some(e))
            }
        })
    }
}

/// The attempts of [`CommitEngine::update_metadata`]: the change derived again from the table as loaded, guarded by its requirement.
struct Metadata<'a, C, R> {
    engine: &'a CommitEngine,
    ident: &'a TableIdent,
    table: String,
    change: C,
    requirement: R,
}

#[async_trait]
impl<C, R> Plan for Metadata<'_, C, R>
where
    C: Fn(&TableMetadata, TableMetadataBuilder) -> Option<iceberg::Result<TableMetadataBuilder>>
        + Send
        + Sync,
    R: Fn(&TableMetadata) -> TableRequirement + Send + Sync,
{
    type Done = LoadedTable;
    type Error = CommitError;

    async fn load(&mut self) -> Result<LoadedTable, CommitError> {
        Ok(self.engine.catalog.load_table(self.ident).await?)
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        attempt: u32,
    ) -> Result<Attempt<LoadedTable>, CommitError> {
        let builder = TableMetadataBuilder::new_from_metadata(
            (*base.metadata).clone(),
            Some(base.metadata_location.clone()),
        );
        let Some(builder) = (self.change)(&base.metadata, builder) else {
            return Ok(Attempt::Done(base));
        };
        let result = builder
            .and_then(|b| b.build())
            .map_err(|source| CommitError::Build {
                table: self.table.clone(),
                source: Box::new(source),
            })?;
        let versions = build::expired_versions(&result);
        let commit = TableCommit {
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: base.metadata.uuid(),
                },
                (self.requirement)(&base.metadata),
            ],
            base,
            metadata: result.metadata,
            updates: result.changes,
        };
        match self.engine.catalog.commit(commit).await {
            Committed::Landed(loaded) => {
                swap::forget(&self.engine.catalog, versions).await;
                info!(
                    attempt,
                    schema_id = loaded.metadata.current_schema_id(),
                    format_version = loaded.metadata.format_version() as u8,
                    "table metadata updated"
                );
                Ok(Attempt::Done(loaded))
            }
            // A conflict, or a lost answer: the change is derived again
            // from the table as reloaded, and is nothing if it landed.
            Committed::NotApplied(e) | Committed::Unknown(e) if e.is_retryable() => {
                warn!(attempt, error = %e, "metadata update did not apply; reloading");
                Ok(Attempt::Again(Some(e)))
            }
            Committed::NotApplied(e) | Committed::Unknown(e) => Err(e.into()),
        }
    }
}
