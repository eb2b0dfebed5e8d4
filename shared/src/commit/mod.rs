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
pub mod copy_on_write;
pub mod late;
pub mod lineage;
pub mod live;
pub mod locate;
pub mod mask;
pub mod position_delta;
pub mod read;
pub mod retry;
pub mod row_delta;
pub mod snapshot;
pub mod trust;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, MAIN_BRANCH, Schema, TableMetadata, TableMetadataBuilder};
use iceberg::{TableIdent, TableRequirement};
use tracing::{info, warn};

use crate::catalog::{CatalogError, CatalogRef, LoadedTable, TableCommit};
use crate::clock::now_ms;
use crate::ident::display;
use crate::ledger::{self, Ledger, LedgerError, LedgerStore};
use crate::request::{CommitRequest, RequestError};
use late::Late;
use retry::Attempts;
pub use retry::RetryPolicy;
use snapshot::SnapshotProducer;

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

impl CommitError {
    /// True when committing the same requests again may succeed (storage,
    /// catalog or ledger failures, contention); false when the requests or
    /// the table are at fault.
    pub fn is_transient(&self) -> bool {
        match self {
            CommitError::Catalog(e) => e.is_transient(),
            CommitError::Request(_) | CommitError::WrongTable { .. } => false,
            CommitError::Write(e) => e.is_transient(),
            CommitError::Ledger(e) => e.is_transient(),
            CommitError::Storage { source, .. } | CommitError::Build { source, .. } => {
                crate::transient::iceberg(source)
            }
            CommitError::Exhausted { .. }
            | CommitError::LedgerMissing { .. }
            | CommitError::Superseded { .. } => true,
        }
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

/// Commits requests to tables of one catalog.
#[derive(Debug, Clone)]
pub struct CommitEngine {
    catalog: CatalogRef,
    retry: RetryPolicy,
    ledger: Arc<LedgerStore>,
    locator: Arc<locate::Locator>,
}

/// A request as one attempt will commit it.
struct Ready {
    request: CommitRequest,
    /// Which of its records the table already accounts for.
    claims: ledger::Claims,
    written: Vec<String>,
    obsolete: Vec<String>,
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
        }
    }

    /// The same caches (ledger files, file keys) on another catalog: files
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

