//! The committer step: a receive's worth of commit requests, grouped by table,
//! each table's requests coalesced by the commit engine. A failure is per table:
//! only that table's messages go back to the queue. A message that is no
//! commit request this build reads, or a request the engine refuses (files
//! outside its table, files that are gone, a late keyed request that cannot
//! be applied), goes to the dead-letter location with its reason and is then
//! acknowledged: never committed, never dropped unrecorded.
//!
//! Tables commit concurrently, up to `queue.table_concurrency` at once: each
//! table's commit is independent (its own catalog round trip, its own ledger
//! beside it), so a run over many tables takes about as long as its slowest
//! tables rather than their sum, while one table's requests still go through
//! one engine call in order. A run may have a deadline (a Lambda's remaining
//! time): a table whose commit cannot start, or does not finish, before it
//! hands its messages back instead of the whole run timing out, and the
//! ledger drops whatever of it did land when the messages come again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use iceberg::TableIdent;
use tracing::{Instrument, error, info_span, warn};

use super::PipelineError;
use crate::commit::row_delta::RowDelta;
use crate::commit::{CommitEngine, CommitOutcome};
use crate::dlq::{DeadLetters, RefusedRequest};
use crate::error::Classify;
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;
use crate::metrics::Counters;
use crate::queue::{CommitQueue, Delivery, QueueError};
use crate::request::CommitRequest;

/// What happened to one table's requests.
#[derive(Debug)]
pub struct TableCommitReport {
    /// The table.
    pub table: String,
    /// Its receipts.
    pub receipts: Vec<String>,
    /// When the oldest record of its requests reached its source (else when
    /// the oldest request was made), ms since epoch: freshness is the commit
    /// time minus this.
    pub oldest_ms: Option<i64>,
    /// The commit, or why it failed.
    pub result: Result<CommitOutcome, PipelineError>,
}

/// What a committer run did.
#[derive(Debug, Default)]
pub struct CommitReport {
    /// Per table.
    pub tables: Vec<TableCommitReport>,
    /// Messages that are not commit requests this build can read, with why
    /// and where they were dead-lettered (`None`: that failed too, so they
    /// go back to the queue).
    pub unreadable: Vec<(String, PipelineError, Option<String>)>,
}

impl CommitReport {
    /// Receipts whose requests are in their tables or in the dead-letter
    /// location: delete them from the queue.
    pub fn done(&self) -> Vec<String> {
        self.tables
            .iter()
            .filter(|t| t.result.is_ok())
            .flat_map(|t| t.receipts.iter().cloned())
            .chain(
                self.unreadable
                    .iter()
                    .filter(|(_, _, at)| at.is_some())
                    .map(|(r, _, _)| r.clone()),
            )
            .collect()
    }

    /// Receipts to hand back for another attempt.
    pub fn failed(&self) -> Vec<String> {
        self.tables
            .iter()
            .filter(|t| t.result.is_err())
            .flat_map(|t| t.receipts.iter().cloned())
            .chain(
                self.unreadable
                    .iter()
                    .filter(|(_, _, at)| at.is_none())
                    .map(|(r, _, _)| r.clone()),
            )
            .collect()
    }
}

/// The committer step.
#[derive(Debug, Clone)]
pub struct Committer {
    engine: CommitEngine,
    dead_letters: Arc<dyn DeadLetters>,
    faults: Faults,
    counters: Arc<Counters>,
    table_concurrency: usize,
    /// Whether requests no retry can commit are dead-lettered and acknowledged.
    dead_letter_uncommittable: bool,
}

/// One table's requests of a run, with the bodies to dead-letter refusals by.
struct TableRequests {
    ident: TableIdent,
    receipts: Vec<String>,
    requests: Vec<CommitRequest>,
    bodies: Vec<bytes::Bytes>,
}

