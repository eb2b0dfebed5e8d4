//! Postgres into Iceberg: each Postgres table into a keyed Iceberg table of
//! the same name in one namespace, one micro-batch at a time, exactly once.
//!
//! Every table's commit records, in its snapshot summary, the slot's position
//! it holds (`floe.hwm.pg:<slot>`) and its initial-snapshot progress
//! (`floe.state.pg.snapshot`), atomically with its files. The slot advances
//! only after every table of a batch has committed, so its confirmed LSN never
//! passes what a table holds. After a crash anywhere in between, the slot
//! re-delivers from where it stood and each table skips the changes at or
//! below its own high-water mark: nothing is lost, nothing applied twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use floe_core::catalog::{CatalogError, CatalogRef};
use floe_core::change::{Change, ChangeOp};
use floe_core::commit::{CommitEngine, CommitError, RetryPolicy};
use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::embedded::{Embedded, EmbeddedError, IngestOptions, IngestReport};
use floe_core::error::{BoxError, Classify, ErrorKind};
use floe_core::evolve::widen_column;
use floe_core::ident::display;
use floe_core::ledger::{Ledger, LedgerError, LedgerStore};
use floe_core::metrics::Counters;
use floe_core::pipeline::{PipelineError, Writer, WriterParts};
use floe_core::queue::{MemoryQueue, QueueError};
use floe_core::source::SourceKind;
use floe_core::source::{Position, Positions, SourceSpan, batch_id, sub_batch_id};
use floe_core::source::{Reads, Records, Source, SourceBatch};
use floe_core::tabledef;
use iceberg::spec::{NestedField, Schema, TableMetadata, Type};
use iceberg::{NamespaceIdent, TableIdent};
use tracing::{info, instrument, warn};

use crate::source::{PgBatch, TableChanges};
use crate::{
    PgConfig, PgError, PgSource, SlotHealth, SnapshotState, SourceState, TableName, TableProgress,
    format_lsn,
};

/// The state key of a table's initial-snapshot progress.
pub const SNAPSHOT_STATE: &str = "pg.snapshot";

/// The state key of the commit time (ms) in Postgres of the last transaction
/// a table holds, from which status reports the replication lag.
pub const SOURCE_COMMIT_STATE: &str = "pg.source_commit_ms";

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The source failed.
    #[error(transparent)]
    Source(#[from] PgError),
    /// Writing or committing failed; the slot was not advanced.
    #[error(transparent)]
    Pipeline(#[from] EmbeddedError),
    /// Writing or committing failed; the slot was not advanced.
    #[error(transparent)]
    Write(#[from] PipelineError),
    /// The in-process commit queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A schema change could not be committed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The table's ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A table cannot be created or evolved.
    #[error("table {table}: {source}")]
    Table {
        /// The Iceberg table.
        table: String,
        /// Why: the definition's or the schema's error.
        source: BoxError,
    },
    /// A table's commit failed; the slot was not advanced past its changes.
    #[error("table {table}: commit failed, the slot stays where it was: {source}")]
    CommitFailed {
        /// The Iceberg table.
        table: String,
        /// The commit's error.
        source: Box<PipelineError>,
    },
    /// The slot lost changes the tables have not got: reading on would
    /// silently skip them.
    #[error(
        "postgres: replication slot {slot:?} {how}; tables {tables} hold its changes up to \
         LSN {held}, and those after it are gone from the WAL: continuing would silently miss \
         them. Fix: re-snapshot with `floe pg resync` (same --conninfo/--slot/--publication/--table \
         options; it recreates the slot and copies every table again, replacing its rows), then \
         sync as before; to keep it from happening again, run the sync more often or raise \
         max_slot_wal_keep_size"
    )]
    SlotLost {
        /// The slot.
        slot: String,
        /// What happened to it.
        how: String,
        /// The Iceberg tables that hold its changes.
        tables: String,
        /// The last position they hold.
        held: String,
    },
}

/// What each part answers; a table floe cannot create or evolve stays so,
/// and a lost slot needs a resync.
impl Classify for SyncError {
    fn kind(&self) -> ErrorKind {
        match self {
            SyncError::Source(e) => e.kind(),
            SyncError::Pipeline(e) => e.kind(),
            SyncError::Write(e) => e.kind(),
            SyncError::Queue(e) => e.kind(),
            SyncError::Catalog(e) => e.kind(),
            SyncError::Commit(e) => e.kind(),
            SyncError::Ledger(e) => e.kind(),
            SyncError::CommitFailed { source, .. } => source.kind(),
            SyncError::Table { .. } => ErrorKind::Config,
            SyncError::SlotLost { .. } => ErrorKind::Repair,
        }
    }
}

/// How a sync runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Namespace of the Iceberg tables.
    pub namespace: NamespaceIdent,
    /// Stop after this many batches (`None`: until caught up).
    pub max_batches: Option<usize>,
    /// Keep polling after catching up, waiting this long between empty reads.
    pub follow: Option<Duration>,
    /// While following, commit at most once per this interval unless a read
    /// fills `max_changes` (then at once, to keep up): changes gather in the
    /// slot meanwhile, so each table gets a few snapshots a minute, not one
    /// per poll.
    pub commit_interval: Duration,
    /// Start no batch that would likely end after this instant (the longest
    /// batch so far is the estimate): `--max-seconds`, a Lambda's deadline.
    pub deadline: Option<Instant>,
    /// The embedded pipeline's settings.
    pub ingest: IngestOptions,
    /// Read snapshot chunks through binary COPY into columns where the
    /// table takes them (the default); off, as text into changes, the
    /// path stream changes take.
    pub snapshot_columns: bool,
}