    /// Commits the requests not yet in the table through `action`, exactly once.
    #[tracing::instrument(skip_all, fields(table = %display(ident), requests = requests.len()))]
    pub async fn commit(
        &self,
        ident: &TableIdent,
        requests: Vec<CommitRequest>,
        action: &dyn Action,
    ) -> Result<CommitOutcome, CommitError> {
        let table = display(ident);
        for r in &requests {
            if &r.table != ident {
                return Err(CommitError::WrongTable {
                    table,
                    batch_id: r.batch_id.clone(),
                    request_table: display(&r.table),
                });
            }
        }
        let requests = dedup(requests);
        let mut outcome = CommitOutcome::default();
        let mut attempts = Attempts::new(&self.retry);
        let mut last_err = None;
        let mut maybe_landed: HashSet<String> = HashSet::new();
        // A refusal is final: a request that named files outside its table,
        // or files that are gone, is not looked at again.
        let mut refused: HashMap<String, String> = HashMap::new();
        let mut trusted: HashSet<String> = HashSet::new();
        'attempt: while let Some(attempt) = attempts.next().await {
            outcome.attempts = attempt;
            let base = self.catalog.load_table(ident).await?;
            attempts.adopt(&base.metadata);
            let Some(ledger) = self.open_ledger(&base).await? else {
                continue;
            };
            let ctx = self.context(&base);
            outcome.duplicates = Vec::new();
            outcome.superseded = Vec::new();
            outcome.rows_dropped = 0;
            let mut fresh: Vec<Ready> = Vec::new();
            let mut taken = ledger::Taken::default();
            for r in &requests {
                if refused.contains_key(&r.batch_id) {
                    continue;
                }
                let claims = match held(&ledger, r, &taken).await {
                    Ok(claims) => claims,
                    Err(e) => {
                        self.retry_if_moved(&base, e).await?;
                        continue 'attempt;
                    }
                };
                let Some(claims) = claims else {
                    // A batch of our own attempt whose answer was lost counts as ours.
                    if maybe_landed.contains(&r.batch_id) {
                        outcome.committed.push(r.batch_id.clone());
                        outcome.records += r.record_count;
                    } else {
                        outcome.duplicates.push(r.batch_id.clone());
                    }
                    continue;
                };
                if !trusted.contains(&r.batch_id) {
                    let check = trust::check(ctx.file_io, &base.metadata, r)
                        .await
                        .map_err(|e| storage_err(&table, e))?;
                    if let Some(reason) = check {
                        warn!(batch_id = %r.batch_id, %reason, "commit request refused");
                        refused.insert(r.batch_id.clone(), reason);
                        continue;
                    }
                    trusted.insert(r.batch_id.clone());
                }
                // Keyed requests are masked per key instead (late::resolve).
                if claims.is_empty() || action.keyed() {
                    taken.take(r);
                    fresh.push(Ready::of(r, claims));
                    continue;
                }
                match mask::drop_claimed(&ctx, r, &claims).await? {
                    Ok(m) => {
                        taken.take(r);
                        info!(batch_id = %r.batch_id, dropped = m.dropped, "request overlaps records the table holds; committing the rest");
                        outcome.rows_dropped += m.dropped;
                        fresh.push(Ready {
                            request: m.request,
                            claims,
                            written: m.written,
                            obsolete: m.obsolete,
                        });
                    }
                    Err(reason) => {
                        refused.insert(r.batch_id.clone(), reason);
                    }
                }
            }
            if action.keyed() {
                fresh = self
                    .resolve_late(&ctx, &ledger, fresh, &mut refused, &mut outcome)
                    .await?;
            }
            outcome.refused = refused
                .iter()
                .map(|(id, reason)| (id.clone(), reason.clone()))
                .collect();
            if fresh.is_empty() {
                info!(
                    duplicates = outcome.duplicates.len(),
                    refused = outcome.refused.len(),
                    "nothing new to commit"
                );
                return Ok(outcome);
            }
            let mut written: Vec<String> = fresh.iter().flat_map(|r| r.written.clone()).collect();
            let mut obsolete: Vec<String> = fresh.iter().flat_map(|r| r.obsolete.clone()).collect();
            let ready: Vec<CommitRequest> = fresh.iter().map(|r| r.request.clone()).collect();
            let planned = self
                .plan_and_build(&table, &ctx, &ledger, &ready, action)
                .await;
            let (commit, files, snapshot_ids, versions, next) = match planned {
                Ok(built) => built,
                Err(e) => {
                    discard(ctx.file_io, &written).await;
                    self.retry_if_moved(&base, e).await?;
                    continue;
                }
            };
            let data_files: usize = ready.iter().map(|r| r.data_files.len()).sum();
            let mut files = files;
            files.add(written.drain(..));
            match self.submit(commit, files, versions).await? {
                Submitted::Landed => {
                    // Inputs the snapshot made redundant (a copy-on-write
                    // batch's key lists, a masked request's original files,
                    // ledger files the new head no longer names); a failure
                    // here only leaves an orphan.
                    obsolete.extend(next.obsolete.iter().cloned());
                    for path in &obsolete {
                        let _ = self.catalog.file_io().delete(path).await;
                    }
                    outcome
                        .committed
                        .extend(ready.iter().map(|r| r.batch_id.clone()));
                    outcome.records += ready.iter().map(|r| r.record_count).sum::<u64>();
                    outcome.data_files = data_files;
                    outcome.snapshot_ids = snapshot_ids;
                    info!(
                        batches = outcome.committed.len(),
                        records = outcome.records,
                        files = data_files,
                        attempt,
                        "committed"
                    );
                    return Ok(outcome);
                }
                Submitted::Conflict(e) => {
                    warn!(attempt, "commit conflicted; reloading");
                    last_err = Some(e);
                }
                Submitted::Ambiguous(e) => {
                    // The reload's ledger decides what landed.
                    warn!(attempt, error = %e, "commit outcome unknown; reloading");
                    maybe_landed.extend(ready.iter().map(|r| r.batch_id.clone()));
                    last_err = Some(e);
                }
            }
        }
        Err(exhausted(table, &attempts, last_err))
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

