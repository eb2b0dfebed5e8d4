//! Table maintenance, one implementation for `floe maintain` and the scheduled
//! function: compaction (bin-packing small files, applying deletes) and
//! manifest merging in one `replace` snapshot, then snapshot expiry that frees
//! the files only expired snapshots used, then orphan cleanup.
//!
//! By default only tables floe writes are maintained ([`owned`]); every ref
//! of a table keeps its snapshots and files ([`expire`]).
//!
//! Every change goes through the commit engine's optimistic commit, so it
//! never races the committer: a concurrent commit makes the maintenance
//! commit plan again on the new table (or give up cleanly), never lose it.

pub mod compact;
pub mod expire;
pub mod orphans;
pub mod owned;
pub mod reachable;
pub mod refs;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};

use async_trait::async_trait;
use iceberg::TableIdent;
use iceberg::io::FileIO;
use iceberg::spec::{
    MAIN_BRANCH, Snapshot, SnapshotReference, TableMetadata, TableMetadataBuildResult,
};
use iceberg::{Error, ErrorKind, TableRequirement};
use tracing::{info, instrument, warn};

use crate::catalog::{CatalogError, CatalogRef, Committed, LoadedTable, TableCommit};
use crate::clock::now_ms;
use crate::commit::live::LiveFiles;
use crate::commit::retry::{Attempt, Driven, Plan, drive};
use crate::commit::{CommitEngine, CommitError, RetryPolicy};
use crate::error::Classify;
use crate::ident::display;
use compact::Compact;
use expire::{Expiry, ExpiryRule};
use reachable::Reachable;

/// Why maintenance stopped.
#[derive(Debug, thiserror::Error)]
pub enum MaintainError {
    /// A commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Files could not be listed.
    #[error(transparent)]
    List(#[from] crate::storage::StorageError),
    /// Reading or building metadata failed.
    #[error("table {table}: {source}")]
    Iceberg {
        /// The table.
        table: String,
        /// The error.
        source: Box<Error>,
    },
}

/// What each part answers.
impl Classify for MaintainError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            MaintainError::Commit(e) => e.kind(),
            MaintainError::Catalog(e) => e.kind(),
            MaintainError::List(e) => e.kind(),
            MaintainError::Iceberg { source, .. } => Classify::kind(source.as_ref()),
        }
    }
}

/// What maintenance does.
#[derive(Debug, Clone)]
pub struct MaintainOptions {
    /// Only report what would be done.
    pub dry_run: bool,
    /// Overrides the table's `history.expire.max-snapshot-age-ms`.
    pub max_snapshot_age_ms: Option<i64>,
    /// Overrides the table's `floe.expire.max-snapshots`.
    pub max_snapshots: Option<usize>,
    /// Orphan files younger than this stay.
    pub orphan_window_ms: i64,
    /// "Now", ms since the epoch (tests move it).
    pub now_ms: i64,
    /// Lists table locations for orphans.
    pub lister: orphans::Lister,
    /// No compaction step starts after this (a Lambda's remaining time);
    /// what is left waits for the next run.
    pub deadline: Option<std::time::Instant>,
}

impl Default for MaintainOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            max_snapshot_age_ms: None,
            max_snapshots: None,
            orphan_window_ms: orphans::DEFAULT_WINDOW_MS,
            now_ms: now_ms(),
            lister: orphans::Lister::default(),
            deadline: None,
        }
    }
}

/// Counts of a table's parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableStats {
    /// Snapshots in the metadata.
    pub snapshots: usize,
    /// Manifests of the current snapshot.
    pub manifests: usize,
    /// Live data files.
    pub data_files: usize,
    /// Live delete files.
    pub delete_files: usize,
    /// Rows in live data files (before deletes).
    pub rows: u64,
}

/// What maintenance did (or, dry, would do).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MaintainReport {
    /// The table.
    pub table: String,
    /// Before.
    pub before: TableStats,
    /// After.
    pub after: TableStats,
    /// Data files compaction replaced.
    pub compacted_files: usize,
    /// Rows compaction wrote.
    pub compacted_rows: u64,
    /// Dry run: equality deletes may drop some of `compacted_rows`.
    pub compacted_rows_at_most: bool,
    /// Rows compaction dropped because deletes removed them.
    pub compacted_deleted_rows: u64,
    /// Compaction steps committed.
    pub compaction_steps: usize,
    /// Files worth compacting left for a later run (the deadline came first).
    pub compaction_left: usize,
    /// Snapshots expired.
    pub expired_snapshots: usize,
    /// Refs removed because they outlived their `max-ref-age-ms`.
    pub expired_refs: Vec<String>,
    /// Files deleted because no kept snapshot or metadata needs them.
    pub deleted_files: Vec<String>,
    /// Orphan files deleted.
    pub orphans: Vec<String>,
}

