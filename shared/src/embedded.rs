//! Embedded mode: the whole pipeline on one machine with no services. A local
//! warehouse directory, the SQLite catalog, an in-process commit queue, N
//! writer tasks and one committer task running the same steps as the Lambdas.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::{TableCreation, TableIdent};
use tokio::sync::{Mutex, mpsc};

use crate::catalog::{Catalog, CatalogError, CatalogRef, LoadedTable, SqliteCatalog};
use crate::commit::{CommitEngine, RetryPolicy};
use crate::dlq::{Rejected, StorageDeadLetters};
use crate::faults::Faults;
use crate::metrics::Counters;
use crate::ndjson::Chunker;
use crate::pipeline::{Committer, PipelineError, Records, SourceBatch, Writer};
use crate::queue::{MemoryQueue, QueueError};
use crate::shred::ShredOptions;
use crate::source::{Positions, SourceSpan, batch_id};
use crate::storage::{LocalWarehouse, StorageError};

/// Catalog name in the SQLite database (pyiceberg: `SqlCatalog("floe", …)`).
pub const CATALOG_NAME: &str = "floe";

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
    #[error("commit requests failed {MAX_RECEIVES} times; last error: {0}")]
    CommitFailed(String),
    /// A task panicked or was cancelled.
    #[error("task failed: {0}")]
    Task(String),
}

impl From<PipelineError> for EmbeddedError {
    fn from(e: PipelineError) -> Self {
        EmbeddedError::Pipeline(Box::new(e))
    }
}

/// How an embedded ingest runs.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Concurrent writer tasks.
    pub writers: usize,
    /// Records per source batch (one writer invocation, one commit request).
    pub batch_records: u64,
    /// How long the committer gathers requests after the first one arrives.
    pub commit_window: Duration,
    /// Most requests coalesced into one commit.
    pub max_requests_per_commit: usize,
    /// JSON matching options.
    pub shred: ShredOptions,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            writers: 2,
            batch_records: 100_000,
            commit_window: Duration::from_millis(500),
            max_requests_per_commit: 10_000,
            shred: ShredOptions::default(),
        }
    }
}

/// One input of an ingest.
pub struct Input {
    /// Its source name in positions and dead letters (`file:/abs/path`, `stdin`).
    pub source: String,
    /// Its bytes.
    pub reader: Box<dyn Read + Send>,
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
    /// Wall time.
    pub elapsed: Duration,
}

/// The embedded pipeline on one warehouse.
#[derive(Debug, Clone)]
pub struct Embedded {
    warehouse: LocalWarehouse,
    catalog: Arc<SqliteCatalog>,
    faults: Faults,
    /// Live counters, for progress display.
    pub counters: Arc<Counters>,
}

impl Embedded {
    /// Opens (creating if needed) the warehouse at `dir`.
    pub fn open(dir: &Path, faults: Faults) -> Result<Self, EmbeddedError> {
        let warehouse = LocalWarehouse::open(dir)?;
        let catalog = SqliteCatalog::open(
            CATALOG_NAME,
            &warehouse.catalog_db(),
            &warehouse.uri(),
            warehouse.file_io(),
            faults.clone(),
        )?;
        Ok(Self {
            warehouse,
            catalog: Arc::new(catalog),
            faults,
            counters: Arc::new(Counters::default()),
        })
    }

    /// The warehouse.
    pub fn warehouse(&self) -> &LocalWarehouse {
        &self.warehouse
    }

    /// The catalog.
    pub fn catalog(&self) -> CatalogRef {
        self.catalog.clone()
    }

    /// Creates a table.
    pub async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, EmbeddedError> {
        Ok(self.catalog.create_table(ident, creation).await?)
    }

