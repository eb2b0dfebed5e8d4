//! Embedded mode: the whole pipeline in one process. A local warehouse
//! directory and the SQLite catalog (or any deployment's catalog and storage,
//! [`Embedded::from_deployment`]), an in-process commit queue, N writer tasks
//! and one committer task running the same steps as the Lambdas.

mod dead_letters;
mod input;

pub use dead_letters::{DeadLetterFile, Replay};
pub use input::{Input, Unfinished};
use input::{Reader, Reading, one_batch};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use iceberg::{TableCreation, TableIdent};
use tokio::sync::{Mutex, mpsc};

use crate::catalog::{CatalogError, CatalogRef, LoadedTable};
use crate::commit::CommitEngine;
use crate::config::{Config, Location};
use crate::deploy::Deployment;
use crate::dlq::{Rejected, StorageDeadLetters};
use crate::error::{Classify, ErrorKind};
use crate::faults::Faults;
use crate::ident::display;
use crate::ledger::LedgerStore;
use crate::maintain::orphans::Lister;
use crate::metrics::Counters;
use crate::pipeline::{Committer, PipelineError, WriteReport, Writer, WriterParts};
use crate::queue::{MemoryQueue, QueueError, QueueRef};
use crate::rerun::Checkpoints;
use crate::source::SourceBatch;
use crate::storage::StorageError;

pub use crate::deploy::CATALOG_NAME;

/// Receives a message may take before the embedded committer gives up on it.
const MAX_RECEIVES: u32 = 5;