/// Runs compaction, manifest merging, expiry and orphan cleanup on one table.
#[instrument(skip_all, fields(table = %display(ident)))]
pub async fn maintain(
    catalog: &CatalogRef,
    ident: &TableIdent,
    opts: &MaintainOptions,
) -> Result<MaintainReport, MaintainError> {
    let table = display(ident);
    let file_io = catalog.file_io().clone();
    let mut report = MaintainReport {
        table: table.clone(),
        ..Default::default()
    };
    let (loaded, before) = stats_now(catalog, ident).await?;
    report.before = before;
    let rule = expiry_rule(&loaded.metadata, opts);

    // 1. Compaction and manifest merging. The ledger is the `floe.ledger`
    // property of the table each attempt reloads, so a retried step carries
    // the ledger (source state, high-water marks) a concurrent commit left.
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let iceberg_err = |source: Error| MaintainError::Iceberg {
        table: table.clone(),
        source: Box::new(source),
    };
    let planned = rule.plan(
        &loaded.metadata,
        &refs::of(&loaded.metadata).map_err(iceberg_err)?,
        opts.now_ms,
    );
    let will_expire = !planned.snapshots.is_empty();
    if opts.dry_run {
        return dry_run(catalog, &engine, &loaded, planned, opts, report).await;
    }
    // A table whose ledger is still in its snapshot summaries gets its ledger
    // files first: the snapshots that record it may be about to expire.
    engine.adopt_ledger(ident).await?;
    compact_steps(
        &engine,
        catalog,
        ident,
        loaded.clone(),
        opts.deadline,
        &mut report,
    )
    .await?;
    if report.compaction_steps == 0 && (report.before.manifests > 1 || will_expire) {
        engine.rewrite(ident, &Compact { rewrite: None }).await?;
    }

    // 2. Expiry, and the files only expired snapshots needed.
    let (expired, deleted) = expire(catalog, ident, rule, opts.now_ms).await?;
    report.expired_snapshots = expired.snapshots.len();
    report.expired_refs = expired.refs;
    for path in &deleted {
        if let Err(e) = file_io.delete(path).await {
            warn!(%path, error = %e, "could not delete an expired file");
        }
    }
    report.deleted_files = deleted;

    // 3. Orphans.
    report.orphans = orphans_now(catalog, ident, opts).await?;
    for path in &report.orphans {
        if let Err(e) = file_io.delete(path).await {
            warn!(%path, error = %e, "could not delete an orphan file");
        }
    }
    report.after = stats_now(catalog, ident).await?.1;
    info!(
        expired = report.expired_snapshots,
        deleted = report.deleted_files.len(),
        orphans = report.orphans.len(),
        compacted = report.compacted_files,
        "maintenance done"
    );
    Ok(report)
}

/// The table's expiry rule, with the options' overrides.
fn expiry_rule(metadata: &TableMetadata, opts: &MaintainOptions) -> ExpiryRule {
    let mut rule = ExpiryRule::of(metadata);
    if let Some(age) = opts.max_snapshot_age_ms {
        rule.max_age_ms = age;
    }
    if let Some(n) = opts.max_snapshots {
        rule.max_snapshots = Some(n.max(1));
    }
    rule
}

/// The report of a dry run: what compaction would rewrite, what expiry
/// would remove and which orphans there are, with nothing changed.
async fn dry_run(
    catalog: &CatalogRef,
    engine: &CommitEngine,
    loaded: &LoadedTable,
    planned: Expiry,
    opts: &MaintainOptions,
    mut report: MaintainReport,
) -> Result<MaintainReport, MaintainError> {
    let preview = compact::preview(&engine.context(loaded)).await?;
    report.compacted_files = preview.files;
    report.compacted_rows = preview.rows;
    report.compacted_deleted_rows = preview.dropped;
    report.compacted_rows_at_most = preview.rows_at_most;
    report.expired_snapshots = planned.snapshots.len();
    report.expired_refs = planned.refs;
    report.orphans = find_orphans(catalog, loaded, opts).await?;
    report.after = report.before;
    Ok(report)
}