    /// Keyed requests applied per key: what newer committed changes (or
    /// requests of this commit that go first) superseded is dropped, what
    /// cannot be applied safely is refused.
    async fn resolve_late(
        &self,
        ctx: &PlanContext<'_>,
        ledger: &Ledger,
        mut fresh: Vec<Ready>,
        refused: &mut HashMap<String, String>,
        outcome: &mut CommitOutcome,
    ) -> Result<Vec<Ready>, CommitError> {
        fresh.sort_by_key(|r| row_delta::order_key(&r.request));
        let mut out: Vec<Ready> = Vec::with_capacity(fresh.len());
        for mut r in fresh {
            let before: Vec<&CommitRequest> = out.iter().map(|o| &o.request).collect();
            match late::resolve(ledger, &r.request, &r.claims, &before).await? {
                Late::OnTime => out.push(r),
                Late::Refused(reason) => {
                    warn!(batch_id = %r.request.batch_id, %reason, "late keyed request refused");
                    discard(ctx.file_io, &r.written).await;
                    refused.insert(r.request.batch_id.clone(), reason);
                }
                Late::Superseded {
                    keys,
                    all,
                    truncated,
                } => {
                    let mut m = mask::drop_keys(ctx, &r.request, &keys).await?;
                    info!(batch_id = %r.request.batch_id, keys = keys.len(), truncated, "keyed request: the table holds some of its changes already, or newer ones");
                    if truncated {
                        m.request.truncate = false;
                    }
                    outcome.rows_dropped += m.dropped;
                    if all && !m.request.truncate && m.request.state.is_empty() {
                        outcome.superseded.push(m.request.batch_id.clone());
                    }
                    r.written.extend(m.written);
                    r.obsolete.extend(m.obsolete);
                    r.request = m.request;
                    out.push(r);
                }
            }
        }
        Ok(out)
    }

    /// Plans the action's snapshots for `ready`, writes the ledger head that
    /// records them and builds the catalog commit naming it.
    async fn plan_and_build(
        &self,
        table: &str,
        ctx: &PlanContext<'_>,
        ledger: &Ledger,
        ready: &[CommitRequest],
        action: &dyn Action,
    ) -> Result<
        (
            TableCommit,
            snapshot::Written,
            Vec<i64>,
            Vec<String>,
            ledger::Next,
        ),
        CommitError,
    > {
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
        let built = self.build(table, ctx.table, plans, Some(property)).await;
        match built {
            Ok((commit, mut written, ids, versions)) => {
                written.add(ledger_files);
                Ok((commit, written, ids, versions, next))
            }
            Err(e) => {
                discard(ctx.file_io, &ledger_files).await;
                Err(e)
            }
        }
    }

    /// Gives a table whose ledger is still in its snapshot summaries (written
    /// by an earlier build) its ledger files, in a commit of its own, so the
    /// summaries may expire. Tables with ledger files are left alone.
    pub async fn adopt_ledger(&self, ident: &TableIdent) -> Result<(), CommitError> {
        let table = display(ident);
        let mut attempts = Attempts::new(&self.retry);
        while attempts.next().await.is_some() {
            let base = self.catalog.load_table(ident).await?;
            attempts.adopt(&base.metadata);
            if base.metadata.properties().contains_key(ledger::PROPERTY) {
                return Ok(());
            }
            let ledger = Ledger::open(self.ledger.clone(), &base.metadata).await?;
            if ledger.head().recent.is_empty() && ledger.head().sources.is_empty() {
                return Ok(());
            }
            let ctx = self.context(&base);
            let (commit, files, _, versions, _) = self
                .plan_and_build(&table, &ctx, &ledger, &[], &append::Append)
                .await?;
            match self.submit(commit, files, versions).await? {
                Submitted::Landed => return Ok(()),
                Submitted::Conflict(_) | Submitted::Ambiguous(_) => {}
            }
        }
        Ok(())
    }

