//! `floe serve`'s buffer: POSTs without a key wait in a spool under the
//! warehouse (`_floe/http-buffer/`), answered once on disk, and this task
//! writes them a window at a time, one file per table per window, as the
//! writer function drains the Kinesis stream on AWS. A window's POSTs leave
//! the spool only once every table's batch is written and its commit
//! request enqueued; a failure, or a kill, leaves them for the next try,
//! which may hold other POSTs too: the table's ledger knows each record by
//! its name ([`super::buffer`]), so none is committed twice.

use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};

use super::HttpError;
use super::buffer::{self, Buffer};
use super::local::SpoolTask;
use crate::deploy::Deployment;
use crate::pipeline::Writer;
use crate::queue::{CommitQueue, Delivery, QueueError, SpoolQueue, gather_bounded};

/// The buffer's directory under the warehouse.
pub const BUFFER_DIR: &str = "_floe/http-buffer";
/// Most POSTs one window takes.
const MAX_POSTS: usize = 10_000;
/// Most bytes of POSTs one window takes (a POST is at most 1 MiB), so a
/// window's memory stays bounded however large the POSTs.
const MAX_WINDOW_BYTES: usize = 64 * 1024 * 1024;
/// How long the drain waits for a first POST before looking again.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// The longest pause after a window failed, before it is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The running drain and its spool.
pub struct LocalDrain {
    run: SpoolTask,
}

impl LocalDrain {
    /// Opens the buffer under `deployment`'s warehouse and writes its POSTs
    /// through the deployment's writer step (enqueueing to its queue),
    /// gathering POSTs for `window` after the first one arrives.
    pub async fn start(deployment: &Deployment, window: Duration) -> Result<Self, HttpError> {
        let writer = super::writer(deployment)?;
        let work = move |spool| run(writer, spool, window);
        let run = SpoolTask::start(deployment, BUFFER_DIR, work).await?;
        Ok(Self { run })
    }

    /// Where the HTTP API appends POSTs.
    pub fn buffer(&self) -> Arc<dyn Buffer> {
        self.run.spool.clone()
    }

    /// POSTs a previous process left in the buffer, written first.
    pub fn recovered(&self) -> usize {
        self.run.recovered
    }

    /// Where the buffer is.
    pub fn location(&self) -> String {
        self.run.spool.location()
    }

    /// Stops at once, as `kill -9` would: a window in flight is cut short
    /// and its POSTs stay for the next start.
    pub async fn kill(self) {
        self.run.kill().await;
    }

    /// Writes what the buffer holds (each waiting window gets one more
    /// try), then stops; returns how many POSTs stay buffered.
    pub async fn stop(self) -> Result<usize, HttpError> {
        Ok(self.run.stop().await?.pending())
    }
}

/// Writes windows until the spool is closed and drained. A window that
/// fails is tried again, with a growing pause, until it is written; once
/// the spool is closed, a failed window gets one more try and is then left
/// in the spool for the next start.
async fn run(writer: Writer, spool: Arc<SpoolQueue>, window: Duration) {
    loop {
        let gathered = gather_bounded(
            spool.as_ref(),
            (MAX_POSTS, MAX_WINDOW_BYTES),
            IDLE_WAIT,
            window,
        );
        let posts = match gathered.await {
            Ok(d) => d,
            Err(QueueError::Closed) => return,
            Err(e) => {
                error!(error = %e, "the HTTP buffer is unreadable; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if posts.is_empty() {
            continue;
        }
        let receipts: Vec<String> = posts.iter().map(|d| d.receipt.clone()).collect();
        let mut backoff = Duration::from_millis(100);
        let mut last_try = false;
        let done = loop {
            if write_window(&writer, &posts).await {
                break spool.ack(&receipts).await;
            }
            if last_try {
                break spool.release(&receipts).await;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            last_try = spool.is_closed();
        };
        if let Err(e) = done {
            // The POSTs stay in the spool: written again, committed once.
            warn!(error = %e, "the HTTP buffer did not take the window's outcome");
        }
    }
}

/// Writes one window's POSTs, a batch per table; false once one failed
/// (logged), and the whole window is tried again.
async fn write_window(writer: &Writer, posts: &[Delivery]) -> bool {
    let items = posts
        .iter()
        .map(|d| (d.receipt.clone(), d.body.clone()))
        .collect();
    let window = buffer::window(items);
    for (at, _) in &window.others {
        // Only the HTTP API appends here; nothing else can be in the spool.
        error!(spooled = %at, "not a buffered POST; left out");
    }
    for batch in window.batches {
        let table = batch
            .table
            .as_ref()
            .map(crate::ident::display)
            .unwrap_or_default();
        match writer.write(batch).await {
            Ok(report) => info!(
                %table,
                records = report.records,
                rejected = report.rejected.len(),
                "buffered records written and their commit request enqueued"
            ),
            Err(e) => {
                error!(%table, error = %e, "buffered records not written; the window is tried again");
                return false;
            }
        }
    }
    true
}