/// The table's orphans as it is now, read again if it moves on meanwhile.
async fn orphans_now(
    catalog: &CatalogRef,
    ident: &TableIdent,
    opts: &MaintainOptions,
) -> Result<Vec<String>, MaintainError> {
    let mut loaded = catalog.load_table(ident).await?;
    let mut moved = 0;
    loop {
        match find_orphans(catalog, &loaded, opts).await {
            Ok(orphans) => return Ok(orphans),
            Err(e) => loaded = reload_if_moved(catalog, loaded, e, &mut moved).await?,
        }
    }
}

/// Compacts one table's small files and deletes (step 1 of [`maintain`]
/// alone, no expiry or orphan cleanup): what a source runs when it has just
/// left many small files, such as a Postgres table's initial copy (one file
/// per chunk). The report has the compaction's counts; `before` and `after`
/// are not read (each would read every manifest, in the source's loop).
#[instrument(skip_all, fields(table = %display(ident)))]
pub async fn compact_table(
    catalog: &CatalogRef,
    ident: &TableIdent,
    deadline: Option<std::time::Instant>,
) -> Result<MaintainReport, MaintainError> {
    let mut report = MaintainReport {
        table: display(ident),
        ..Default::default()
    };
    let loaded = catalog.load_table(ident).await?;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    engine.adopt_ledger(ident).await?;
    compact_steps(&engine, catalog, ident, loaded, deadline, &mut report).await?;
    Ok(report)
}

/// Compaction in steps of bounded input, each committed, until nothing is
/// left or `deadline` is near.
async fn compact_steps(
    engine: &CommitEngine,
    catalog: &CatalogRef,
    ident: &TableIdent,
    mut step_loaded: crate::catalog::LoadedTable,
    deadline: Option<std::time::Instant>,
    report: &mut MaintainReport,
) -> Result<(), MaintainError> {
    // Steps another process's compaction overtook; past a few, it is
    // compacting this table already and this run stops.
    let mut overtaken = 0;
    let mut moved = 0;
    loop {
        let step_ctx = engine.context(&step_loaded);
        let planned = compact::rewrite(&step_ctx, &step_loaded).await;
        let planned = match planned {
            Err(e) if moved < MOVED_RETRIES && moved_on(catalog, &step_loaded).await => {
                moved += 1;
                warn!(error = %e, "the table moved on while compaction read it; reloading");
                step_loaded = catalog.load_table(ident).await?;
                continue;
            }
            planned => planned?,
        };
        let Some(r) = planned else {
            break;
        };
        let (files, rows, dropped, remaining) =
            (r.removed_data.len(), r.rows, r.dropped, r.remaining);
        let written: Vec<String> = r
            .added
            .iter()
            .map(|(_, f)| f.file_path().to_string())
            .collect();
        match engine.rewrite(ident, &Compact { rewrite: Some(r) }).await {
            Ok(_) => {}
            Err(CommitError::Superseded { reason, .. }) => {
                warn!(%reason, "compaction step overtaken by another; planning again");
                for path in &written {
                    let _ = catalog.file_io().delete(path).await;
                }
                overtaken += 1;
                if overtaken >= 3 {
                    break;
                }
                step_loaded = catalog.load_table(ident).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        report.compacted_files += files;
        report.compacted_rows += rows;
        report.compacted_deleted_rows += dropped;
        report.compaction_left = remaining;
        report.compaction_steps += 1;
        step_loaded = catalog.load_table(ident).await?;
        if remaining == 0 || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
    }
    Ok(())
}

/// Expires snapshots and refs by `rule`, retrying on conflicts; returns
/// what went and the files that only expired snapshots needed (to delete once
/// the commit landed).
async fn expire(
    catalog: &CatalogRef,
    ident: &TableIdent,
    rule: ExpiryRule,
    now_ms: i64,
) -> Result<(Expiry, Vec<String>), MaintainError> {
    let table = display(ident);
    let driven = drive(
        &RetryPolicy::default(),
        &mut Expire {
            catalog,
            ident,
            table: &table,
            rule: &rule,
            now_ms,
            lost: Vec::new(),
        },
    )
    .await?;
    match driven {
        Driven::Done(done) => Ok(done),
        Driven::Exhausted { .. } => Err(MaintainError::Iceberg {
            table,
            source: Box::new(Error::new(
                ErrorKind::Unexpected,
                "snapshot expiry kept conflicting with concurrent commits; run it again",
            )),
        }),
    }
}

/// The attempts of [`expire`]: planned again on the table as loaded, until
/// one lands; one whose answer was lost landed once the table holds none
/// of what it removed.
struct Expire<'a> {
    catalog: &'a CatalogRef,
    ident: &'a TableIdent,
    table: &'a str,
    rule: &'a ExpiryRule,
    now_ms: i64,
    /// The plans and files of attempts whose answer was lost: any may land late.
    lost: Vec<(Expiry, Vec<String>)>,
}

#[async_trait]
impl Plan for Expire<'_> {
    type Done = (Expiry, Vec<String>);
    type Error = MaintainError;

    async fn load(&mut self) -> Result<LoadedTable, MaintainError> {
        Ok(self.catalog.load_table(self.ident).await?)
    }

    async fn attempt(
        &mut self,
        base: LoadedTable,
        _attempt: u32,
    ) -> Result<Attempt<Self::Done>, MaintainError> {
        if let Some(done) = self.found(&base).await? {
            return Ok(Attempt::Done(done));
        }
        Ok(
            match expire_once(self.catalog, self.table, &base, self.rule, self.now_ms).await? {
                Tried::Landed(plan, files) => Attempt::Done((plan, files)),
                Tried::Lost(plan, files) => {
                    self.lost.push((plan, files));
                    Attempt::Again(None)
                }
                Tried::Again => Attempt::Again(None),
            },
        )
    }
}