impl Committer {
    /// A committer over this engine, dead-lettering to `dead_letters`.
    pub fn new(
        engine: CommitEngine,
        dead_letters: Arc<dyn DeadLetters>,
        faults: Faults,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            engine,
            dead_letters,
            faults,
            counters,
            table_concurrency: crate::config::DEFAULT_TABLE_CONCURRENCY,
            dead_letter_uncommittable: false,
        }
    }

    /// Dead-letters, with the reason, and acknowledges a table's requests
    /// when their commit fails in a way no retry cures (the table is gone,
    /// a request it cannot take), for a committer on a queue that would
    /// otherwise hand them back every run until its redrive policy sends
    /// them to its DLQ without the reason. In-process committers (the CLI,
    /// Postgres sync) leave them failed, so their run stops and says why.
    pub fn dead_letter_uncommittable(mut self) -> Self {
        self.dead_letter_uncommittable = true;
        self
    }

    /// Commits up to `n` tables of a run at once (at least one).
    pub fn with_table_concurrency(mut self, n: usize) -> Self {
        self.table_concurrency = n.max(1);
        self
    }

    /// Commits every request in `deliveries`, one engine call per table.
    pub async fn commit(&self, deliveries: Vec<Delivery>) -> CommitReport {
        self.commit_by(deliveries, None).await
    }

    /// [`Committer::commit`], with every table's commit started and finished
    /// before `deadline`: a table that cannot start in time, or has not
    /// finished by then, fails with [`PipelineError::Deadline`], so its
    /// messages go back to the queue while the other tables' are done.
    pub async fn commit_by(
        &self,
        deliveries: Vec<Delivery>,
        deadline: Option<Instant>,
    ) -> CommitReport {
        let mut report = CommitReport::default();
        let mut by_table: BTreeMap<String, TableRequests> = BTreeMap::new();
        for d in deliveries {
            match CommitRequest::from_bytes(&d.body) {
                Ok(req) => {
                    let entry =
                        by_table
                            .entry(display(&req.table))
                            .or_insert_with(|| TableRequests {
                                ident: req.table.clone(),
                                receipts: Vec::new(),
                                requests: Vec::new(),
                                bodies: Vec::new(),
                            });
                    entry.receipts.push(d.receipt);
                    entry.requests.push(req);
                    entry.bodies.push(d.body);
                }
                Err(e) => {
                    error!(receipt = %d.receipt, error = %e, "unreadable commit request; dead-lettering it");
                    let refused = RefusedRequest {
                        table: String::new(),
                        id: format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&d.body)),
                        reason: e.to_string(),
                        body: String::from_utf8_lossy(&d.body).into_owned(),
                    };
                    let at = match self.dead_letters.put_request(&refused).await {
                        Ok(at) => {
                            Counters::add(&self.counters.requests_dead_lettered, 1);
                            Some(at)
                        }
                        Err(dl) => {
                            warn!(error = %dl, "could not dead-letter an unreadable message; it goes back to the queue");
                            None
                        }
                    };
                    report.unreadable.push((d.receipt, e.into(), at));
                }
            }
        }
        let mut tables: Vec<TableCommitReport> = futures::stream::iter(by_table)
            .map(|(table, group)| {
                let span = info_span!("table_commit", %table);
                self.commit_group(table, group, deadline).instrument(span)
            })
            .buffer_unordered(self.table_concurrency)
            .collect()
            .await;
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        report.tables = tables;
        report
    }

    /// One table's requests, within `deadline`.
    async fn commit_group(
        &self,
        table: String,
        group: TableRequests,
        deadline: Option<Instant>,
    ) -> TableCommitReport {
        let TableRequests {
            ident,
            receipts,
            requests,
            bodies,
        } = group;
        let oldest_ms = requests
            .iter()
            .map(|r| r.oldest_record_ms.unwrap_or(r.created_at_ms))
            .min();
        let ids: Vec<String> = requests.iter().map(|r| r.batch_id.clone()).collect();
        let result = {
            let commit = self.commit_table(&table, &ident, requests, &bodies);
            match deadline {
                // It waited for a slot past the deadline: nothing of it started.
                Some(d) if Instant::now() >= d => Err(PipelineError::Deadline {
                    table: table.clone(),
                    started: false,
                }),
                // Cut short, the commit may still have landed: the ledger finds
                // it when the released messages come again.
                Some(d) => tokio::time::timeout_at(d.into(), commit)
                    .await
                    .unwrap_or_else(|_| {
                        Err(PipelineError::Deadline {
                            table: table.clone(),
                            started: true,
                        })
                    }),
                None => commit.await,
            }
        };
        let result = match result {
            Err(e) if self.dead_letter_uncommittable && !e.is_transient() => {
                self.dead_letter_all(&table, &ids, &bodies, e).await
            }
            other => other,
        };
        if let Err(e) = &result {
            warn!(%table, error = %e, "table commit failed; its requests go back to the queue");
        }
        TableCommitReport {
            table,
            receipts,
            oldest_ms,
            result,
        }
    }

    /// Dead-letters every request of a table whose commit failed in a way no
    /// retry cures (the table dropped, a request it cannot take): left in
    /// the queue they would fail each run until its redrive policy, and
    /// reach its DLQ without the reason. Acknowledged once all are stored.
    async fn dead_letter_all(
        &self,
        table: &str,
        ids: &[String],
        bodies: &[bytes::Bytes],
        error: PipelineError,
    ) -> Result<CommitOutcome, PipelineError> {
        let reason = error.to_string();
        error!(%table, %reason, requests = ids.len(), "no retry can commit these requests");
        let refused: Vec<(String, String)> =
            ids.iter().map(|id| (id.clone(), reason.clone())).collect();
        self.dead_letter_refused(table, &refused, ids, bodies)
            .await?;
        Ok(CommitOutcome {
            refused,
            ..Default::default()
        })
    }

    /// Stores each refused request (batch id, reason) with its message body
    /// (found by its position in `ids`) in the dead-letter location.
    async fn dead_letter_refused(
        &self,
        table: &str,
        refused: &[(String, String)],
        ids: &[String],
        bodies: &[bytes::Bytes],
    ) -> Result<(), PipelineError> {
        for (batch_id, reason) in refused {
            error!(%table, %batch_id, %reason, "refused commit request; dead-lettering it");
            let body = ids
                .iter()
                .position(|id| id == batch_id)
                .and_then(|i| bodies.get(i))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            self.dead_letters
                .put_request(&RefusedRequest {
                    table: table.to_string(),
                    id: batch_id.clone(),
                    reason: reason.clone(),
                    body,
                })
                .await?;
        }
        Counters::add(&self.counters.requests_dead_lettered, refused.len() as u64);
        Ok(())
    }

    async fn commit_table(
        &self,
        table: &str,
        ident: &TableIdent,
        requests: Vec<CommitRequest>,
        bodies: &[bytes::Bytes],
    ) -> Result<CommitOutcome, PipelineError> {
        let keyed = requests.iter().any(|r| r.keyed);
        let ids: Vec<String> = requests.iter().map(|r| r.batch_id.clone()).collect();
        let outcome = if keyed {
            self.engine.commit(ident, requests, &RowDelta).await?
        } else {
            self.engine.append(ident, requests).await?
        };
        // Refused requests are acknowledged with the rest of the table's
        // messages, so they must be in the dead-letter location first.
        self.dead_letter_refused(table, &outcome.refused, &ids, bodies)
            .await?;
        let c = &self.counters;
        Counters::add(&c.rows_dropped, outcome.rows_dropped);
        if !outcome.snapshot_ids.is_empty() {
            Counters::add(&c.commits, 1);
        }
        Counters::add(&c.snapshots, outcome.snapshot_ids.len() as u64);
        Counters::add(&c.batches_committed, outcome.committed.len() as u64);
        Counters::add(&c.records_committed, outcome.records);
        Counters::add(&c.duplicates, outcome.duplicates.len() as u64);
        Counters::add(
            &c.commit_retries,
            u64::from(outcome.attempts.saturating_sub(1)),
        );
        self.faults
            .hit(FaultPoint::AfterCommit)
            .map_err(|source| PipelineError::Fault {
                table: table.to_string(),
                batch_id: outcome.committed.join(","),
                source,
            })?;
        Ok(outcome)
    }

    /// Receives from `queue` for up to `window` after the first message (or until
    /// `max` messages), commits them, then deletes the committed messages and
    /// releases the failed ones. `Ok(None)` when the queue is closed and drained.
    pub async fn drain_once(
        &self,
        queue: &dyn CommitQueue,
        max: usize,
        window: Duration,
        idle_wait: Duration,
    ) -> Result<Option<(CommitReport, Vec<Delivery>)>, QueueError> {
        let deliveries = match crate::queue::gather(queue, max, idle_wait, window).await {
            Ok(d) => d,
            Err(QueueError::Closed) => return Ok(None),
            Err(e) => return Err(e),
        };
        let report = self.commit(deliveries.clone()).await;
        queue.ack(&report.done()).await?;
        queue.release(&report.failed()).await?;
        Ok(Some((report, deliveries)))
    }
}