    /// Ingests NDJSON inputs into a table; returns once every batch is in the
    /// table (or dead-lettered), so success here is the acknowledgement.
    pub async fn ingest(
        &self,
        table: &TableIdent,
        inputs: Vec<Input>,
        opts: &IngestOptions,
    ) -> Result<IngestReport, EmbeddedError> {
        let started = Instant::now();
        // Fail before reading anything when the table is missing.
        self.catalog.load_table(table).await?;
        let queue = Arc::new(MemoryQueue::new());
        let dead_letters = Arc::new(StorageDeadLetters::new(
            self.warehouse.file_io(),
            format!("{}/_floe/dlq", self.warehouse.uri()),
        ));
        let writer = Arc::new(Writer::new(
            self.catalog.clone(),
            queue.clone(),
            dead_letters,
            self.faults.clone(),
            self.counters.clone(),
            opts.shred.clone(),
        ));
        let committer = Committer::new(
            CommitEngine::new(self.catalog.clone(), RetryPolicy::default()),
            self.faults.clone(),
            self.counters.clone(),
        );
        let before = snapshot_counters(&self.counters);

        let commit_task = {
            let queue = queue.clone();
            let (max, window) = (opts.max_requests_per_commit, opts.commit_window);
            tokio::spawn(async move { commit_loop(&committer, &queue, max, window).await })
        };

        let (tx, rx) = mpsc::channel::<SourceBatch>(opts.writers.max(1) * 2);
        let rx = Arc::new(Mutex::new(rx));
        let mut writer_tasks = Vec::new();
        for _ in 0..opts.writers.max(1) {
            let (writer, rx) = (writer.clone(), rx.clone());
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

        let reader = {
            let (table, batch_records) = (table.clone(), opts.batch_records);
            let counters = self.counters.clone();
            tokio::task::spawn_blocking(move || {
                read_inputs(inputs, &table, batch_records, &tx, &counters)
            })
        };

        let mut report = IngestReport::default();
        let mut first_err: Option<EmbeddedError> = None;
        let read_result = reader.await.map_err(|e| EmbeddedError::Task(e.to_string()));
        for t in writer_tasks {
            match t.await {
                Ok(Ok(reports)) => {
                    for r in reports {
                        if let Some(loc) = r.dead_letter_location {
                            report.dead_letter_locations.push(loc);
                        }
                        report.rejected.extend(r.rejected);
                    }
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e.into());
                }
                Err(e) => {
                    first_err.get_or_insert(EmbeddedError::Task(e.to_string()));
                }
            }
        }
        queue.close();
        let commit_result = commit_task
            .await
            .map_err(|e| EmbeddedError::Task(e.to_string()));
        match read_result {
            Ok(Ok(())) => {}
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

        let after = snapshot_counters(&self.counters);
        let d = |i: usize| after[i] - before[i];
        report.records_in = d(0);
        report.records_written = d(1);
        report.records_committed = d(2);
        report.data_files = d(3);
        report.requests = d(4);
        report.commits = d(5);
        report.snapshots = d(6);
        report.duplicates = d(7);
        report.rejected.sort_by(|a, b| {
            (a.source.as_str(), line_of(&a.position))
                .cmp(&(b.source.as_str(), line_of(&b.position)))
        });
        report.elapsed = started.elapsed();
        Ok(report)
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

fn read_inputs(
    inputs: Vec<Input>,
    table: &TableIdent,
    batch_records: u64,
    tx: &mpsc::Sender<SourceBatch>,
    counters: &Counters,
) -> Result<(), EmbeddedError> {
    for input in inputs {
        let mut chunker = Chunker::new(input.reader, batch_records);
        loop {
            let chunk = chunker.next_chunk().map_err(|error| EmbeddedError::Input {
                source_name: input.source.clone(),
                error,
            })?;
            let Some(chunk) = chunk else { break };
            Counters::add(&counters.bytes_in, chunk.text.len() as u64);
            let spans = vec![SourceSpan {
                source: input.source.clone(),
                positions: Positions::Range {
                    first: chunk.first_line.into(),
                    last: chunk.last_line().into(),
                },
            }];
            // Lines of a file can be edited in place, so the content is part of the id.
            let id = batch_id(&spans, Some(&chunk.text));
            let batch = SourceBatch {
                table: table.clone(),
                batch_id: id,
                spans,
                records: Records::Ndjson(chunk),
            };
            if tx.blocking_send(batch).is_err() {
                // Writers stopped on an error, which the caller reports.
                return Ok(());
            }
        }
    }
    Ok(())
}

async fn commit_loop(
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
                .iter()
                .filter_map(|t| t.result.as_ref().err())
                .map(|e| e.to_string())
                .chain(report.unreadable.iter().map(|(_, e)| e.to_string()))
                .last()
                .unwrap_or_default();
            return Err(EmbeddedError::CommitFailed(last));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