impl Expire<'_> {
    /// An attempt whose answer was lost that `base` shows landed (none of
    /// the snapshots and refs it removed is left), with the files it meant
    /// to delete that `base` no longer needs.
    async fn found(
        &mut self,
        base: &LoadedTable,
    ) -> Result<Option<(Expiry, Vec<String>)>, MaintainError> {
        if self.lost.is_empty() {
            return Ok(None);
        }
        let meta = &base.metadata;
        let err = |source: Error| MaintainError::Iceberg {
            table: self.table.to_string(),
            source: Box::new(source),
        };
        let refs = refs::of(meta).map_err(err)?;
        let gone = |plan: &Expiry| {
            plan.snapshots
                .iter()
                .all(|id| meta.snapshot_by_id(*id).is_none())
                && plan.refs.iter().all(|name| !refs.contains_key(name))
        };
        let Some(i) = self.lost.iter().position(|(plan, _)| gone(plan)) else {
            return Ok(None);
        };
        let (plan, files) = self.lost.swap_remove(i);
        let files = unneeded(self.catalog.file_io(), meta, files)
            .await
            .map_err(err)?;
        Ok(Some((plan, files)))
    }
}

/// Of `files`, those `meta` needs no longer: no snapshot reaches them and
/// they are neither its metadata log nor its statistics. What an expiry
/// whose answer was lost meant to delete is checked against the table as it
/// is now, since commits may have landed since (another engine's too).
async fn unneeded(
    file_io: &FileIO,
    meta: &TableMetadata,
    files: Vec<String>,
) -> Result<Vec<String>, Error> {
    let all: Vec<&Snapshot> = meta.snapshots().map(|s| s.as_ref()).collect();
    let reachable = Reachable::of(file_io, meta, all).await?;
    let logged: HashSet<&str> = meta
        .metadata_log()
        .iter()
        .map(|l| l.metadata_file.as_str())
        .collect();
    let stats = statistics_files(meta);
    Ok(files
        .into_iter()
        .filter(|f| !reachable.contains(f) && !logged.contains(f.as_str()) && !stats.contains(f))
        .collect())
}

/// What one expiry attempt came to.
enum Tried {
    /// It landed (or there was nothing to expire): what went, and the
    /// files only it needed.
    Landed(Expiry, Vec<String>),
    /// Its answer was lost: it may have landed, or may yet.
    Lost(Expiry, Vec<String>),
    /// It did not apply, or the table moved on under it: plan again.
    Again,
}

