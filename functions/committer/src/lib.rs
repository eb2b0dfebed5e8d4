//! floe's committer function: an SQS event of commit requests in (bodies or
//! claim-check references), floe's committer step over them (grouped by table,
//! coalesced, checked against each table's ledger, tables committed
//! concurrently), and a partial batch response out naming the messages of the
//! tables whose commit failed or did not finish before the invocation's
//! deadline, so SQS redelivers them instead of the whole batch timing out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use floe_core::clock::now_ms;
use floe_core::deploy::Deployment;
use floe_core::metrics::emf::{Emf, Unit};
use floe_core::pipeline::{CommitReport, Committer, PipelineError};
use floe_core::queue::{Delivery, QueueError, SqsQueue};
use tracing::{info, warn};

/// Why the function cannot start.
#[derive(Debug, thiserror::Error)]
pub enum CommitterError {
    /// The deployment has no SQS commit queue.
    #[error(
        "config: the committer function reads an SQS queue (with shards, its own); set queue.url (FLOE_QUEUE_URL)"
    )]
    NoQueue,
}

/// The committer function's state, kept across invocations of one instance.
pub struct CommitterFunction {
    committer: Committer,
    messages: Messages,
}

/// Where the event's message bodies come from.
enum Messages {
    /// The deployment's SQS queue: a body may be a claim check on S3.
    Sqs(Arc<SqsQueue>),
    /// An embedded deployment (no AWS): bodies are the requests themselves,
    /// so the handler runs on SQLite and a local warehouse, as in tests.
    Inline,
}

impl Messages {
    async fn delivery(
        &self,
        id: &str,
        body: &str,
        receive_count: u32,
    ) -> Result<Option<Delivery>, QueueError> {
        match self {
            Messages::Sqs(sqs) => sqs.event_delivery(id, body, receive_count).await,
            Messages::Inline => Ok(Some(Delivery {
                receipt: id.to_string(),
                body: body.to_string().into(),
                receive_count,
            })),
        }
    }

    async fn forget_claims(&self, receipts: &[String]) {
        if let Messages::Sqs(sqs) = self {
            sqs.forget_claims(receipts).await;
        }
    }
}

impl CommitterFunction {
    /// The function over a deployment with an SQS commit queue, or an
    /// embedded one (a local warehouse and SQLite, for tests).
    pub fn new(deployment: &Deployment) -> Result<Self, CommitterError> {
        let messages = match (&deployment.sqs, &deployment.aws) {
            (Some(sqs), _) => Messages::Sqs(sqs.clone()),
            (None, None) => Messages::Inline,
            (None, Some(_)) => return Err(CommitterError::NoQueue),
        };
        Ok(Self {
            committer: deployment.committer().dead_letter_uncommittable(),
            messages,
        })
    }

    /// Commits every request in the event, each table's before `deadline`
    /// ([`deadline_of`] the invocation). Lambda deletes the messages not
    /// named in the answer, so a message is named unless its request is in its
    /// table (committed now or found there by the ledger) or dead-lettered.
    /// Nothing fails the invocation as a whole: each message's fate is its own.
    pub async fn handle(&self, event: SqsEvent, deadline: Option<Instant>) -> SqsBatchResponse {
        let mut deliveries = Vec::with_capacity(event.records.len());
        let mut response = SqsBatchResponse::default();
        for m in event.records {
            let (Some(id), Some(body)) = (m.message_id, m.body) else {
                warn!("SQS record without messageId or body; skipped");
                continue;
            };
            let receive_count = m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            match self.messages.delivery(&id, &body, receive_count).await {
                Ok(Some(d)) => deliveries.push(d),
                // Its claim object went with an earlier commit of the same request.
                Ok(None) => info!(message_id = %id, "duplicate of a committed claim-check request"),
                Err(e) => {
                    warn!(message_id = %id, error = %e, "claim-check body unreadable; will retry");
                    response.add_failure(id);
                }
            }
        }
        let started = Instant::now();
        let report = self.committer.commit_by(deliveries, deadline).await;
        let latency = started.elapsed();
        self.messages.forget_claims(&report.done()).await;
        for receipt in report.failed() {
            response.add_failure(SqsQueue::message_of(&receipt));
        }
        emit(&report, latency.as_millis() as f64);
        response
    }
}

/// When every table's commit must be done: the invocation's deadline less
/// the time the answer and the claim-object cleanup after it take.
pub fn deadline_of(context: &lambda_runtime::Context) -> Option<Instant> {
    const ANSWER_MARGIN_MS: u64 = 3_000;
    let left = u64::try_from(i64::try_from(context.deadline).ok()? - now_ms()).ok()?;
    Some(Instant::now() + Duration::from_millis(left.saturating_sub(ANSWER_MARGIN_MS)))
}

fn emit(report: &CommitReport, latency_ms: f64) {
    for t in &report.tables {
        let mut emf = Emf::new()
            .dimension("function", "committer")
            .metric("commit_latency", Unit::Milliseconds, latency_ms)
            .property("table", t.table.as_str());
        emf = match &t.result {
            Ok(o) => {
                info!(table = %t.table, batch_ids = ?o.committed, duplicates = o.duplicates.len(), snapshots = ?o.snapshot_ids, "committed");
                if let Some(oldest) = t.oldest_ms.filter(|_| !o.committed.is_empty()) {
                    let freshness = (now_ms() - oldest).max(0);
                    emf = emf.metric("freshness", Unit::Milliseconds, freshness as f64);
                }
                emf.metric("requests_per_commit", Unit::Count, o.committed.len() as f64)
                    .metric("records", Unit::Count, o.records as f64)
                    .metric("files", Unit::Count, o.data_files as f64)
                    .metric("duplicates", Unit::Count, o.duplicates.len() as f64)
                    // Refused by the trust checks, or no retry could commit them.
                    .metric(
                        "dead_lettered_requests",
                        Unit::Count,
                        o.refused.len() as f64,
                    )
                    .metric(
                        "catalog_retries",
                        Unit::Count,
                        f64::from(o.attempts.saturating_sub(1)),
                    )
                    .metric("failed_commits", Unit::Count, 0.0)
            }
            Err(PipelineError::Deadline { .. }) => emf
                .metric("failed_commits", Unit::Count, 1.0)
                .metric("deadline_releases", Unit::Count, 1.0),
            Err(_) => emf.metric("failed_commits", Unit::Count, 1.0),
        };
        emf.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_leaves_time_to_answer() {
        let mut context = lambda_runtime::Context::default();
        context.deadline = u64::try_from(now_ms() + 10_000).unwrap();
        let left = deadline_of(&context)
            .unwrap()
            .saturating_duration_since(Instant::now());
        assert!(
            left <= Duration::from_millis(7_000) && left >= Duration::from_millis(6_000),
            "{left:?}"
        );
        // An invocation already past its deadline starts no commit.
        context.deadline = u64::try_from(now_ms() + 1_000).unwrap();
        let left = deadline_of(&context)
            .unwrap()
            .saturating_duration_since(Instant::now());
        assert_eq!(left, Duration::ZERO);
    }
}