impl SyncOptions {
    /// Options for `namespace` with the defaults: until caught up, no deadline.
    pub fn new(namespace: NamespaceIdent) -> Self {
        Self {
            namespace,
            max_batches: None,
            follow: None,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
            deadline: None,
            ingest: IngestOptions {
                commit_window: Duration::from_millis(50),
                ..IngestOptions::default()
            },
            snapshot_columns: true,
        }
    }
}

/// The default pacing of commits while following a slot.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(15);

/// Why a run ended without an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The slot held nothing new.
    #[default]
    Empty,
    /// The snapshot is done and a read reached the end of the stream.
    CaughtUp,
    /// The next batch would not have finished before the deadline.
    Deadline,
    /// `max_batches` were committed.
    MaxBatches,
}

/// What a sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// Micro-batches committed.
    pub batches: usize,
    /// Change lines read (snapshot rows included).
    pub lines: usize,
    /// Of those, initial-snapshot rows.
    pub snapshot_rows: usize,
    /// Of those, rows read through binary COPY into columns.
    pub columnar_rows: usize,
    /// Change lines skipped because their table already held them.
    pub skipped: usize,
    /// Where the slot stands now.
    pub confirmed_lsn: Option<u64>,
    /// Every table's initial snapshot is done.
    pub snapshot_done: bool,
    /// Why the run ended.
    pub stop: Stop,
    /// Time spent in batches that copied snapshot chunks, and in the others.
    pub snapshot_time: Duration,
    /// Time spent in batches of stream changes only.
    pub stream_time: Duration,
    /// The longest batch, read to commit.
    pub longest_batch: Duration,
    /// Commit time in Postgres of the last transaction committed (ms since the epoch).
    pub last_source_commit_ms: Option<i64>,
    /// For the last batch: its Iceberg commit minus its last transaction's
    /// commit in Postgres.
    pub lag: Option<Duration>,
    /// What the pipeline did, summed.
    pub ingest: IngestReport,
}

/// Where a sync puts its batches: the embedded warehouse (`floe pg sync`) or
/// a deployment's catalog and storage (the pg-sync function). Either way a
/// batch is in its tables when `write` returns, which is what lets the slot
/// move on.
#[async_trait]
pub trait SyncTarget: Send + Sync {
    /// The catalog of the tables.
    fn catalog(&self) -> CatalogRef;
    /// Table settings (merge strategy, partitioning) by name.
    fn config(&self) -> &Config;
    /// Writes and commits `batches`, one per table.
    async fn write(
        &self,
        batches: Vec<SourceBatch>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, SyncError>;

    /// Compacts a table whose initial copy has just finished in chunks
    /// bounded by rows ([`PgSource::copy_wants_compaction`]): such a copy
    /// commits a small file per chunk (100 for a million rows at 10,000),
    /// which every scan pays for until maintenance runs. A copy in chunks
    /// bounded by bytes is not compacted: its files are large already, and
    /// compaction would write every row again. Best effort: a failure
    /// leaves the files to maintenance.
    async fn copied(&self, ident: &TableIdent, deadline: Option<Instant>) {
        match floe_core::maintain::compact_table(&self.catalog(), ident, deadline).await {
            Ok(r) => info!(
                table = %display(ident),
                files = r.compacted_files,
                rows = r.compacted_rows,
                left = r.compaction_left,
                "initial copy compacted"
            ),
            Err(e) => {
                warn!(table = %display(ident), error = %e, "could not compact the initial copy")
            }
        }
    }
}

#[async_trait]
impl SyncTarget for Embedded {
    fn catalog(&self) -> CatalogRef {
        Embedded::catalog(self)
    }

    fn config(&self) -> &Config {
        Embedded::config(self)
    }

    async fn write(
        &self,
        batches: Vec<SourceBatch>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, SyncError> {
        Ok(self.ingest_batches(batches, opts).await?)
    }
}

#[async_trait]
impl SyncTarget for Deployment {
    fn catalog(&self) -> CatalogRef {
        self.catalog.clone()
    }

    fn config(&self) -> &Config {
        &self.config
    }