/// One expiry attempt on `base`.
async fn expire_once(
    catalog: &CatalogRef,
    table: &str,
    base: &LoadedTable,
    rule: &ExpiryRule,
    now_ms: i64,
) -> Result<Tried, MaintainError> {
    let file_io = catalog.file_io();
    let err = |source: Error| MaintainError::Iceberg {
        table: table.to_string(),
        source: Box::new(source),
    };
    let meta = &base.metadata;
    let refs = refs::of(meta).map_err(err)?;
    let plan = rule.plan(meta, &refs, now_ms);
    if plan.is_empty() {
        return Ok(Tried::Landed(plan, Vec::new()));
    }
    let gone: HashSet<i64> = plan.snapshots.iter().copied().collect();
    // Collected first: an iterator of closures held across the await would
    // keep the attempt's future from being Send for every lifetime.
    let all: Vec<&Snapshot> = meta.snapshots().map(|s| s.as_ref()).collect();
    let before = match Reachable::of(file_io, meta, all).await {
        Ok(before) => before,
        // Another expiry removed files of these snapshots meanwhile.
        Err(_) if moved_on(catalog, base).await => return Ok(Tried::Again),
        Err(e) => return Err(err(e)),
    };
    let kept: Vec<_> = meta
        .snapshots()
        .filter(|s| !gone.contains(&s.snapshot_id()))
        .collect();
    let kept_refs: Vec<&Snapshot> = kept.iter().map(|s| s.as_ref()).collect();
    let after = Reachable::of(file_io, meta, kept_refs).await.map_err(err)?;
    let oldest_kept = kept
        .iter()
        .map(|s| s.timestamp_ms())
        .min()
        .unwrap_or(now_ms);
    let built = remove_expired(base, &plan, &refs).map_err(err)?;
    let kept_stats = statistics_files(&built.metadata);
    let dropped_stats: Vec<String> = statistics_files(meta)
        .into_iter()
        .filter(|f| !kept_stats.contains(f))
        .collect();
    let (metadata, dropped_logs) = trim_metadata_log(built.metadata, oldest_kept).map_err(err)?;
    let commit = TableCommit {
        requirements: refs_as_planned(meta, &refs),
        updates: built.changes,
        metadata,
        base: base.clone(),
    };
    let mut deleted = before.minus(&after);
    deleted.extend(
        built
            .expired_metadata_logs
            .into_iter()
            .map(|l| l.metadata_file)
            .chain(dropped_logs)
            .chain(dropped_stats),
    );
    match catalog.commit(commit).await {
        Committed::Landed(_) => Ok(Tried::Landed(plan, deleted)),
        Committed::Unknown(e) if e.is_retryable() => {
            warn!(error = %e, "expiry's answer was lost; reloading to find out");
            Ok(Tried::Lost(plan, deleted))
        }
        Committed::NotApplied(e) if e.is_retryable() => {
            warn!(error = %e, "expiry did not apply; planning again");
            Ok(Tried::Again)
        }
        Committed::NotApplied(e) | Committed::Unknown(e) => Err(e.into()),
    }
}

/// `base`'s metadata without the planned snapshots and refs, refusing a
/// result that lost a ref the plan keeps.
fn remove_expired(
    base: &LoadedTable,
    plan: &Expiry,
    refs: &BTreeMap<String, SnapshotReference>,
) -> iceberg::Result<TableMetadataBuildResult> {
    let mut builder = iceberg::spec::TableMetadataBuilder::new_from_metadata(
        (*base.metadata).clone(),
        Some(base.metadata_location.clone()),
    );
    for name in &plan.refs {
        builder = builder.remove_ref(name);
    }
    builder = builder.remove_snapshots(&plan.snapshots);
    // iceberg-rust keeps statistics of removed snapshots; Java drops them
    // with the snapshot, and one left names a snapshot that is gone.
    for id in &plan.snapshots {
        builder = builder
            .remove_statistics(*id)
            .remove_partition_statistics(*id);
    }
    let built = builder.build()?;
    // The builder silently drops refs whose snapshot it removed; the plan
    // keeps every live ref's snapshot, so one missing here is a bug that
    // must not reach the catalog.
    let left = refs::of(&built.metadata)?;
    if let Some(lost) = refs
        .keys()
        .find(|name| !plan.refs.contains(name) && !left.contains_key(*name))
    {
        return Err(Error::new(
            ErrorKind::Unexpected,
            format!("expiry would remove ref {lost}; nothing was committed"),
        ));
    }
    Ok(built)
}

