//! The commit queue between writers and the single committer: SQS in AWS, an
//! in-process queue when embedded, or files under the warehouse
//! ([`SpoolQueue`]) when what it holds must outlive the process. All give
//! at-least-once delivery with visibility timeouts; the committer's ledger
//! turns that into exactly once.
//! A deployment may shard it by table ([`ShardedQueue`]): one committer per
//! shard, each table's requests always on the same one.

mod memory;
pub mod shard;
pub mod spool;
#[cfg(feature = "aws")]
pub mod sqs;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::TableIdent;

use crate::error::{Classify, ErrorKind, Failure};
pub use memory::MemoryQueue;
pub use shard::{MAX_SHARDS, ShardedQueue, shard_of};
pub use spool::SpoolQueue;
#[cfg(feature = "aws")]
pub use sqs::{QueueDepth, SqsQueue};

/// A message handed to a consumer, invisible to others until acked or released.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Handle to ack or release this delivery.
    pub receipt: String,
    /// The message body (a serialised commit request).
    pub body: Bytes,
    /// How many times the message has been received, this time included.
    pub receive_count: u32,
}

/// Why a queue call failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The queue is closed and empty.
    #[error("commit queue is closed")]
    Closed,
    /// The queue service (SQS, the spool's files) failed, or answered what
    /// its protocol does not allow.
    #[error("commit queue: {0}")]
    Service(#[from] Failure),
    /// A sharded queue was asked to receive: each committer reads its own shard.
    #[error("a sharded commit queue only sends; each committer receives from its own shard")]
    SendOnly,
    /// A sharded queue needs 1 to [`MAX_SHARDS`] shards.
    #[error("a sharded commit queue needs 1 to {MAX_SHARDS} shards, got {found}")]
    Shards {
        /// How many it was given.
        found: usize,
    },
}

/// A queue set up wrongly (a sharded queue asked to receive, too many
/// shards) stays wrong; a service failing, or a queue closing, does not.
impl Classify for QueueError {
    fn kind(&self) -> ErrorKind {
        match self {
            QueueError::Service(_) => ErrorKind::Service,
            QueueError::Closed => ErrorKind::Interrupted,
            QueueError::SendOnly | QueueError::Shards { .. } => ErrorKind::Config,
        }
    }
}

/// A durable-enough queue of commit requests.
#[async_trait]
pub trait CommitQueue: Debug + Send + Sync {
    /// Enqueues a message; returns once the queue holds it.
    async fn send(&self, body: Bytes) -> Result<(), QueueError>;

    /// Enqueues `table`'s request: a sharded queue sends it to the table's
    /// shard without reading the body; a single queue just sends it.
    async fn send_to(&self, table: &TableIdent, body: Bytes) -> Result<(), QueueError> {
        let _ = table;
        self.send(body).await
    }

    /// Enqueues several messages; returns once the queue holds all of them.
    /// Queues with a batch call (SQS: 10 per call) override it.
    async fn send_batch(&self, bodies: Vec<Bytes>) -> Result<(), QueueError> {
        for body in bodies {
            self.send(body).await?;
        }
        Ok(())
    }

    /// Receives up to `max` messages, waiting up to `wait` for the first one.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;

    /// Deletes delivered messages: their requests are in the table.
    async fn ack(&self, receipts: &[String]) -> Result<(), QueueError>;

    /// Makes delivered messages visible again at once, for another attempt.
    async fn release(&self, receipts: &[String]) -> Result<(), QueueError>;
}

/// A shared queue handle.
pub type QueueRef = Arc<dyn CommitQueue>;

/// The requests of one committer run: up to `max`, the first waited for up
/// to `first_wait`, then whatever else arrives within `window` of it.
/// [`QueueError::Closed`] only when the first receive finds the queue
/// closed and drained; a close later ends the gathering.
pub async fn gather(
    queue: &dyn CommitQueue,
    max: usize,
    first_wait: Duration,
    window: Duration,
) -> Result<Vec<Delivery>, QueueError> {
    gather_bounded(queue, (max, usize::MAX), first_wait, window).await
}

/// [`gather`] that also stops once the bodies reach `limit.1` bytes (taking
/// at most [`GATHER_STEP`] messages a receive, so it overshoots by little).
pub async fn gather_bounded(
    queue: &dyn CommitQueue,
    limit: (usize, usize),
    first_wait: Duration,
    window: Duration,
) -> Result<Vec<Delivery>, QueueError> {
    let (max, max_bytes) = limit;
    let step = |n: usize| match max_bytes {
        usize::MAX => n,
        _ => n.min(GATHER_STEP),
    };
    let mut deliveries = queue.receive(step(max), first_wait).await?;
    let mut bytes: usize = deliveries.iter().map(|d| d.body.len()).sum();
    let started = std::time::Instant::now();
    while !deliveries.is_empty() && deliveries.len() < max && bytes < max_bytes {
        let left = window.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        match queue.receive(step(max - deliveries.len()), left).await {
            Ok(more) if more.is_empty() => break,
            Ok(more) => {
                bytes = bytes.saturating_add(more.iter().map(|d| d.body.len()).sum());
                deliveries.extend(more);
            }
            Err(QueueError::Closed) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(deliveries)
}

/// Messages a byte-bounded [`gather_bounded`] takes a receive.
pub const GATHER_STEP: usize = 100;
