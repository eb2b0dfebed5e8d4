//! `floe serve`'s own committer, for a deployment without an SQS commit
//! queue: the HTTP API's writers enqueue to a [`SpoolQueue`] under the
//! warehouse, so a POST is answered only once its request is durable, and
//! this task commits what the spool holds (what a previous process left
//! first). It never stops on a failing table: each table commits on its
//! own, a request no retry can commit is dead-lettered with its reason, and
//! the others go back to the spool with a growing backoff; the
//! [`CommitWatch`] tells the HTTP answers why a table is not committing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::HttpError;
use super::watch::CommitWatch;
use crate::config::Location;
use crate::deploy::Deployment;
use crate::error::Failure;
use crate::pipeline::{CommitReport, Committer};
use crate::queue::spool::SPOOL_DIR;
use crate::queue::{CommitQueue, Delivery, QueueError, QueueRef, SpoolQueue, gather};

/// Most requests one commit run takes.
const MAX_REQUESTS: usize = 10_000;
/// How long the committer waits for a first request before looking again.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// Longest a run may take: a table still committing by then is cut short
/// and retried, so one slow table holds the others' next commits no longer.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

/// What was left when the committer stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    /// Requests still in the spool: durable, committed on the next start.
    pub queued: usize,
    /// Where the spool is.
    pub location: String,
    /// Tables whose last commit failed, with why.
    pub failing: Vec<(String, String)>,
}

/// A task working through a spool under the warehouse, as `floe serve`'s
/// committer and its buffer's drain do.
pub(super) struct SpoolTask {
    pub(super) spool: Arc<SpoolQueue>,
    task: JoinHandle<()>,
    /// What a previous process left in the spool when this one opened it.
    pub(super) recovered: usize,
}

impl SpoolTask {
    /// Opens the spool in `dir` under `deployment`'s warehouse and runs
    /// `work` on it.
    pub(super) async fn start<F>(
        deployment: &Deployment,
        dir: &str,
        work: impl FnOnce(Arc<SpoolQueue>) -> F,
    ) -> Result<Self, HttpError>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let spool = Arc::new(open_spool(deployment, dir).await?);
        let recovered = spool.pending();
        let task = tokio::spawn(work(spool.clone()));
        Ok(Self {
            spool,
            task,
            recovered,
        })
    }

    /// Stops at once, as `kill -9` would; returns once the task is gone, as
    /// a killed process is before the next one starts.
    pub(super) async fn kill(self) {
        self.task.abort();
        // Cancelled (or ended): either way it takes no further step.
        let _ = self.task.await;
    }

    /// Closes the spool and waits for the task to finish what it holds;
    /// what it could not stays in the spool (parked) for the next start.
    pub(super) async fn stop(self) -> Result<Arc<SpoolQueue>, HttpError> {
        self.spool.close();
        self.task.await.map_err(HttpError::Task)?;
        Ok(self.spool)
    }
}

/// The running committer, its spool and its watch.
pub struct LocalCommits {
    run: SpoolTask,
    watch: Arc<CommitWatch>,
}

impl LocalCommits {
    /// Opens the spool of `deployment`'s warehouse and starts committing it,
    /// gathering requests for `window` after the first one arrives.
    pub async fn start(deployment: &Deployment, window: Duration) -> Result<Self, HttpError> {
        let watch = Arc::new(CommitWatch::new());
        let committer = deployment.committer().dead_letter_uncommittable();
        let seen = watch.clone();
        let work = move |spool| run(committer, spool, seen, window);
        let run = SpoolTask::start(deployment, SPOOL_DIR, work).await?;
        Ok(Self { run, watch })
    }

    /// The queue the writers send to.
    pub fn queue(&self) -> QueueRef {
        self.run.spool.clone()
    }

    /// What the committer saw, for the HTTP answers.
    pub fn watch(&self) -> Arc<CommitWatch> {
        self.watch.clone()
    }

