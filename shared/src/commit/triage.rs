//! The first stage of an attempt: each request read against the table's
//! ledger as loaded. What the table holds in full is a duplicate (or, for a
//! batch of an earlier attempt whose answer was lost, ours); what it holds
//! in part is masked down to the records it lacks; what names files outside
//! the table, or files that are gone, is refused for good.

use std::collections::{HashMap, HashSet};

use tracing::{info, warn};

use super::error::CommitError;
use super::plan::{CommitOutcome, PlanContext, storage_err};
use super::{mask, trust};
use crate::ledger::{self, Ledger};
use crate::request::CommitRequest;

/// What a commit learns in one attempt and keeps for the next.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// Requests refused, with why: final, never looked at again.
    pub refused: HashMap<String, String>,
    /// Requests whose files passed the trust check (it reads storage once).
    trusted: HashSet<String>,
    /// Batches of an attempt whose answer was lost: the ledger of the next
    /// one decides whether they landed.
    pub maybe_landed: HashSet<String>,
}

/// A request as one attempt will commit it.
pub(super) struct Ready {
    pub request: CommitRequest,
    /// Which of its records the table already accounts for.
    pub claims: ledger::Claims,
    /// Files this attempt wrote for it (a masked request's rewritten files):
    /// discarded unless the attempt lands.
    pub written: Vec<String>,
    /// Files it makes redundant once it lands (a masked request's originals).
    pub obsolete: Vec<String>,
}

impl Ready {
    fn of(request: &CommitRequest, claims: ledger::Claims) -> Self {
        Self {
            request: request.clone(),
            claims,
            written: Vec::new(),
            obsolete: Vec::new(),
        }
    }
}

/// The requests as one attempt found them.
pub(super) struct Triaged {
    /// What the attempt commits, in request order.
    pub fresh: Vec<Ready>,
    /// What this attempt reports whatever it commits: duplicates, batches
    /// an earlier attempt landed, rows dropped by masking.
    pub outcome: CommitOutcome,
}

/// Why an attempt stopped before reaching the catalog.
pub(super) enum Stop {
    /// Reading the table's files failed: no failure if the table has moved
    /// on since it was loaded (see `swap::retry_if_moved`).
    Reread(CommitError),
    /// The commit fails.
    Fail(CommitError),
}

impl From<CommitError> for Stop {
    fn from(e: CommitError) -> Self {
        Stop::Fail(e)
    }
}

/// Reads `requests` against `ledger`: see the module doc. Keyed requests
/// are not masked here; they are resolved per key afterwards (`late`).
pub(super) async fn triage(
    memory: &mut Memory,
    ctx: &PlanContext<'_>,
    ledger: &Ledger,
    requests: &[CommitRequest],
    keyed: bool,
) -> Result<Triaged, Stop> {
    let mut triaged = Triaged {
        fresh: Vec::new(),
        outcome: CommitOutcome::default(),
    };
    let mut taken = ledger::Taken::default();
    for r in requests {
        if memory.refused.contains_key(&r.batch_id) {
            continue;
        }
        let Some(claims) = held(ledger, r, &taken).await.map_err(Stop::Reread)? else {
            let outcome = &mut triaged.outcome;
            if memory.maybe_landed.contains(&r.batch_id) {
                outcome.committed.push(r.batch_id.clone());
                outcome.records += r.record_count;
            } else {
                outcome.duplicates.push(r.batch_id.clone());
            }
            continue;
        };
        if !trusted(memory, ctx, r).await? {
            continue;
        }
        if claims.is_empty() || keyed {
            taken.take(r);
            triaged.fresh.push(Ready::of(r, claims));
            continue;
        }
        match mask::drop_claimed(ctx, r, &claims).await? {
            Ok(m) => {
                taken.take(r);
                info!(batch_id = %r.batch_id, dropped = m.dropped, "request overlaps records the table holds; committing the rest");
                triaged.outcome.rows_dropped += m.dropped;
                triaged.fresh.push(Ready {
                    request: m.request,
                    claims,
                    written: m.written,
                    obsolete: m.obsolete,
                });
            }
            Err(reason) => {
                memory.refused.insert(r.batch_id.clone(), reason);
            }
        }
    }
    Ok(triaged)
}

/// Whether `r`'s files may be committed, checked once per commit; a
/// request that fails is refused for good.
async fn trusted(
    memory: &mut Memory,
    ctx: &PlanContext<'_>,
    r: &CommitRequest,
) -> Result<bool, CommitError> {
    if memory.trusted.contains(&r.batch_id) {
        return Ok(true);
    }
    let check = trust::check(ctx.file_io, ctx.metadata(), r)
        .await
        .map_err(|e| storage_err(&ctx.table_name(), e))?;
    if let Some(reason) = check {
        warn!(batch_id = %r.batch_id, %reason, "commit request refused");
        memory.refused.insert(r.batch_id.clone(), reason);
        return Ok(false);
    }
    memory.trusted.insert(r.batch_id.clone());
    Ok(true)
}

/// What the table (its ledger) and the requests taken before `r` in the
/// same commit hold of `r`'s records: `None` when all of them.
async fn held(
    ledger: &Ledger,
    r: &CommitRequest,
    taken: &ledger::Taken,
) -> Result<Option<ledger::Claims>, CommitError> {
    if ledger.holds_batch(r).await? {
        return Ok(None);
    }
    if !r.per_record() {
        return Ok(Some(ledger::Claims { spans: Vec::new() }));
    }
    let claims = ledger.claims(r).await?.union(taken.claims(r));
    Ok(if claims.covers(r) { None } else { Some(claims) })
}

/// Keeps the first of requests that share a batch id (a message delivered twice
/// in one receive).
pub(super) fn dedup(requests: Vec<CommitRequest>) -> Vec<CommitRequest> {
    let mut seen = HashSet::new();
    requests
        .into_iter()
        .filter(|r| seen.insert(r.batch_id.clone()))
        .collect()
}
