//! `floe bench tables`: one committer, or one per shard of the commit queue,
//! against many tables at a steady request rate on a slow catalog: how many
//! records each commit carries, how often each table gets a commit and how
//! fresh the data is, before and after concurrent table commits and with
//! shards (docs/benchmarks.md, "Many tables: concurrent commits and shards").
//!
//! What is real: the writers' routing to shards ([`ShardedQueue`]), the
//! committer step ([`Committer::commit_by`], with the run's deadline), the
//! commit engine and the SQLite catalog behind an injected commit latency.
//! What is emulated: the writers (each request names one data file: a hard
//! link of a real Parquet file of its table, so the committer checks and
//! commits a distinct file per request at no write cost, which keeps the
//! 2-core benchmark machine's CPU for the committers) and Lambda's SQS event
//! source mapping of each committer (one invocation at a time, up to
//! `--batch-size` messages or 6 MB of event, gathered for `--window-ms`
//! after the first, as `floe local` emulates it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use floe_core::catalog::CatalogRef;
use floe_core::clock::now_ms;
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::delayed::{Delayed, Landed};
use floe_core::dlq::StorageDeadLetters;
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::{self, display};
use floe_core::pipeline::{Committer, PipelineError, Writer, WriterParts};
use floe_core::queue::{CommitQueue, Delivery, MAX_SHARDS, MemoryQueue, QueueRef, ShardedQueue};
use floe_core::request::CommitRequest;
use floe_core::source::SourceKind;
use floe_core::source::{Positions, SourceSpan};
use floe_core::source::{Records, Source, SourceBatch};
use floe_core::tabledef;

use super::Rng;

use crate::out::outln;

/// Lambda hands a function at most 6 MB of event.
const MAX_EVENT_BYTES: usize = 6 * 1024 * 1024;

/// What an SQS record adds to its body in a Lambda event: message id,
/// receipt handle, attributes, MD5, source ARN and region (about 700 B).
const RECORD_ENVELOPE_BYTES: usize = 700;

/// The schema of the benchmark's tables.
const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":false,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

/// `floe bench tables`.
#[derive(Debug, Args)]
pub struct TablesArgs {
    /// Tables the requests are spread over (each request picks one at random).
    #[arg(long, default_value_t = 100)]
    tables: usize,
    /// Commit requests a second, over all tables.
    #[arg(long, default_value_t = 1_000)]
    rate: u64,
    /// Seconds requests arrive for.
    #[arg(long, default_value_t = 50)]
    seconds: u64,
    /// Seconds the committers have after the last request to commit the
    /// rest; what is still uncommitted then counts at its age.
    #[arg(long, default_value_t = 10)]
    drain_seconds: u64,
    /// Latency added to every catalog commit, ms (Glue ~320, Unity ~5,000).
    #[arg(long)]
    latency_ms: u64,
    /// Shards of the commit queue, one committer each.
    #[arg(long, default_value_t = 1)]
    shards: usize,
    /// Tables one committer run commits at once [default:
    /// queue.table_concurrency, 8]; 1 is the committer before concurrent
    /// table commits, one table after the other.
    #[arg(long)]
    table_concurrency: Option<usize>,
    /// Most messages per committer invocation (the module's committer_batch_size).
    #[arg(long, default_value_t = 10_000)]
    batch_size: usize,
    /// Batching window of the committer's event source, ms (the module's 5 s).
    #[arg(long, default_value_t = 5_000)]
    window_ms: u64,
    /// The committer function's timeout, s (the module's committer_timeout):
    /// its runs end 3 s before it, as the function's deadline does.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Records per request (rows of its one data file).
    #[arg(long, default_value_t = 10)]
    records: u64,
}

/// A table's request as the writer made it, and its data file on disk.
struct Template {
    ident: TableIdent,
    request: CommitRequest,
    file: PathBuf,
}

/// What the committers did, summed over shards.
#[derive(Debug, Default)]
struct Stats {
    /// Table commits that added a snapshot.
    commits: u64,
    /// Of those, the ones that landed while requests were still arriving.
    commits_while_arriving: u64,
    /// Requests committed.
    requests: u64,
    /// Records committed.
    records: u64,
    /// Request creation to its table's commit, ms.
    freshness: Vec<i64>,
    /// Committer invocations, and the time they took.
    runs: u64,
    run_ms: u64,
    /// Tables whose commit a run's deadline cut short (messages released).
    deadline_releases: u64,
    /// Tables whose commit failed otherwise.
    failures: u64,
}