    /// Requests a previous process left in the spool, committed first.
    pub fn recovered(&self) -> usize {
        self.run.recovered
    }

    /// Where the spool is.
    pub fn location(&self) -> String {
        self.run.spool.location()
    }

    /// Stops at once, as `kill -9` would: a commit in flight is cut short
    /// and everything spooled stays for the next start.
    pub async fn kill(self) {
        self.run.kill().await;
    }

    /// Commits what it can of what is queued (each waiting request gets one
    /// more attempt), then stops; the rest stays in the spool.
    pub async fn stop(self) -> Result<Leftover, HttpError> {
        let spool = self.run.stop().await?;
        Ok(Leftover {
            queued: spool.pending(),
            location: spool.location(),
            failing: self.watch.failing_tables(),
        })
    }
}

/// The spool in `dir` under the deployment's warehouse.
async fn open_spool(deployment: &Deployment, dir: &str) -> Result<SpoolQueue, HttpError> {
    match deployment.config.warehouse_location().join(dir) {
        Location::Path(dir) => Ok(SpoolQueue::open_local(dir).await?),
        Location::Uri(uri) if uri.starts_with("file://") => {
            let dir = std::path::PathBuf::from(uri.trim_start_matches("file://"));
            Ok(SpoolQueue::open_local(dir).await?)
        }
        Location::Uri(prefix) => {
            let listed = deployment
                .lister
                .list(&prefix)
                .await
                .map_err(|e| QueueError::from(Failure::new(format!("listing {prefix}"), e)))?;
            let uris = listed.into_iter().map(|l| l.uri).collect();
            Ok(SpoolQueue::open_store(deployment.file_io.clone(), &prefix, uris).await?)
        }
    }
}

/// Commits runs until the spool is closed and drained.
async fn run(
    committer: Committer,
    spool: Arc<SpoolQueue>,
    watch: Arc<CommitWatch>,
    window: Duration,
) {
    loop {
        let deliveries = match gather(spool.as_ref(), MAX_REQUESTS, IDLE_WAIT, window).await {
            Ok(d) => d,
            Err(QueueError::Closed) => return,
            Err(e) => {
                error!(error = %e, "commit spool unreadable; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if deliveries.is_empty() {
            continue;
        }
        let deadline = Instant::now() + RUN_DEADLINE;
        let report = committer
            .commit_by(deliveries.clone(), Some(deadline))
            .await;
        observe(&watch, &report, &deliveries);
        // The spool's ack and release only log what they cannot do.
        let _ = spool.ack(&report.done()).await;
        let _ = spool.release(&report.failed()).await;
    }
}

/// Tells the watch what the run did to each table and batch.
fn observe(watch: &CommitWatch, report: &CommitReport, deliveries: &[Delivery]) {
    #[derive(Deserialize)]
    struct Named {
        batch_id: String,
    }
    let bodies: BTreeMap<&str, &[u8]> = deliveries
        .iter()
        .map(|d| (d.receipt.as_str(), &d.body[..]))
        .collect();
    for table in &report.tables {
        match &table.result {
            Ok(outcome) => {
                watch.committed(&table.table);
                for (id, reason) in &outcome.refused {
                    watch.dead_lettered(id, reason);
                }
                if !outcome.committed.is_empty() {
                    info!(table = %table.table, batches = outcome.committed.len(), records = outcome.records, "committed");
                }
            }
            Err(e) => {
                let ids: Vec<String> = table
                    .receipts
                    .iter()
                    .filter_map(|r| bodies.get(r.as_str()))
                    .filter_map(|b| serde_json::from_slice::<Named>(b).ok())
                    .map(|n| n.batch_id)
                    .collect();
                warn!(table = %table.table, requests = ids.len(), error = %e, "commit failed; the requests stay in the spool and are retried");
                watch.table_failed(&table.table, ids.iter().map(String::as_str), &e.to_string());
            }
        }
    }
}