    /// Rebuilds a table's ledger from what survives of it (`candidates`:
    /// the files found in its ledger directories) and what the table's
    /// snapshots record, and makes it the table's ledger in a commit that
    /// changes nothing else (see [`ledger::repair`]).
    pub async fn repair_ledger(
        &self,
        ident: &TableIdent,
        candidates: &[String],
    ) -> Result<ledger::repair::Rebuilt, CommitError> {
        let table = display(ident);
        let mut attempts = Attempts::new(&self.retry);
        let mut last_err = None;
        while attempts.next().await.is_some() {
            let base = self.catalog.load_table(ident).await?;
            attempts.adopt(&base.metadata);
            let rebuilt = ledger::repair::rebuild(&self.ledger, &base.metadata, candidates).await?;
            let path = ledger::repair::head_path(&base.metadata, &rebuilt.head);
            self.ledger
                .put_head(&path, Arc::new(rebuilt.head.clone()))
                .await?;
            let property = HashMap::from([(ledger::PROPERTY.to_string(), path.clone())]);
            let (commit, mut files, _, versions) = self
                .build(&table, &base, Vec::new(), Some(property))
                .await?;
            files.add([path]);
            match self.submit(commit, files, versions).await? {
                Submitted::Landed => return Ok(rebuilt),
                Submitted::Conflict(e) | Submitted::Ambiguous(e) => last_err = Some(e),
            }
        }
        Err(exhausted(table, &attempts, last_err))
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
        let mut attempts = Attempts::new(&self.retry);
        let mut last_err = None;
        let mut ours: Vec<i64> = Vec::new();
        while let Some(attempt) = attempts.next().await {
            let base = self.catalog.load_table(ident).await?;
            attempts.adopt(&base.metadata);
            // An earlier attempt's answer was lost, but it landed (other
            // commits may have been built on it since).
            let landed: Vec<i64> = ours
                .iter()
                .copied()
                .filter(|id| base.metadata.snapshot_by_id(*id).is_some())
                .collect();
            if !landed.is_empty() {
                return Ok(landed);
            }
            let ctx = self.context(&base);
            let built = match action.plan(&ctx, &[]).await {
                Ok(plans) => self.build(&table, &base, plans, None).await,
                Err(e) => Err(e),
            };
            let (commit, written, snapshot_ids, versions) = match built {
                Ok(built) => built,
                Err(e) => {
                    self.retry_if_moved(&base, e).await?;
                    continue;
                }
            };
            match self.submit(commit, written, versions).await? {
                Submitted::Landed => {
                    info!(attempt, "rewrite committed");
                    return Ok(snapshot_ids);
                }
                Submitted::Conflict(e) => {
                    warn!(attempt, "rewrite conflicted; planning again");
                    last_err = Some(e);
                }
                Submitted::Ambiguous(e) => {
                    warn!(attempt, error = %e, "rewrite outcome unknown; reloading");
                    ours.extend(snapshot_ids);
                    last_err = Some(e);
                }
            }
        }
        Err(exhausted(table, &attempts, last_err))
    }