/// The benchmark's shared state.
struct Shared {
    stats: Mutex<Stats>,
    /// Requests sent and not yet committed: batch id → creation, ms.
    outstanding: Mutex<HashMap<String, i64>>,
    landed: Landed,
    arriving: AtomicBool,
    sent: AtomicU64,
    bytes_sent: AtomicU64,
    arrivals_end_ms: AtomicU64,
}

/// Runs the benchmark: creates the tables and their template requests,
/// starts one committer per shard, sends requests for `--seconds`, waits
/// for the committers and prints the report.
pub async fn run(floe: &Embedded, a: TablesArgs) -> Result<()> {
    a.check()?;
    let concurrency = a
        .table_concurrency
        .unwrap_or_else(|| floe.config().queue.table_concurrency())
        .max(1);
    // Batch ids and sources of this run only: a second run on the same
    // warehouse is new data, not a redelivery.
    let run_id = format!("{}-{}", std::process::id(), now_ms());
    let templates = templates(floe, a.tables, a.records, &run_id).await?;

    let shared = Arc::new(Shared {
        stats: Mutex::default(),
        outstanding: Mutex::default(),
        landed: Landed::default(),
        arriving: AtomicBool::new(true),
        sent: AtomicU64::new(0),
        bytes_sent: AtomicU64::new(0),
        arrivals_end_ms: AtomicU64::new(u64::MAX),
    });
    let shards: Vec<Arc<MemoryQueue>> = (0..a.shards)
        .map(|_| Arc::new(MemoryQueue::new()))
        .collect();
    let sender = ShardedQueue::new(shards.iter().map(|q| q.clone() as QueueRef).collect())?;

    let started = Instant::now();
    let arrivals = Duration::from_secs(a.seconds);
    let hard_stop = started + arrivals + Duration::from_secs(a.drain_seconds);
    let committers = spawn_committers(floe, &a, concurrency, &shards, &shared, hard_stop);

    produce(
        &sender,
        &templates,
        &a,
        &run_id,
        &shared,
        started + arrivals,
    )
    .await?;
    let arrivals_end = now_ms();
    shared
        .arrivals_end_ms
        .store(u64::try_from(arrivals_end).unwrap_or(0), Ordering::SeqCst);
    shared.arriving.store(false, Ordering::SeqCst);
    for c in committers {
        c.await.context("committer task")??;
    }
    let ended = now_ms();
    let elapsed = started.elapsed();
    report(&a, concurrency, &shared, ended, elapsed)
}

impl TablesArgs {
    /// Refuses arguments outside what the benchmark can run.
    fn check(&self) -> Result<()> {
        anyhow::ensure!(self.tables >= 1, "--tables must be at least 1");
        anyhow::ensure!(self.rate >= 1, "--rate must be at least 1");
        anyhow::ensure!(
            (1..=MAX_SHARDS).contains(&self.shards),
            "--shards: 1 to {MAX_SHARDS}"
        );
        anyhow::ensure!(
            (1..=10_000).contains(&self.batch_size),
            "--batch-size: 1 to 10000"
        );
        anyhow::ensure!(self.records >= 1, "--records must be at least 1");
        Ok(())
    }
}

/// One committer task per shard, each behind its own event source mapping,
/// all committing through one catalog slowed by `--latency-ms`.
fn spawn_committers(
    floe: &Embedded,
    a: &TablesArgs,
    concurrency: usize,
    shards: &[Arc<MemoryQueue>],
    shared: &Arc<Shared>,
    hard_stop: Instant,
) -> Vec<tokio::task::JoinHandle<Result<()>>> {
    let catalog: CatalogRef = Arc::new(
        Delayed::new(floe.catalog(), Duration::from_millis(a.latency_ms))
            .noting(shared.landed.clone()),
    );
    let dead_letters = Arc::new(StorageDeadLetters::new(
        catalog.file_io().clone(),
        floe.dead_letter_prefix(),
    ));
    shards
        .iter()
        .map(|queue| {
            // One function per shard: its own engine and caches.
            let committer = Committer::new(
                CommitEngine::new(catalog.clone(), RetryPolicy::default()),
                dead_letters.clone(),
                Faults::none(),
                Arc::default(),
            )
            .with_table_concurrency(concurrency);
            let mapping = Mapping {
                queue: queue.clone(),
                batch_size: a.batch_size,
                window: Duration::from_millis(a.window_ms),
                timeout: Duration::from_secs(a.timeout_s),
                hard_stop,
            };
            let shared = shared.clone();
            tokio::spawn(async move { mapping.run(&committer, &shared).await })
        })
        .collect()
}