/// Why the embedded pipeline could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The warehouse directory.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The warehouse's parts could not be assembled.
    #[error(transparent)]
    Deploy(#[from] crate::deploy::DeployError),
    /// A pipeline step.
    #[error(transparent)]
    Pipeline(Box<PipelineError>),
    /// Reading an input.
    #[error("reading {source_name}: {error}")]
    Input {
        /// The input.
        source_name: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The commit queue.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Requests that kept failing to commit.
    #[error("commit requests failed {MAX_RECEIVES} times; last error: {last}")]
    CommitFailed {
        /// The last table's or request's error.
        #[source]
        last: Box<PipelineError>,
    },
    /// An input's checkpoint (what a rerun skips) could not be read or saved.
    #[error("reading {source_name}: {source}")]
    Checkpoint {
        /// The input.
        source_name: String,
        /// The checkpoint's error.
        source: crate::rerun::CheckpointError,
    },
    /// A task panicked or was cancelled.
    #[error("task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The dead-letter location could not be listed.
    #[error("listing dead letters: {0}")]
    List(#[source] StorageError),
    /// A dead-letter file could not be read or removed.
    #[error("dead-letter file {path}: {source}")]
    DeadLetter {
        /// The file.
        path: String,
        /// The storage error.
        source: Box<iceberg::Error>,
    },
    /// A dead-letter file is damaged: replaying it would not replay its records.
    #[error("dead-letter file {path}: {reason}")]
    DeadLetterFormat {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// What each part answers; an input or a dead-letter file that cannot be
/// read may read next time, one that is not a dead letter will not.
impl Classify for EmbeddedError {
    fn kind(&self) -> ErrorKind {
        match self {
            EmbeddedError::Storage(e) | EmbeddedError::List(e) => e.kind(),
            EmbeddedError::Catalog(e) => e.kind(),
            EmbeddedError::Deploy(e) => e.kind(),
            EmbeddedError::Pipeline(e) => e.kind(),
            EmbeddedError::Queue(e) => e.kind(),
            EmbeddedError::CommitFailed { last } => last.kind(),
            EmbeddedError::Input { .. }
            | EmbeddedError::Checkpoint { .. }
            | EmbeddedError::DeadLetter { .. } => ErrorKind::Service,
            EmbeddedError::Task(_) => ErrorKind::Interrupted,
            EmbeddedError::DeadLetterFormat { .. } => ErrorKind::Input,
        }
    }
}

impl From<PipelineError> for EmbeddedError {
    fn from(e: PipelineError) -> Self {
        EmbeddedError::Pipeline(Box::new(e))
    }
}

/// Input bytes per batch unless set: the 840-byte GitHub-shaped events
/// then come 20,000 a batch (681 MB peak RSS with two writers, against
/// 2.75 GB at 100,000), narrow records stay at the record limit.
pub const DEFAULT_BATCH_BYTES: u64 = 16 << 20;

/// How an embedded ingest runs.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Concurrent writer tasks.
    pub writers: usize,
    /// Records per source batch (one writer invocation, one commit request).
    pub batch_records: u64,
    /// Bytes of input per source batch, whichever of the two comes first:
    /// what bounds a writer's memory whatever the records' width.
    pub batch_bytes: u64,
    /// How long the committer gathers requests after the first one arrives.
    pub commit_window: Duration,
    /// Most requests coalesced into one commit.
    pub max_requests_per_commit: usize,
    /// Keep each input's batches in order (one writer per input), as keyed
    /// tables need; [`Embedded::ingest`] turns it on for them.
    pub preserve_order: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            writers: 2,
            batch_records: 100_000,
            batch_bytes: DEFAULT_BATCH_BYTES,
            commit_window: Duration::from_millis(500),
            max_requests_per_commit: 10_000,
            preserve_order: false,
        }
    }
}

/// What an ingest did.
#[derive(Debug, Clone, Default)]
pub struct IngestReport {
    /// Records read.
    pub records_in: u64,
    /// Records written to data files.
    pub records_written: u64,
    /// Records in the table after this run that this run put there.
    pub records_committed: u64,
    /// Dead-lettered records (all of them).
    pub rejected: Vec<Rejected>,
    /// Where they went.
    pub dead_letter_locations: Vec<String>,
    /// Data files written.
    pub data_files: u64,
    /// Commit requests enqueued.
    pub requests: u64,
    /// Catalog commits made.
    pub commits: u64,
    /// Snapshots added.
    pub snapshots: u64,
    /// Batches already in the table (a rerun of the same input), skipped.
    pub duplicates: u64,
    /// Inputs whose last line was not finished: read by a later run.
    pub unfinished: Vec<Unfinished>,
    /// Tables created on first write.
    pub created: Vec<String>,
    /// Schema changes made.
    pub evolved: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// The embedded pipeline on one warehouse.
#[derive(Debug, Clone)]
pub struct Embedded {
    /// The warehouse's URI (`file:///…`, `s3://…`).
    location: String,
    file_io: FileIO,
    lister: Lister,
    dead_letter_prefix: String,
    catalog: CatalogRef,
    /// One engine for every ingest, so a warm process keeps the keys and
    /// ledger it read instead of reading the table again on each call.
    engine: CommitEngine,
    config: Arc<Config>,
    faults: Faults,
    /// Live counters, for progress display.
    pub counters: Arc<Counters>,
}

impl Embedded {
    /// Opens (creating if needed) the warehouse at `dir` with default settings.
    pub fn open(dir: &Path, faults: Faults) -> Result<Self, EmbeddedError> {
        Self::with_config(dir, Config::default(), faults)
    }

    /// Opens the warehouse at `dir` with these settings (routing, table
    /// defaults): the deployment the config describes, with its warehouse
    /// and catalog made this directory's (one assembly for both, see
    /// [`Deployment::from_config`]).
    pub fn with_config(
        dir: &Path,
        mut config: Config,
        faults: Faults,
    ) -> Result<Self, EmbeddedError> {
        // As the catalog names it: created and canonical.
        let dir = crate::storage::LocalWarehouse::open(dir)?
            .root()
            .to_path_buf();
        config.warehouse.path = Some(dir.clone());
        config.warehouse.uri = None;
        config.catalog.kind = crate::config::CatalogType::Sqlite;
        let deployment = Deployment::embedded(config, faults, dir)?;
        Ok(Self::from_deployment(&deployment))
    }

    /// The pipeline on a deployment's catalog, storage and dead-letter
    /// location (Glue, REST, SQLite on S3 or local): what the functions
    /// would do, done in this process, committing straight to the catalog.
    pub fn from_deployment(deployment: &Deployment) -> Self {
        let config = deployment.config.clone();
        Self {
            location: location_uri(config.warehouse_location()),
            dead_letter_prefix: location_uri(config.dead_letter_location()),
            engine: deployment.engine(),
            file_io: deployment.file_io.clone(),
            lister: deployment.lister.clone(),
            catalog: deployment.catalog.clone(),
            config,
            faults: deployment.faults.clone(),
            counters: deployment.counters.clone(),
        }
    }

    /// Where dead letters go: `dead_letter.location`, else `<warehouse>/_floe/dlq`.
    pub fn dead_letter_prefix(&self) -> String {
        self.dead_letter_prefix.clone()
    }

    /// The warehouse's URI (`file:///…` or `s3://…`).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The same warehouse with `latency` added to every catalog commit, as a
    /// remote catalog would have (for the commit-regime benchmark).
    pub fn with_commit_latency(mut self, latency: Duration) -> Self {
        self.catalog = Arc::new(crate::delayed::Delayed::new(self.catalog, latency));
        self.engine = self.engine.with_catalog(self.catalog.clone());
        self
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The catalog.
    pub fn catalog(&self) -> CatalogRef {
        self.catalog.clone()
    }

    /// The ledger files of its tables, read through one cache.
    pub fn ledger_store(&self) -> Arc<LedgerStore> {
        self.engine.ledger_store().clone()
    }

    /// Creates a table.
    pub async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, EmbeddedError> {
        Ok(self.catalog.create_table(ident, creation).await?)
    }

    /// Ingests NDJSON inputs into `table` (or, with `None`, into the tables the
    /// configured routing picks per record); returns once every batch is in its
    /// table or dead-lettered, so success here is the acknowledgement.
    pub async fn ingest(
        &self,
        table: Option<&TableIdent>,
        inputs: Vec<Input>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, EmbeddedError> {
        self.ingest_to(table, inputs, opts, None).await
    }

    /// [`Embedded::ingest`], enqueueing the commit requests to `queue` (a
    /// deployment's SQS commit queue) for its committer instead of
    /// committing them here, when given: success then means written and
    /// enqueued, as a writer function's.
    pub async fn ingest_to(
        &self,
        table: Option<&TableIdent>,
        inputs: Vec<Input>,
        opts: &IngestOptions,
        queue: Option<QueueRef>,
    ) -> Result<IngestReport, EmbeddedError> {
        let (batch_records, batch_bytes) = (opts.batch_records, opts.batch_bytes);
        let checkpoints = Checkpoints::new(self.file_io.clone(), &self.location);
        let runtime = tokio::runtime::Handle::current();
        let batches = inputs.into_iter().map(|input| {
            let table = table.cloned();
            let (checkpoints, runtime) = (checkpoints.clone(), runtime.clone());
            Box::new(move |tx: &mpsc::Sender<SourceBatch>, counters: &Counters| {
                let read = Reading {
                    table,
                    batch_records,
                    batch_bytes,
                    checkpoints,
                    runtime,
                };
                read.input(input, tx, counters)
            }) as Reader
        });
        // Fail before reading anything when a named table is missing.
        let keyed = match table {
            Some(t) => match self.catalog.load_table(t).await {
                Ok(loaded) => loaded
                    .metadata
                    .current_schema()
                    .identifier_field_ids()
                    .next()
                    .is_some(),
                // A table the config declares is created on its first write;
                // it may be keyed, so keep order.
                Err(CatalogError::NoSuchTable { .. })
                    if self.config.routing.create && self.config.table(&display(t)).configured =>
                {
                    true
                }
                Err(e) => return Err(e.into()),
            },
            // Routed records may reach keyed tables.
            None => true,
        };
        let opts = IngestOptions {
            preserve_order: opts.preserve_order || keyed,
            ..opts.clone()
        };
        self.run(batches.collect(), &opts, queue).await
    }

    /// Ingests batches a source has already cut (a Postgres micro-batch, one
    /// per table); returns once each is in its table or dead-lettered.
    pub async fn ingest_batches(
        &self,
        batches: Vec<SourceBatch>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, EmbeddedError> {
        self.run(batches.into_iter().map(one_batch).collect(), opts, None)
            .await
    }

    /// Reads `readers` into the writers and commits what they write in
    /// process, or (with `remote`) enqueues the commit requests there; the
    /// first error of a writer, the reading or the committer fails it.
    async fn run(
        &self,
        readers: Vec<Reader>,
        opts: &IngestOptions,
        remote: Option<QueueRef>,
    ) -> Result<IngestReport, EmbeddedError> {
        let started = Instant::now();
        let queue = Arc::new(MemoryQueue::new());
        let (writer, committer) = self.pipeline(&queue, remote)?;
        let before = snapshot_counters(&self.counters);

        // Nothing reaches the in-process queue when requests go to a remote
        // one: the committer then finds it closed and empty.
        let commit_task = {
            let queue = queue.clone();
            let (max, window) = (opts.max_requests_per_commit, opts.commit_window);
            tokio::spawn(async move { commit_until_closed(&committer, &queue, max, window).await })
        };
        let (senders, writer_tasks) = spawn_writers(writer, opts);
        let reader = {
            let counters = self.counters.clone();
            tokio::task::spawn_blocking(move || {
                let mut unfinished = Vec::new();
                for (i, read) in readers.into_iter().enumerate() {
                    unfinished.extend(read(&senders[i % senders.len()], &counters)?);
                }
                Ok(unfinished)
            })
        };

        let mut report = IngestReport::default();
        let read_result = reader.await.map_err(EmbeddedError::Task);
        let (writes, mut first_err) = join_writers(writer_tasks).await;
        for r in writes {
            report.dead_letter_locations.extend(r.dead_letter_locations);
            report.rejected.extend(r.rejected);
            report.created.extend(r.created);
            report.evolved.extend(r.evolved);
        }
        queue.close();
        let commit_result = commit_task.await.map_err(EmbeddedError::Task);
        match read_result {
            Ok(Ok(unfinished)) => report.unfinished = unfinished,
            Ok(Err(e)) | Err(e) => {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = commit_result.and_then(|r| r) {
            first_err.get_or_insert(e);
        }
        if let Some(e) = first_err {
            return Err(e);
        }

        report.count(&before, &snapshot_counters(&self.counters));
        report.rejected.sort_by(|a, b| {
            (a.source.as_str(), line_of(&a.position))
                .cmp(&(b.source.as_str(), line_of(&b.position)))
        });
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// The writer and the committer of one ingest: the writer's requests go
    /// to `remote` when given, else to the in-process `queue`.
    fn pipeline(
        &self,
        queue: &Arc<MemoryQueue>,
        remote: Option<QueueRef>,
    ) -> Result<(Arc<Writer>, Committer), EmbeddedError> {
        let dead_letters = Arc::new(StorageDeadLetters::new(
            self.file_io.clone(),
            self.dead_letter_prefix(),
        ));
        let writer = Arc::new(Writer::new(WriterParts {
            catalog: self.catalog.clone(),
            queue: remote.unwrap_or_else(|| queue.clone() as QueueRef),
            dead_letters: dead_letters.clone(),
            faults: self.faults.clone(),
            counters: self.counters.clone(),
            config: self.config.clone(),
        })?);
        let committer = Committer::new(
            self.engine.clone(),
            dead_letters,
            self.faults.clone(),
            self.counters.clone(),
        )
        .with_table_concurrency(self.config.queue.table_concurrency());
        Ok((writer, committer))
    }
}

/// A writer task's reports, one per batch, or the error it stopped on.
type WriterTask = tokio::task::JoinHandle<Result<Vec<WriteReport>, PipelineError>>;

/// Starts `opts.writers` writer tasks and returns the lanes that feed them.
/// Batches of one input go to one writer when order matters (keyed tables),
/// as a Lambda processes one shard at a time; otherwise any idle writer
/// takes the next batch.
fn spawn_writers(
    writer: Arc<Writer>,
    opts: &IngestOptions,
) -> (Vec<mpsc::Sender<SourceBatch>>, Vec<WriterTask>) {
    let writers = opts.writers.max(1);
    let lanes = if opts.preserve_order { writers } else { 1 };
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..lanes {
        let (tx, rx) = mpsc::channel::<SourceBatch>(writers * 2);
        senders.push(tx);
        receivers.push(Arc::new(Mutex::new(rx)));
    }
    let mut writer_tasks = Vec::new();
    for w in 0..writers {
        let (writer, rx) = (writer.clone(), receivers[w % lanes].clone());
        writer_tasks.push(tokio::spawn(async move {
            let mut reports = Vec::new();
            loop {
                let next = rx.lock().await.recv().await;
                let Some(batch) = next else { break };
                reports.push(writer.write(batch).await?);
            }
            Ok::<_, PipelineError>(reports)
        }));
    }
    // Only the writers hold their lanes now: a writer that stops on an
    // error closes its lane, so the reader stops instead of blocking.
    drop(receivers);
    (senders, writer_tasks)
}

/// Waits for every writer task: all their reports, and the first error.
async fn join_writers(tasks: Vec<WriterTask>) -> (Vec<WriteReport>, Option<EmbeddedError>) {
    let mut writes = Vec::new();
    let mut first_err: Option<EmbeddedError> = None;
    for t in tasks {
        match t.await {
            Ok(Ok(reports)) => writes.extend(reports),
            Ok(Err(e)) => {
                first_err.get_or_insert(e.into());
            }
            Err(e) => {
                first_err.get_or_insert(EmbeddedError::Task(e));
            }
        }
    }
    (writes, first_err)
}

impl IngestReport {
    /// Sets the counts from the counters' change since `before`.
    fn count(&mut self, before: &[u64; 8], after: &[u64; 8]) {
        let d = |i: usize| after[i] - before[i];
        self.records_in = d(0);
        self.records_written = d(1);
        self.records_committed = d(2);
        self.data_files = d(3);
        self.requests = d(4);
        self.commits = d(5);
        self.snapshots = d(6);
        self.duplicates = d(7);
    }
}

/// A location as a URI FileIO reads: `file://` for a local path.
fn location_uri(location: Location) -> String {
    match location {
        Location::Uri(uri) => uri,
        Location::Path(p) => format!("file://{}", std::path::absolute(&p).unwrap_or(p).display()),
    }
}

fn line_of(position: &str) -> u64 {
    position
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn snapshot_counters(c: &Counters) -> [u64; 8] {
    [
        Counters::get(&c.records_in),
        Counters::get(&c.records_written),
        Counters::get(&c.records_committed),
        Counters::get(&c.data_files),
        Counters::get(&c.requests),
        Counters::get(&c.commits),
        Counters::get(&c.snapshots),
        Counters::get(&c.duplicates),
    ]
}

/// The in-process committer: drains `queue` in windows of up to `max`
/// requests until it is closed and empty, retrying failed commits; fails
/// once a request failed [`MAX_RECEIVES`] times (nothing is dropped: the
/// caller reports the error and the writers' files stay for a rerun).
pub async fn commit_until_closed(
    committer: &Committer,
    queue: &MemoryQueue,
    max: usize,
    window: Duration,
) -> Result<(), EmbeddedError> {
    loop {
        let Some((report, deliveries)) = committer
            .drain_once(queue, max, window, Duration::from_millis(200))
            .await?
        else {
            return Ok(());
        };
        let failed = report.failed();
        if failed.is_empty() {
            continue;
        }
        let exhausted = deliveries
            .iter()
            .any(|d| failed.contains(&d.receipt) && d.receive_count >= MAX_RECEIVES);
        if exhausted {
            let last = report
                .tables
                .into_iter()
                .filter_map(|t| t.result.err())
                .chain(report.unreadable.into_iter().map(|(_, e, _)| e))
                .last();
            if let Some(last) = last {
                return Err(EmbeddedError::CommitFailed {
                    last: Box::new(last),
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