    /// Makes `evolve`'s schema current, re-deriving it from the table as it is
    /// on every attempt, so writers evolving one table at once converge: a
    /// column another writer added meanwhile is found, not added twice.
    pub async fn update_schema(
        &self,
        ident: &TableIdent,
        evolve: impl Fn(&TableMetadata) -> Option<Schema>,
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
        ) -> Option<iceberg::Result<TableMetadataBuilder>>,
        requirement: impl Fn(&TableMetadata) -> TableRequirement,
    ) -> Result<LoadedTable, CommitError> {
        let table = display(ident);
        let mut attempts = Attempts::new(&self.retry);
        let mut last_err = None;
        while let Some(attempt) = attempts.next().await {
            let base = self.catalog.load_table(ident).await?;
            attempts.adopt(&base.metadata);
            let builder = TableMetadataBuilder::new_from_metadata(
                (*base.metadata).clone(),
                Some(base.metadata_location.clone()),
            );
            let Some(builder) = change(&base.metadata, builder) else {
                return Ok(base);
            };
            let result = builder
                .and_then(|b| b.build())
                .map_err(|source| CommitError::Build {
                    table: table.clone(),
                    source: Box::new(source),
                })?;
            let versions = expired_versions(&result);
            let commit = TableCommit {
                requirements: vec![
                    TableRequirement::UuidMatch {
                        uuid: base.metadata.uuid(),
                    },
                    requirement(&base.metadata),
                ],
                base,
                metadata: result.metadata,
                updates: result.changes,
            };
            match self.catalog.commit(commit).await {
                Ok(loaded) => {
                    self.forget(versions).await;
                    info!(
                        attempt,
                        schema_id = loaded.metadata.current_schema_id(),
                        format_version = loaded.metadata.format_version() as u8,
                        "table metadata updated"
                    );
                    return Ok(loaded);
                }
                Err(e) if e.is_retryable() => {
                    warn!(attempt, error = %e, "metadata update did not apply; reloading");
                    last_err = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(exhausted(table, &attempts, last_err))
    }

    async fn build(
        &self,
        table: &str,
        base: &LoadedTable,
        plans: Vec<snapshot::SnapshotPlan>,
        properties: Option<HashMap<String, String>>,
    ) -> Result<(TableCommit, snapshot::Written, Vec<i64>, Vec<String>), CommitError> {
        let build_err = |source| CommitError::Build {
            table: table.to_string(),
            source: Box::new(source),
        };
        let mut producer = SnapshotProducer::new(self.catalog.file_io(), base)
            .await
            .map_err(build_err)?;
        for plan in plans {
            producer.add(plan).await.map_err(build_err)?;
        }
        if let Some(properties) = properties {
            producer.set_properties(properties).map_err(build_err)?;
        }
        let (result, requirements, written, ids) = producer.finish().map_err(build_err)?;
        let versions = expired_versions(&result);
        Ok((
            TableCommit {
                base: base.clone(),
                metadata: result.metadata,
                updates: result.changes,
                requirements,
            },
            written,
            ids,
            versions,
        ))
    }

    /// Hands a built commit to the catalog and keeps the files it wrote
    /// while they may be referenced: only an error that proves the commit
    /// did not apply ([`CatalogError::unapplied`]: a conflict, a refusal)
    /// discards them; any other keeps them, since the table (or a commit
    /// built on it since) may name them. A landed commit drops the metadata
    /// versions it expired. Errors other than a conflict or an unknown
    /// outcome are final.
    async fn submit(
        &self,
        commit: TableCommit,
        written: snapshot::Written,
        versions: Vec<String>,
    ) -> Result<Submitted, CatalogError> {
        match self.catalog.commit(commit).await {
            Ok(_) => {
                self.forget(versions).await;
                Ok(Submitted::Landed)
            }
            Err(e) if e.unapplied() => {
                written.discard(self.catalog.file_io()).await;
                match e {
                    CatalogError::Conflict { .. } => Ok(Submitted::Conflict(e)),
                    e => Err(e),
                }
            }
            Err(e @ CatalogError::Ambiguous { .. }) => Ok(Submitted::Ambiguous(e)),
            Err(e) => {
                warn!(error = %e, "commit outcome unknown; keeping its files");
                Err(e)
            }
        }
    }

    /// An attempt failed reading a file of the table it loaded. When the
    /// table has moved on since (another writer's commit replaced the ledger
    /// head it read, or an expiry removed the manifests of the snapshot it
    /// planned on), that is no failure: the next attempt reloads. Otherwise
    /// the error stands.
    async fn retry_if_moved(&self, base: &LoadedTable, e: CommitError) -> Result<(), CommitError> {
        if !e.is_transient() {
            return Err(e);
        }
        match self.catalog.load_table(&base.ident).await {
            Ok(now) if now.metadata_location != base.metadata_location => {
                warn!(error = %e, "the table moved on while this attempt read it; reloading");
                Ok(())
            }
            _ => Err(e),
        }
    }

    /// Deletes metadata versions the new metadata's log no longer lists.
    async fn forget(&self, versions: Vec<String>) {
        for path in versions {
            // An orphan at worst: maintenance removes it later.
            let _ = self.catalog.file_io().delete(&path).await;
        }
    }
}

/// What became of one catalog commit: the retry loops decide what next.
enum Submitted {
    /// The table points at the new metadata.
    Landed,
    /// Another commit landed first; the files written for this one are gone.
    Conflict(CatalogError),
    /// No answer: it may have landed; its files are kept.
    Ambiguous(CatalogError),
}

/// Metadata files dropped from the log by this build, when the table asks for
/// them to be deleted (`write.metadata.delete-after-commit.enabled`, on for
/// tables floe creates): without it, every commit's metadata file stays.
fn expired_versions(result: &iceberg::spec::TableMetadataBuildResult) -> Vec<String> {
    let enabled = result
        .metadata
        .properties()
        .get(DELETE_AFTER_COMMIT)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        return Vec::new();
    }
    result
        .expired_metadata_logs
        .iter()
        .map(|l| l.metadata_file.clone())
        .collect()
}

/// Table property: how a keyed table's changes reach its older rows:
/// `position` (position deletes resolved at commit, the default for keyed
/// tables floe creates) or `equality` (equality delete files, as before).
/// `write.update.mode = copy-on-write` overrides both.
pub const KEYED_DELETES: &str = "floe.keyed.deletes";

/// How a keyed table's commits change its older rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedMode {
    /// Touched data files rewritten; no delete files.
    CopyOnWrite,
    /// Position deletes resolved against the table's rows at commit.
    Positions,
    /// Equality delete files the writers wrote, applied by readers.
    Equalities,
}