/// One template request per table, made by the real writer step, so the
/// requests sent are exactly what a writer sends but for their file.
async fn templates(
    floe: &Embedded,
    tables: usize,
    records: u64,
    run_id: &str,
) -> Result<Vec<Template>> {
    let idents = create_tables(floe, tables).await?;
    let mut by_table = write_each(floe, &idents, records, run_id).await?;
    idents
        .into_iter()
        .map(|ident| {
            let request = by_table
                .remove(&display(&ident))
                .with_context(|| format!("the writer made no request for {}", display(&ident)))?;
            let path = request
                .paths()
                .next()
                .and_then(|p| p.strip_prefix("file://"))
                .map(PathBuf::from)
                .with_context(|| {
                    format!(
                        "{}: the benchmark needs a local warehouse (--warehouse DIR)",
                        display(&ident)
                    )
                })?;
            anyhow::ensure!(
                request.data_files.len() == 1,
                "{}: expected one data file per request",
                display(&ident)
            );
            Ok(Template {
                ident,
                request,
                file: path,
            })
        })
        .collect()
}

/// The benchmark's tables `shards.t000`…, created unless an earlier run did.
async fn create_tables(floe: &Embedded, tables: usize) -> Result<Vec<TableIdent>> {
    let catalog = floe.catalog();
    let schema = tabledef::parse_schema(SCHEMA)?;
    let mut idents = Vec::with_capacity(tables);
    for t in 0..tables {
        let ident = ident::parse_table(&format!("shards.t{t:03}"))?;
        if catalog.load_table(&ident).await.is_err() {
            floe.create_table(
                &ident,
                tabledef::creation(
                    ident.name(),
                    schema.clone(),
                    Default::default(),
                    Default::default(),
                ),
            )
            .await?;
        }
        idents.push(ident);
    }
    Ok(idents)
}