/// Every ref as it was planned on: a concurrent commit to any branch or tag
/// (another engine's too) makes expiry plan again.
fn refs_as_planned(
    meta: &TableMetadata,
    refs: &BTreeMap<String, SnapshotReference>,
) -> Vec<TableRequirement> {
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: meta.uuid() }];
    if !refs.contains_key(MAIN_BRANCH) {
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: None,
        });
    }
    requirements.extend(
        refs.iter()
            .map(|(name, r)| TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: Some(r.snapshot_id),
            }),
    );
    requirements
}

/// How often a step that read a table which then moved on starts again.
const MOVED_RETRIES: usize = 8;

/// True when the table no longer is at `loaded`'s metadata: a file read
/// from `loaded` may be gone because of that commit, not lost.
async fn moved_on(catalog: &CatalogRef, loaded: &LoadedTable) -> bool {
    catalog
        .load_table(&loaded.ident)
        .await
        .is_ok_and(|now| now.metadata_location != loaded.metadata_location)
}

/// A step failed reading `loaded`. When the table has moved on since
/// (another writer's commit replaced the ledger head it read, or an expiry
/// removed manifests), that is no failure: the table as it is now, to do the
/// step again on, up to [`MOVED_RETRIES`] times. Otherwise the error stands.
async fn reload_if_moved(
    catalog: &CatalogRef,
    loaded: LoadedTable,
    e: MaintainError,
    moved: &mut usize,
) -> Result<LoadedTable, MaintainError> {
    if *moved >= MOVED_RETRIES {
        return Err(e);
    }
    let now = catalog.load_table(&loaded.ident).await?;
    if now.metadata_location == loaded.metadata_location {
        return Err(e);
    }
    *moved += 1;
    warn!(error = %e, "the table moved on while maintenance read it; reloading");
    Ok(now)
}

/// The table as it is now, with its counts.
async fn stats_now(
    catalog: &CatalogRef,
    ident: &TableIdent,
) -> Result<(LoadedTable, TableStats), MaintainError> {
    let mut loaded = catalog.load_table(ident).await?;
    let mut moved = 0;
    loop {
        match stats(catalog, &loaded).await {
            Ok(stats) => return Ok((loaded, stats)),
            Err(e) => loaded = reload_if_moved(catalog, loaded, e, &mut moved).await?,
        }
    }
}

/// Drops metadata-log entries older than `oldest_kept` (they describe only
/// expired snapshots); returns the metadata and the dropped files.
fn trim_metadata_log(
    metadata: TableMetadata,
    oldest_kept: i64,
) -> iceberg::Result<(TableMetadata, Vec<String>)> {
    let dropped: Vec<String> = metadata
        .metadata_log()
        .iter()
        .filter(|l| l.timestamp_ms < oldest_kept)
        .map(|l| l.metadata_file.clone())
        .collect();
    if dropped.is_empty() {
        return Ok((metadata, dropped));
    }
    // The builder only trims the log by count; the spec's JSON form is the
    // one way in from outside the crate.
    let mut json = serde_json::to_value(&metadata)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, "table metadata").with_source(e))?;
    if let Some(log) = json.get_mut("metadata-log").and_then(|l| l.as_array_mut()) {
        log.retain(|l| {
            l.get("timestamp-ms")
                .and_then(|t| t.as_i64())
                .is_some_and(|t| t >= oldest_kept)
        });
    }
    let trimmed = serde_json::from_value(json)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, "trimmed table metadata").with_source(e))?;
    Ok((trimmed, dropped))
}