impl KeyedMode {
    /// The mode a table's properties choose (tables without the property,
    /// from before position deletes, keep equality deletes).
    pub fn of(metadata: &TableMetadata) -> Self {
        if copy_on_write::enabled(metadata) {
            return KeyedMode::CopyOnWrite;
        }
        match metadata.properties().get(KEYED_DELETES).map(String::as_str) {
            Some("position") => KeyedMode::Positions,
            _ => KeyedMode::Equalities,
        }
    }
}

/// Table property: delete metadata files that fall out of the metadata log.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";

impl Ready {
    fn of(request: &CommitRequest, claims: ledger::Claims) -> Self {
        Self {
            request: request.clone(),
            claims,
            written: Vec::new(),
            obsolete: Vec::new(),
        }
    }
}

/// Every attempt the policy allowed conflicted or had an unknown outcome.
fn exhausted(table: String, attempts: &Attempts, last: Option<CatalogError>) -> CommitError {
    CommitError::Exhausted {
        table,
        attempts: attempts.made(),
        last: last.unwrap_or(CatalogError::Store("no attempt made".into())),
    }
}

fn storage_err(table: &str, source: iceberg::Error) -> CommitError {
    CommitError::Storage {
        table: table.to_string(),
        source: Box::new(source),
    }
}

/// What the table (its ledger) and the requests taken before `r` in the
/// same commit hold of `r`'s records: `None` when all of them.
async fn held(
    ledger: &Ledger,
    r: &CommitRequest,
    taken: &ledger::Taken,
) -> Result<Option<ledger::Claims>, CommitError> {
    if ledger.holds_batch(r).await? {
        return Ok(None);
    }
    if !r.per_record() {
        return Ok(Some(ledger::Claims { spans: Vec::new() }));
    }
    let claims = ledger.claims(r).await?.union(taken.claims(r));
    Ok(if claims.covers(r) { None } else { Some(claims) })
}

/// Removes files an attempt wrote and will not commit.
async fn discard(file_io: &FileIO, paths: &[String]) {
    for p in paths {
        let _ = file_io.delete(p).await;
    }
}

/// Keeps the first of requests that share a batch id (a message delivered twice
/// in one receive).
fn dedup(requests: Vec<CommitRequest>) -> Vec<CommitRequest> {
    let mut seen = HashSet::new();
    requests
        .into_iter()
        .filter(|r| seen.insert(r.batch_id.clone()))
        .collect()
}