/// Writes `records` records to each table through the real writer step onto
/// an in-memory queue, and returns the commit requests it sent, by table name.
async fn write_each(
    floe: &Embedded,
    idents: &[TableIdent],
    records: u64,
    run_id: &str,
) -> Result<HashMap<String, CommitRequest>> {
    let catalog = floe.catalog();
    let queue = Arc::new(MemoryQueue::new());
    let writer = Writer::new(WriterParts {
        catalog: catalog.clone(),
        queue: queue.clone(),
        dead_letters: Arc::new(StorageDeadLetters::new(
            catalog.file_io().clone(),
            floe.dead_letter_prefix(),
        )),
        faults: Faults::none(),
        counters: Arc::default(),
        config: Arc::new(floe.config().clone()),
    })?;
    for ident in idents {
        let items: Vec<(String, Bytes)> = (0..records)
            .map(|i| {
                let line = format!(r#"{{"id":{i},"v":"record {i} of {}"}}"#, display(ident));
                (format!("m{i}"), Bytes::from(line))
            })
            .collect();
        let spans = vec![SourceSpan {
            source: format!("sqs:bench-template-{run_id}"),
            positions: Positions::Ids {
                ids: items.iter().map(|(p, _)| p.clone()).collect(),
            },
            stream: false,
        }];
        writer
            .write(
                SourceBatch::new(
                    Source::new(SourceKind::Sqs, "bench"),
                    spans,
                    Records::Items(items),
                )
                .pinned_to(display(ident).as_bytes())
                .to_table(Some(ident.clone())),
            )
            .await?;
    }
    let mut by_table: HashMap<String, CommitRequest> = HashMap::new();
    for d in queue.receive(idents.len(), Duration::ZERO).await? {
        let request = CommitRequest::from_bytes(&d.body)?;
        by_table.insert(display(&request.table), request);
    }
    Ok(by_table)
}

/// Sends requests at `a.rate` a second until `until`, each for a table
/// picked at random, through the writers' sharded queue.
async fn produce(
    sender: &ShardedQueue,
    templates: &[Template],
    a: &TablesArgs,
    run_id: &str,
    shared: &Shared,
    until: Instant,
) -> Result<()> {
    let started = Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut positions = vec![0u64; templates.len()];
    let mut sent = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while Instant::now() < until {
        tick.tick().await;
        let due = (a.rate as f64 * started.elapsed().as_secs_f64()) as u64;
        while sent < due {
            let t = (rng.next() % templates.len() as u64) as usize;
            let first = positions[t];
            positions[t] += a.records;
            let (ident, body, id, created) =
                request(&templates[t], t, first, a.records, sent, run_id)?;
            if let Ok(mut out) = shared.outstanding.lock() {
                out.insert(id, created);
            }
            shared
                .bytes_sent
                .fetch_add(body.len() as u64, Ordering::Relaxed);
            sender.send_to(&ident, body).await?;
            sent += 1;
            shared.sent.store(sent, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Request `seq`: table `t`'s template with its own data file (a hard link
/// of the template's), batch id, positions `first..first+records` of the
/// table's own ordered source, and creation time.
fn request(
    template: &Template,
    t: usize,
    first: u64,
    records: u64,
    seq: u64,
    run_id: &str,
) -> Result<(TableIdent, Bytes, String, i64)> {
    let mut r = template.request.clone();
    let link = template
        .file
        .with_file_name(format!("bench-{run_id}-{seq}.parquet"));
    std::fs::hard_link(&template.file, &link)
        .with_context(|| format!("linking {}", link.display()))?;
    r.data_files[0]["file_path"] = serde_json::Value::String(format!("file://{}", link.display()));
    r.batch_id = format!("bench-{run_id}-{seq}");
    r.sources = vec![SourceSpan {
        source: format!("kafka:bench-{run_id}/{t}"),
        positions: Positions::Range {
            first: first.into(),
            last: (first + records - 1).into(),
        },
        stream: true,
    }];
    let now = now_ms();
    r.created_at_ms = now;
    r.oldest_record_ms = Some(now);
    let body = Bytes::from(r.to_bytes()?);
    Ok((template.ident.clone(), body, r.batch_id, now))
}

/// One committer's SQS event source mapping: one invocation at a time.
struct Mapping {
    queue: Arc<MemoryQueue>,
    batch_size: usize,
    window: Duration,
    timeout: Duration,
    hard_stop: Instant,
}

impl Mapping {
    /// Gathers and invokes until the requests stopped and its shard is
    /// empty, or the benchmark's end.
    async fn run(&self, committer: &Committer, shared: &Shared) -> Result<()> {
        while Instant::now() < self.hard_stop {
            let batch = self.gather().await?;
            if batch.is_empty() {
                // Every run acks or releases all it took: an empty receive
                // after the last request means this shard is drained.
                if !shared.arriving.load(Ordering::SeqCst) {
                    break;
                }
                continue;
            }
            let started = Instant::now();
            // The function's deadline, or the benchmark's end, whichever is first.
            let deadline =
                (started + self.timeout.saturating_sub(Duration::from_secs(3))).min(self.hard_stop);
            let report = committer.commit_by(batch, Some(deadline)).await;
            let took = started.elapsed();
            self.note(&report, shared, took);
            self.queue.ack(&report.done()).await?;
            self.queue.release(&report.failed()).await?;
        }
        Ok(())
    }

    /// A batch as Lambda's poller gathers one: the first message opens the
    /// window; it closes after `window`, at `batch_size` messages, or before
    /// the event would pass 6 MB.
    async fn gather(&self) -> Result<Vec<Delivery>> {
        let mut batch = self
            .queue
            .receive(self.batch_size.min(10), Duration::from_millis(200))
            .await?;
        if batch.is_empty() {
            return Ok(batch);
        }
        let opened = Instant::now();
        let mut bytes: usize = batch
            .iter()
            .map(|d| d.body.len() + RECORD_ENVELOPE_BYTES)
            .sum();
        let mut over = Vec::new();
        while batch.len() < self.batch_size && over.is_empty() {
            let left = self
                .window
                .saturating_sub(opened.elapsed())
                .min(self.hard_stop.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                break;
            }
            // SQS hands out at most 10 messages a receive.
            let n = (self.batch_size - batch.len()).min(10);
            for d in self.queue.receive(n, left).await? {
                let size = d.body.len() + RECORD_ENVELOPE_BYTES;
                if bytes + size > MAX_EVENT_BYTES || !over.is_empty() {
                    over.push(d.receipt);
                } else {
                    bytes += size;
                    batch.push(d);
                }
            }
        }
        // What did not fit waits for the next invocation.
        self.queue.release(&over).await?;
        Ok(batch)
    }

    /// Adds a run's outcome to the stats: freshness of each committed
    /// request is its table's commit time less its creation.
    fn note(&self, report: &floe_core::pipeline::CommitReport, shared: &Shared, took: Duration) {
        let landed = shared.landed.lock().map(|m| m.clone()).unwrap_or_default();
        let arrivals_end =
            i64::try_from(shared.arrivals_end_ms.load(Ordering::SeqCst)).unwrap_or(i64::MAX);
        let (Ok(mut stats), Ok(mut outstanding)) = (shared.stats.lock(), shared.outstanding.lock())
        else {
            return;
        };
        stats.runs += 1;
        stats.run_ms += took.as_millis() as u64;
        for t in &report.tables {
            match &t.result {
                Ok(o) => {
                    let Some(&at) = landed.get(&t.table).filter(|_| !o.snapshot_ids.is_empty())
                    else {
                        continue;
                    };
                    stats.commits += 1;
                    if at <= arrivals_end {
                        stats.commits_while_arriving += 1;
                    }
                    stats.records += o.records;
                    for id in &o.committed {
                        if let Some(created) = outstanding.remove(id) {
                            stats.requests += 1;
                            stats.freshness.push(at - created);
                        }
                    }
                }
                Err(PipelineError::Deadline { .. }) => stats.deadline_releases += 1,
                Err(_) => stats.failures += 1,
            }
        }
    }
}

/// The `p`-th percentile of sorted `v`.
fn percentile(v: &[i64], p: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn report(
    a: &TablesArgs,
    concurrency: usize,
    shared: &Shared,
    ended_ms: i64,
    elapsed: Duration,
) -> Result<()> {
    let stats = shared
        .stats
        .lock()
        .map_err(|_| anyhow::anyhow!("stats poisoned"))?;
    let outstanding = shared
        .outstanding
        .lock()
        .map_err(|_| anyhow::anyhow!("outstanding poisoned"))?;
    // Requests never committed count at their age when the benchmark ended:
    // a lower bound of their freshness, so the percentiles are too whenever
    // `uncommitted` reaches them.
    let mut all: Vec<i64> = stats.freshness.clone();
    all.extend(outstanding.values().map(|created| ended_ms - created));
    all.sort_unstable();
    let sent = shared.sent.load(Ordering::SeqCst);
    let minutes = a.seconds as f64 / 60.0;
    outln!(
        "{}",
        serde_json::json!({
            "tables": a.tables, "rate": a.rate, "seconds": a.seconds,
            "latency_ms": a.latency_ms, "shards": a.shards,
            "table_concurrency": concurrency, "batch_size": a.batch_size,
            "window_ms": a.window_ms, "records_per_request": a.records,
            "requests": sent, "committed": stats.requests,
            "uncommitted": outstanding.len(),
            "commits": stats.commits,
            "records_per_commit": stats.records as f64 / stats.commits.max(1) as f64,
            "requests_per_commit": stats.requests as f64 / stats.commits.max(1) as f64,
            "commits_per_table_per_minute":
                stats.commits_while_arriving as f64 / a.tables as f64 / minutes,
            "freshness_p50_ms": percentile(&all, 0.50),
            "freshness_p99_ms": percentile(&all, 0.99),
            "freshness_max_ms": all.last().copied().unwrap_or(0),
            "runs": stats.runs,
            "run_seconds_mean": stats.run_ms as f64 / 1000.0 / stats.runs.max(1) as f64,
            "deadline_releases": stats.deadline_releases,
            "failed_table_commits": stats.failures,
            "request_bytes": shared.bytes_sent.load(Ordering::SeqCst) / sent.max(1),
            "elapsed_s": elapsed.as_secs_f64(),
        })
    );
    Ok(())
}