    /// The writer step, then the committer step on an in-process queue: the
    /// deployment's SQS queue and committer function would commit later,
    /// and the slot may only move once the batch is in.
    async fn write(
        &self,
        batches: Vec<SourceBatch>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, SyncError> {
        let started = Instant::now();
        let queue = Arc::new(MemoryQueue::new());
        let writer = Writer::new(WriterParts {
            catalog: self.catalog.clone(),
            queue: queue.clone(),
            dead_letters: self.dead_letters.clone(),
            faults: self.faults.clone(),
            counters: self.counters.clone(),
            config: self.config.clone(),
        })?;
        let c = &self.counters;
        let before = [
            Counters::get(&c.records_committed),
            Counters::get(&c.commits),
        ];
        let mut report = IngestReport::default();
        for batch in batches {
            let w = writer.write(batch).await?;
            report.records_written += w.records;
            report.data_files += w.files as u64;
            report.rejected.extend(w.rejected);
            report.dead_letter_locations.extend(w.dead_letter_locations);
            report.created.extend(w.created);
            report.evolved.extend(w.evolved);
        }
        queue.close();
        let committer = self.committer();
        let max = opts.max_requests_per_commit.max(1);
        while let Some((commit, _)) = committer
            .drain_once(
                queue.as_ref(),
                max,
                Duration::ZERO,
                Duration::from_millis(10),
            )
            .await?
        {
            if let Some((table, Err(e))) = commit
                .tables
                .into_iter()
                .map(|t| (t.table, t.result))
                .find(|(_, r)| r.is_err())
            {
                return Err(SyncError::CommitFailed {
                    table,
                    source: Box::new(e),
                });
            }
        }
        report.records_committed = Counters::get(&c.records_committed) - before[0];
        report.commits = Counters::get(&c.commits) - before[1];
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

/// The Iceberg table a Postgres table goes to: its name in `namespace`,
/// prefixed by its schema outside `public`.
pub fn iceberg_table(namespace: &NamespaceIdent, table: &str) -> TableIdent {
    let t = TableName::parse(table);
    let name = if t.schema == "public" {
        t.name
    } else {
        format!("{}_{}", t.schema, t.name)
    };
    TableIdent::new(namespace.clone(), name)
}

/// What one Iceberg table holds of the source.
#[derive(Debug, Clone, Default)]
pub struct TableMarks {
    /// The slot position it holds (`floe.hwm.pg:<slot>`).
    pub mark: Option<u64>,
    /// Its initial-snapshot progress, when recorded.
    pub progress: Option<TableProgress>,
    /// Commit time in Postgres of the last transaction it holds.
    pub source_commit_ms: Option<i64>,
}

/// What each table holds of `pg:<slot>`, by `schema.table`, with its metadata
/// (`None` when the Iceberg table does not exist yet). The one place that
/// reads floe's ledger for the Postgres source.
async fn table_marks(
    catalog: &CatalogRef,
    slot: &str,
    tables: &[(String, TableIdent)],
) -> Result<BTreeMap<String, (TableMarks, Option<TableMetadata>)>, SyncError> {
    let source = format!("pg:{slot}");
    let store = std::sync::Arc::new(LedgerStore::new(catalog.file_io().clone()));
    let mut out = BTreeMap::new();
    for (pg, ident) in tables {
        let loaded = match catalog.load_table(ident).await {
            Ok(t) => t,
            Err(CatalogError::NoSuchTable { .. }) => {
                out.insert(pg.clone(), (TableMarks::default(), None));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let ledger = Ledger::open(store.clone(), &loaded.metadata).await?;
        let marks = TableMarks {
            mark: ledger
                .high_water_mark(&source)
                .await?
                .and_then(|p| p.as_str().parse::<u64>().ok()),
            progress: ledger
                .state(SNAPSHOT_STATE)
                .and_then(|text| serde_json::from_str::<TableProgress>(text).ok()),
            source_commit_ms: ledger
                .state(SOURCE_COMMIT_STATE)
                .and_then(|text| text.parse().ok()),
        };
        out.insert(pg.clone(), (marks, Some((*loaded.metadata).clone())));
    }
    Ok(out)
}

/// `(schema.table, Iceberg table)` for every configured table.
fn table_pairs(config: &PgConfig, namespace: &NamespaceIdent) -> Vec<(String, TableIdent)> {
    config
        .tables
        .iter()
        .map(|t| (TableName::parse(t).to_string(), iceberg_table(namespace, t)))
        .collect()
}

/// What each configured table holds of the slot, for `floe pg status`.
pub async fn marks(
    target: &dyn SyncTarget,
    config: &PgConfig,
    namespace: &NamespaceIdent,
) -> Result<BTreeMap<String, TableMarks>, SyncError> {
    let tables = table_pairs(config, namespace);
    Ok(table_marks(&target.catalog(), &config.slot, &tables)
        .await?
        .into_iter()
        .map(|(k, (m, _))| (k, m))
        .collect())
}

/// Connects to the source. A missing slot whose changes the tables already
/// hold means changes were lost, and says so instead of asking for a new
/// slot (which would silently skip them).
pub async fn open(
    target: &dyn SyncTarget,
    config: &PgConfig,
    namespace: &NamespaceIdent,
) -> Result<PgSource, SyncError> {
    match PgSource::connect(config.clone()).await {
        Ok(source) => Ok(source),
        Err(PgError::SlotMissing { slot }) => {
            let tables = table_pairs(config, namespace);
            let held = table_marks(&target.catalog(), &config.slot, &tables).await?;
            match lost_changes(&held) {
                Some((tables, held)) => Err(SyncError::SlotLost {
                    slot,
                    how: "does not exist any more (dropped)".into(),
                    tables,
                    held: format_lsn(held),
                }),
                None => Err(PgError::SlotMissing { slot }.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The tables whose changes a lost slot took with it, and the last position
/// they hold: tables with a mark and not re-snapshotting.
fn lost_changes(
    held: &BTreeMap<String, (TableMarks, Option<TableMetadata>)>,
) -> Option<(String, u64)> {
    let holding: Vec<(&String, u64)> = held
        .iter()
        .filter(|(_, (m, _))| {
            !matches!(
                m.progress,
                Some(TableProgress::Pending { restart: true, .. })
            )
        })
        .filter_map(|(t, (m, _))| m.mark.map(|mark| (t, mark)))
        .collect();
    let max = holding.iter().map(|(_, m)| *m).max()?;
    let names: Vec<&str> = holding.iter().map(|(t, _)| t.as_str()).collect();
    Some((names.join(", "), max))
}

/// Refuses to read from a slot that lost WAL the tables need: invalidated by
/// Postgres (`wal_status = lost`), or confirmed past everything the tables
/// hold (dropped and created again). floe advances the slot only after a
/// batch is in some table at that position, so in a healthy slot the
/// confirmed position never passes the highest mark.
fn check_slot(
    slot: &str,
    health: Option<&SlotHealth>,
    held: &BTreeMap<String, (TableMarks, Option<TableMetadata>)>,
) -> Result<(), SyncError> {
    let Some((tables, max)) = lost_changes(held) else {
        return Ok(());
    };
    let how = match health {
        None => Some("does not exist any more (dropped)".to_string()),
        Some(h) if h.is_lost() => Some(
            "was invalidated by Postgres (wal_status = lost: the server removed WAL it still \
             needed, past max_slot_wal_keep_size)"
                .to_string(),
        ),
        Some(h) => match h.confirmed_flush_lsn {
            Some(confirmed) if confirmed > max => Some(format!(
                "is at {}, past anything the tables hold (it was dropped and created again)",
                format_lsn(confirmed)
            )),
            _ => None,
        },
    };
    match how {
        Some(how) => Err(SyncError::SlotLost {
            slot: slot.to_string(),
            how,
            tables,
            held: format_lsn(max),
        }),
        None => Ok(()),
    }
}

/// Runs micro-batches until the source is caught up (or `max_batches`, or
/// the deadline, whichever comes first). The next run continues where this
/// one stopped, in the snapshot or the stream.
#[instrument(skip_all, fields(slot = %config.slot))]
pub async fn sync(
    target: &dyn SyncTarget,
    source: &mut PgSource,
    config: &PgConfig,
    opts: &SyncOptions,
) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport::default();
    let tables = table_pairs(config, &opts.namespace);
    prepare(target, source, config, &tables).await?;
    source.read_in_columns(&columnar(target.config(), &tables, opts.snapshot_columns));
    let mut ahead: Option<ReadAhead> = None;
    loop {
        if let Some(stop) = stop_before(opts, &report) {
            report.stop = stop;
            break;
        }
        let started = Instant::now();
        let held = table_marks(&target.catalog(), &config.slot, &tables).await?;
        let snapshot = held_progress(&held);
        let mut batch = match ahead.take().and_then(|a| a.read_for(&snapshot)) {
            Some(batch) => batch,
            None => {
                let state = SourceState {
                    committed_lsn: None,
                    snapshot: snapshot.clone(),
                };
                source.read_batch(&state).await?
            }
        };
        let changed = batch.line_count();
        let streamed = stream_changes(&batch);
        report.snapshot_done = batch.snapshot.is_done(&config.tables);
        if batch.is_empty() {
            if let Some(wait) = opts.follow {
                tokio::time::sleep(until_deadline(wait, opts.deadline)).await;
                continue;
            }
            report.stop = Stop::Empty;
            break;
        }
        let whole = batch.span(&config.slot);
        let id = batch_id(std::slice::from_ref(&whole), None);
        let mut parts = Parts::new(&config.slot, &whole, &id);
        let cut = Cut {
            tables: &tables,
            held: &held,
            snapshot: &snapshot,
        };
        cut.parts(target, &mut batch, &mut parts, &mut report)
            .await?;
        let read_ahead =
            reads_ahead(opts, &report, &batch, config, parts.chunked).then_some(streamed);
        let (ingested, next) =
            write_reading_ahead(target, source, parts.batches, &batch, opts, read_ahead).await;
        add(&mut report.ingest, ingested?);
        ahead = next;
        for (pg, ident) in &parts.copied {
            if source.copy_wants_compaction(pg) {
                target.copied(ident, opts.deadline).await;
            }
        }
        // Every table of the batch holds it now: the slot may forget it.
        source.advance(batch.last_lsn).await?;
        report.committed(&batch, changed, started.elapsed(), parts.chunked);
        floe_core::memory::release_freed_if_large();
        // Following and drained: let changes gather until the interval is up.
        if opts.follow.is_some() && batch.caught_up {
            let pause = opts.commit_interval.saturating_sub(started.elapsed());
            tokio::time::sleep(until_deadline(pause, opts.deadline)).await;
        }
        if opts.follow.is_none() && batch.caught_up && report.snapshot_done {
            // Without this a run beside a steady writer would never end.
            report.stop = Stop::CaughtUp;
            break;
        }
    }
    finish(source, report).await
}

/// Ends the run's replication session and reports where the slot stands.
async fn finish(source: &mut PgSource, mut report: SyncReport) -> Result<SyncReport, SyncError> {
    source.finish().await?;
    if report.confirmed_lsn.is_none() {
        report.confirmed_lsn = Some(source.confirmed_flush_lsn().await?);
    }
    Ok(report)
}

/// A batch read while the one before it was written and committed, and
/// the snapshot progress it was read from: that batch's, as its tables
/// were to hold it.
struct ReadAhead {
    state: SnapshotState,
    batch: PgBatch,
}

impl ReadAhead {
    /// The batch, when the tables hold the progress it was read from (the
    /// batch before went in as planned); else `None`, to read again. An
    /// empty one is read again too: its peek may not have reached past the
    /// batch before, so it says nothing of the stream's end.
    fn read_for(self, held: &SnapshotState) -> Option<PgBatch> {
        (&self.state == held && !self.batch.is_empty()).then_some(self.batch)
    }
}

/// Whether to read the next batch while this one is written: Postgres
/// decodes (and, during a copy, sends a chunk) on its own core while floe
/// writes. While a copy goes on, or when a run that drains the slot cut
/// this batch short of the stream's end (its peek decodes this batch's
/// changes again, which only pays when more wait behind them), and when the
/// run will take another.
fn reads_ahead(
    opts: &SyncOptions,
    report: &SyncReport,
    batch: &PgBatch,
    config: &PgConfig,
    chunked: bool,
) -> bool {
    let batches_left = opts.max_batches.is_none_or(|m| report.batches + 1 < m);
    let time_left = opts.deadline.is_none_or(|d| {
        d.saturating_duration_since(Instant::now()) > report.longest_batch.saturating_mul(2)
    });
    let more = if chunked {
        !batch.snapshot.is_done(&config.tables)
    } else {
        // A stream batch is caught up when its peek found the stream's end.
        // Following, a batch read ahead commits a whole write later than
        // one read after it: at a rate floe keeps up with, freshness lost
        // for nothing (p99 1.6 s -> 2.6 s at 60,000 changes/s).
        !batch.caught_up && opts.follow.is_none()
    };
    batches_left && time_left && more
}

/// Writes and commits `batches` (the parts of `batch`) and, with `ahead`
/// (the stream changes `batch` holds), reads the next batch meanwhile, as
/// the state `batch` commits will ask.
/// A failed read ahead is only logged: the next batch is read again.
async fn write_reading_ahead(
    target: &dyn SyncTarget,
    source: &mut PgSource,
    batches: Vec<SourceBatch>,
    batch: &PgBatch,
    opts: &SyncOptions,
    ahead: Option<usize>,
) -> (Result<IngestReport, SyncError>, Option<ReadAhead>) {
    let write = target.write(batches, &opts.ingest);
    let Some(held) = ahead else {
        return (write.await, None);
    };
    let state = SourceState {
        committed_lsn: None,
        snapshot: batch.snapshot.clone(),
    };
    let read = source.read_batch_after(&state, batch.last_lsn, held);
    let (written, read) = tokio::join!(write, read);
    let next = match read {
        Ok(next) => Some(ReadAhead {
            state: state.snapshot,
            batch: next,
        }),
        Err(e) => {
            info!(error = %e, "reading the next batch ahead failed; reading it again");
            None
        }
    };
    (written, next)
}

/// The changes `batch` read from the stream (its snapshot rows take no
/// room in the slot): counted before the batch is cut into its tables'
/// parts, which takes its changes.
fn stream_changes(batch: &PgBatch) -> usize {
    batch
        .tables
        .iter()
        .flat_map(|t| &t.changes)
        .filter(|c| c.op != ChangeOp::Read)
        .count()
}

/// Before the first batch: every table exists, and the slot still holds
/// what the tables do not (warning when Postgres may soon invalidate it).
async fn prepare(
    target: &dyn SyncTarget,
    source: &PgSource,
    config: &PgConfig,
    tables: &[(String, TableIdent)],
) -> Result<(), SyncError> {
    for (pg, ident) in tables {
        let schema = source.table_schema(pg).await?.iceberg_schema()?;
        ensure_table(target, ident, schema).await?;
    }
    let held = table_marks(&target.catalog(), &config.slot, tables).await?;
    let health = source.slot_health().await?;
    check_slot(&config.slot, health.as_ref(), &held)?;
    if let Some(h) = health
        .as_ref()
        .filter(|h| h.wal_status.as_deref() == Some("unreserved"))
    {
        warn!(
            lag_bytes = h.lag_bytes(),
            "slot is past max_slot_wal_keep_size: Postgres may invalidate it at the next checkpoint"
        );
    }
    Ok(())
}

/// Each table's initial-snapshot progress as the tables hold it, the
/// state the next batch is read from. A table whose copy has not started
/// and that holds no row is marked appending: its chunks replace nothing
/// until the stream adds a row ([`TableProgress::Pending`]).
fn held_progress(held: &BTreeMap<String, (TableMarks, Option<TableMetadata>)>) -> SnapshotState {
    let mut snapshot = SnapshotState::default();
    for (pg, (m, meta)) in held {
        match &m.progress {
            Some(p) => {
                snapshot.tables.insert(pg.clone(), p.clone());
            }
            None if meta.as_ref().is_some_and(holds_no_rows) => snapshot.empty_table(pg),
            None => {}
        }
    }
    snapshot
}

/// Whether the table has no data file: no snapshot yet, or a current one
/// whose summary counts none (a summary without the count says nothing).
fn holds_no_rows(meta: &TableMetadata) -> bool {
    meta.current_snapshot().is_none_or(|s| {
        s.summary()
            .additional_properties
            .get("total-data-files")
            .is_some_and(|n| n == "0")
    })
}

/// Evolves the table when its relation gained columns or widened a type
/// since (only then does it cost a schema commit).
async fn follow_relation(
    target: &dyn SyncTarget,
    ident: &TableIdent,
    meta: Option<&TableMetadata>,
    changes: &TableChanges,
) -> Result<(), SyncError> {
    let relation = changes.relation.iceberg_schema()?;
    if let Some(m) = meta
        && with_schema_changes(m, &relation, ident)?.is_some()
    {
        evolve(target, ident, &relation).await?;
    }
    Ok(())
}

/// The tables whose snapshot chunks the writer can take in columns: a
/// keyed table (every Postgres table is one) folds them after the changes,
/// but a changelog wants each change's row and a table ordered by
/// `order_changes_by` each change's own place, which read rows lack. None
/// when `on` is false.
fn columnar(config: &Config, tables: &[(String, TableIdent)], on: bool) -> Vec<String> {
    tables
        .iter()
        .filter(|_| on)
        .filter(|(_, ident)| {
            let settings = config.table(&display(ident));
            settings.changelog == floe_core::config::Changelog::Off
                && settings.order_changes_by.is_none()
        })
        .map(|(pg, _)| pg.clone())
        .collect()
}

/// Why the run stops before reading another batch, if it does: the batch
/// limit, or a deadline too close for a batch as long as the longest so far.
fn stop_before(opts: &SyncOptions, report: &SyncReport) -> Option<Stop> {
    if opts.max_batches.is_some_and(|m| report.batches >= m) {
        return Some(Stop::MaxBatches);
    }
    let deadline = opts.deadline?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() || left < report.longest_batch {
        info!(
            left_ms = left.as_millis() as u64,
            "stopping before the deadline"
        );
        return Some(Stop::Deadline);
    }
    None
}

/// `wait`, cut short to end by `deadline`.
fn until_deadline(wait: Duration, deadline: Option<Instant>) -> Duration {
    deadline
        .map(|d| wait.min(d.saturating_duration_since(Instant::now())))
        .unwrap_or(wait)
}

/// What a micro-batch is cut by: the configured tables and what each
/// holds.
struct Cut<'c> {
    tables: &'c [(String, TableIdent)],
    held: &'c BTreeMap<String, (TableMarks, Option<TableMetadata>)>,
    snapshot: &'c SnapshotState,
}

impl Cut<'_> {
    /// Adds each table's share of `batch` to `parts`, its schema evolved
    /// first when its relation grew. The writer takes the changes; the
    /// batch keeps its positions.
    async fn parts(
        &self,
        target: &dyn SyncTarget,
        batch: &mut PgBatch,
        parts: &mut Parts<'_>,
        report: &mut SyncReport,
    ) -> Result<(), SyncError> {
        for (pg, ident) in self.tables {
            let (marks, meta) = self.held.get(pg).cloned().unwrap_or_default();
            let changes = batch.tables.iter_mut().find(|c| &c.table == pg);
            if let Some(c) = &changes
                && marks.mark.is_none_or(|m| m < batch.last_lsn)
            {
                follow_relation(target, ident, meta.as_ref(), c).await?;
            }
            let taken = changes.map(|c| (std::mem::take(&mut c.changes), c.reads.take()));
            let part = TablePart {
                pg,
                ident,
                mark: marks.mark,
                held: self.snapshot.tables.get(pg),
            };
            parts.add(&part, batch, taken, report);
        }
        Ok(())
    }
}

/// One configured table's view of a micro-batch.
struct TablePart<'t> {
    pg: &'t String,
    ident: &'t TableIdent,
    /// The last LSN the table holds.
    mark: Option<u64>,
    /// Its snapshot progress as the table holds it.
    held: Option<&'t TableProgress>,
}

/// A micro-batch cut into source batches, one per table with something new.
struct Parts<'b> {
    /// The slot, the source's name.
    slot: &'b str,
    /// The span of the whole micro-batch.
    whole: &'b SourceSpan,
    /// The micro-batch's id, which each table's batch id derives from.
    id: &'b str,
    batches: Vec<SourceBatch>,
    /// Tables whose initial snapshot this batch completes.
    copied: Vec<(String, TableIdent)>,
    /// The batch copies snapshot rows or progress (its time counts as snapshot time).
    chunked: bool,
}

impl<'b> Parts<'b> {
    fn new(slot: &'b str, whole: &'b SourceSpan, id: &'b str) -> Self {
        Self {
            slot,
            whole,
            id,
            batches: Vec::new(),
            copied: Vec::new(),
            chunked: false,
        }
    }

    /// Adds `part`'s source batch: its lines the table does not hold yet,
    /// and its snapshot progress and source commit time as state.
    fn add(
        &mut self,
        part: &TablePart<'_>,
        batch: &PgBatch,
        taken: Option<(Vec<Change>, Option<Reads>)>,
        report: &mut SyncReport,
    ) {
        if part.mark.is_some_and(|m| m >= batch.last_lsn) {
            return;
        }
        let (changes, reads) = taken.unzip();
        let reads = reads.flatten();
        // Read at the high watermark, the batch's last position, which
        // the table does not hold yet (else the whole part is skipped above).
        if let Some(r) = &reads {
            report.lines += r.rows.num_rows();
            report.snapshot_rows += r.rows.num_rows();
            report.columnar_rows += r.rows.num_rows();
            self.chunked = true;
        }
        let mut items = Vec::new();
        for change in changes.unwrap_or_default() {
            report.lines += 1;
            let lsn = position_of(&change).unwrap_or(batch.last_lsn);
            if part.mark.is_some_and(|m| lsn <= m) {
                report.skipped += 1;
                continue;
            }
            if change.op == ChangeOp::Read {
                report.snapshot_rows += 1;
                self.chunked = true;
            }
            items.push(change);
        }
        let mut state = BTreeMap::new();
        let progress = batch.snapshot.tables.get(part.pg);
        if progress == Some(&TableProgress::Done) && part.held != Some(&TableProgress::Done) {
            self.copied.push((part.pg.clone(), part.ident.clone()));
        }
        if progress.is_some() && progress != part.held {
            let text = serde_json::to_string(&progress).unwrap_or_default();
            state.insert(SNAPSHOT_STATE.to_string(), text);
            self.chunked = true;
        }
        if items.is_empty() && state.is_empty() && reads.is_none() {
            return;
        }
        if let Some(ms) = batch.last_commit_ms {
            state.insert(SOURCE_COMMIT_STATE.to_string(), ms.to_string());
        }
        let first = items
            .first()
            .and_then(position_of)
            .unwrap_or(batch.last_lsn);
        let spans = vec![SourceSpan {
            positions: Positions::Range {
                first: Position::from(first),
                last: Position::from(batch.last_lsn),
            },
            ..self.whole.clone()
        }];
        self.batches.push(
            SourceBatch::new(
                Source::new(SourceKind::Postgres, self.slot),
                spans,
                match reads {
                    Some(reads) => Records::ChangesThenReads(items, reads),
                    None => Records::Changes(items),
                },
            )
            .with_id(sub_batch_id(self.id, &display(part.ident)))
            .to_table(Some(part.ident.clone()))
            .with_state(state)
            .oldest(batch.first_commit_ms),
        );
    }
}

impl PgBatch {
    /// The span of the whole micro-batch: the slot's LSNs it covers.
    fn span(&self, slot: &str) -> SourceSpan {
        SourceSpan {
            source: format!("pg:{slot}"),
            positions: Positions::Range {
                first: Position::from(self.first_lsn),
                last: Position::from(self.last_lsn),
            },
            stream: true,
        }
    }
}

impl SyncReport {
    /// Counts a committed micro-batch of `changed` changes that took `took`.
    fn committed(&mut self, batch: &PgBatch, changed: usize, took: Duration, chunked: bool) {
        self.batches += 1;
        self.confirmed_lsn = Some(batch.last_lsn);
        self.longest_batch = self.longest_batch.max(took);
        if chunked {
            self.snapshot_time += took;
        } else {
            self.stream_time += took;
        }
        let now_ms = floe_core::clock::now_ms();
        if let Some(ms) = batch.last_commit_ms {
            self.last_source_commit_ms = Some(ms);
            self.lag = Some(Duration::from_millis((now_ms - ms).max(0) as u64));
        }
        // The first and last transaction's commit times beside the commit's
        // own: how fresh each change of the batch is when it can be read.
        info!(
            batch = self.batches,
            changes = changed,
            lsn = %format_lsn(batch.last_lsn),
            ms = took.as_millis() as u64,
            committed_ms = now_ms,
            first_source_ms = batch.first_commit_ms.unwrap_or_default(),
            last_source_ms = batch.last_commit_ms.unwrap_or_default(),
            "batch committed; slot advanced"
        );
    }
}

/// Starts the initial snapshot of every table over: each table first
/// records a restarting snapshot (its first chunk truncates it), then the
/// slot is dropped and created afresh. Run after [`SyncError::SlotLost`];
/// safe to run again if it stops half-way, since the slot is recreated only
/// once every table is marked.
#[instrument(skip_all, fields(slot = %config.slot))]
pub async fn resync(
    target: &dyn SyncTarget,
    config: &PgConfig,
    opts: &SyncOptions,
) -> Result<(), SyncError> {
    let tables = table_pairs(config, &opts.namespace);
    let held = table_marks(&target.catalog(), &config.slot, &tables).await?;
    // Appending follows from the truncate that starts the first chunk.
    let restart = TableProgress::Pending {
        after: None,
        restart: true,
        appends: false,
    };
    let text = serde_json::to_string(&restart).unwrap_or_default();
    let mut batches = Vec::new();
    for (pg, ident) in &tables {
        let (marks, meta) = held.get(pg).cloned().unwrap_or_default();
        if meta.is_none() || marks.progress.as_ref() == Some(&restart) {
            // Nothing to replace, or already marked by an earlier attempt.
            continue;
        }
        // A position just past what the table holds: the ledger takes the
        // state, and every position of the new slot is later still.
        let at = Position::from(marks.mark.unwrap_or(0) + 1);
        let spans = vec![SourceSpan {
            source: format!("pg:{}", config.slot),
            positions: Positions::Range {
                first: at.clone(),
                last: at,
            },
            stream: true,
        }];
        batches.push(
            SourceBatch::new(
                Source::new(SourceKind::Postgres, &config.slot),
                spans,
                Records::Items(Vec::new()),
            )
            .pinned_to(b"resync")
            .to_table(Some(ident.clone()))
            .with_state(BTreeMap::from([(SNAPSHOT_STATE.to_string(), text.clone())])),
        );
    }
    target.write(batches, &opts.ingest).await?;
    crate::preflight::recreate_slot(config).await?;
    info!(
        tables = tables.len(),
        "slot recreated; every table re-snapshots on the next sync"
    );
    Ok(())
}

/// Creates the Iceberg table from the Postgres table's schema (primary key as
/// identifier fields) and the table's config section, unless it exists.
async fn ensure_table(
    target: &dyn SyncTarget,
    ident: &TableIdent,
    schema: Schema,
) -> Result<(), SyncError> {
    let catalog = target.catalog();
    match catalog.load_table(ident).await {
        Ok(_) => return Ok(()),
        Err(CatalogError::NoSuchTable { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let name = display(ident);
    let settings = target.config().table(&name);
    let creation = tabledef::configured_creation(ident.name(), schema, &settings).map_err(|e| {
        SyncError::Table {
            table: name.clone(),
            source: e.into(),
        }
    })?;
    catalog.ensure_namespace(ident.namespace()).await?;
    match catalog.create_table(ident, creation).await {
        Ok(_) => {
            info!(table = %name, "created from the Postgres table");
            Ok(())
        }
        Err(CatalogError::TableExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Adds the columns the Postgres table gained (ALTER TABLE … ADD COLUMN) and
/// widens the types it widened (ALTER COLUMN … TYPE), before rows carrying
/// them are written. A dropped column stays, null from then on.
async fn evolve(target: &dyn SyncTarget, ident: &TableIdent, pg: &Schema) -> Result<(), SyncError> {
    CommitEngine::new(target.catalog(), RetryPolicy::default())
        .update_schema(ident, |meta| {
            with_schema_changes(meta, pg, ident).ok().flatten()
        })
        .await?;
    Ok(())
}

/// The table's schema plus, as optional columns, those of `pg` it lacks, and
/// with the types `pg` widened (int→long, float→double, a larger decimal
/// precision); `None` when nothing changes. A type change Iceberg cannot
/// make is an error naming the column: its values would not fit.
fn with_schema_changes(
    meta: &TableMetadata,
    pg: &Schema,
    ident: &TableIdent,
) -> Result<Option<Schema>, SyncError> {
    let current = meta.current_schema();
    let mut schema = (**current).clone();
    for f in pg.as_struct().fields() {
        let Some(have) = current.field_by_name(&f.name) else {
            continue;
        };
        match (have.field_type.as_ref(), f.field_type.as_ref()) {
            (a, b) if a == b => {}
            (Type::Primitive(_), Type::Primitive(to)) => {
                schema = widen_column(&schema, &f.name, to).map_err(|reason| SyncError::Table {
                    table: display(ident),
                    source: format!(
                        "Postgres changed the type of column {:?} to one Iceberg cannot \
                         widen to: {reason}; fix: revert the column type, or drop the Iceberg \
                         table and run `floe pg resync` to copy it again with the new type",
                        f.name
                    )
                    .into(),
                })?;
            }
            _ => {}
        }
    }
    let mut next_id = meta.last_column_id();
    let added: Vec<_> = pg
        .as_struct()
        .fields()
        .iter()
        .filter(|f| current.field_by_name(&f.name).is_none())
        .map(|f| {
            next_id += 1;
            NestedField::optional(next_id, &f.name, (*f.field_type).clone()).into()
        })
        .collect();
    if added.is_empty() && schema.as_struct() == current.as_struct() {
        return Ok(None);
    }
    let mut fields = schema.as_struct().fields().to_vec();
    fields.extend(added);
    Schema::builder()
        .with_schema_id(current.schema_id())
        .with_identifier_field_ids(current.identifier_field_ids())
        .with_fields(fields)
        .build()
        .map(Some)
        .map_err(|e| SyncError::Table {
            table: display(ident),
            source: e.into(),
        })
}

/// The `_pos` of a change line.
/// The LSN a change sits at.
fn position_of(change: &Change) -> Option<u64> {
    change.position.as_deref()?.parse().ok()
}

fn add(sum: &mut IngestReport, r: IngestReport) {
    sum.records_in += r.records_in;
    sum.records_written += r.records_written;
    sum.records_committed += r.records_committed;
    sum.rejected.extend(r.rejected);
    sum.dead_letter_locations.extend(r.dead_letter_locations);
    sum.data_files += r.data_files;
    sum.requests += r.requests;
    sum.commits += r.commits;
    sum.snapshots += r.snapshots;
    sum.duplicates += r.duplicates;
    sum.created.extend(r.created);
    sum.evolved.extend(r.evolved);
    sum.elapsed += r.elapsed;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        let ns = NamespaceIdent::new("raw".into());
        assert_eq!(display(&iceberg_table(&ns, "orders")), "raw.orders");
        assert_eq!(
            display(&iceberg_table(&ns, "sales.orders")),
            "raw.sales_orders"
        );
    }
}