/// Files under the table location that nothing references, older than the window.
async fn find_orphans(
    catalog: &CatalogRef,
    loaded: &LoadedTable,
    opts: &MaintainOptions,
) -> Result<Vec<String>, MaintainError> {
    let meta = &loaded.metadata;
    let referenced = Reachable::of(
        catalog.file_io(),
        meta,
        meta.snapshots().map(|s| s.as_ref()),
    )
    .await
    .map_err(|source| MaintainError::Iceberg {
        table: display(&loaded.ident),
        source: Box::new(source),
    })?;
    let metadata_files = metadata_files(loaded);
    // Ledger files are named by the table property and the head, not by
    // snapshots; a format-1 ledger kept them under the table's location.
    let store = std::sync::Arc::new(crate::ledger::LedgerStore::new(catalog.file_io().clone()));
    let ledger = crate::ledger::Ledger::open(store, meta)
        .await
        .map_err(|e| MaintainError::Iceberg {
            table: display(&loaded.ident),
            source: Box::new(Error::new(ErrorKind::Unexpected, e.to_string())),
        })?;
    let mut ledger_files = ledger
        .named_files()
        .await
        .map_err(|e| MaintainError::Iceberg {
            table: display(&loaded.ident),
            source: Box::new(Error::new(ErrorKind::Unexpected, e.to_string())),
        })?;
    // Heads that left the retired list stay while a snapshot names them.
    ledger_files
        .extend(crate::ledger::snapshot_heads(meta).filter_map(|p| crate::uri::normalize(p)));
    // A key file is written before its request commits: one of a request
    // still queued is named by nothing yet.
    let key_files_kept = ledger.windows().request_ms + opts.orphan_window_ms;
    let legacy_keys = format!("/{}/keys/", crate::ledger::LEGACY_DIR);
    let mut out: Vec<String> = opts
        .lister
        .list(meta.location())
        .await?
        .into_iter()
        .filter(|f| opts.now_ms - f.modified_ms > opts.orphan_window_ms)
        .filter(|f| !referenced.contains(&f.uri) && !metadata_files.contains(&f.uri))
        .filter(|f| {
            let norm = crate::uri::normalize(&f.uri).unwrap_or_default();
            if ledger_files.contains(&norm) {
                return false;
            }
            !(norm.contains(&legacy_keys) && opts.now_ms - f.modified_ms <= key_files_kept)
        })
        .map(|f| f.uri)
        .collect();
    if !crate::uri::within(ledger.dir(), meta.location()) {
        out.extend(
            opts.lister
                .list(ledger.dir())
                .await?
                .into_iter()
                .filter(|f| opts.now_ms - f.modified_ms > key_files_kept)
                .filter(|f| {
                    let norm = crate::uri::normalize(&f.uri).unwrap_or_default();
                    !ledger_files.contains(&norm)
                })
                .map(|f| f.uri),
        );
    }
    out.sort();
    Ok(out)
}

/// The metadata files the table names outside its snapshots: the metadata
/// log, the current metadata, and statistics files.
fn metadata_files(loaded: &LoadedTable) -> reachable::Paths {
    let meta = &loaded.metadata;
    let mut files = reachable::Paths::default();
    for l in meta.metadata_log() {
        files.insert(&l.metadata_file);
    }
    files.insert(&loaded.metadata_location);
    // Statistics files other engines attach (Puffin) are named only here.
    for f in statistics_files(meta) {
        files.insert(&f);
    }
    files
}

/// The table's statistics and partition statistics files.
fn statistics_files(meta: &TableMetadata) -> HashSet<String> {
    meta.statistics_iter()
        .map(|f| f.statistics_path.clone())
        .chain(
            meta.partition_statistics_iter()
                .map(|f| f.statistics_path.clone()),
        )
        .collect()
}

async fn stats(catalog: &CatalogRef, loaded: &LoadedTable) -> Result<TableStats, MaintainError> {
    let meta = &loaded.metadata;
    let err = |source: Error| MaintainError::Iceberg {
        table: display(&loaded.ident),
        source: Box::new(source),
    };
    let live = LiveFiles::load(catalog.file_io(), meta)
        .await
        .map_err(err)?;
    let manifests = match meta.current_snapshot() {
        Some(s) => {
            let bytes = catalog
                .file_io()
                .new_input(s.manifest_list())
                .map_err(err)?
                .read()
                .await
                .map_err(err)?;
            iceberg::spec::ManifestList::parse_with_version(&bytes, meta.format_version())
                .map_err(err)?
                .entries()
                .len()
        }
        None => 0,
    };
    Ok(TableStats {
        snapshots: meta.snapshots().count(),
        manifests,
        data_files: live.data.len(),
        delete_files: live.deletes.len(),
        rows: live.data.iter().map(|f| f.file.record_count()).sum(),
    })
}
