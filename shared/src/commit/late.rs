//! Keyed requests applied per key in source order, whenever they arrive.
//! A keyed request whose source committed newer changes meanwhile (its
//! commit failed and came back after later ones, a standard queue reordered
//! it, a second poller took it) contributes only its changes to keys no
//! newer change touched: the table ends as if every change had been applied
//! in source order. The same holds between requests of one commit whose
//! positions interleave (DynamoDB Streams shards in one event).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tracing::{info, warn};

use super::error::CommitError;
use super::plan::{CommitOutcome, PlanContext, discard};
use super::triage::Ready;
use super::{mask, row_delta};
use crate::ledger::{Claims, KeyChanges, Ledger};
use crate::request::CommitRequest;
use crate::source::Positions;

/// What a keyed request may still do.
#[derive(Debug, Clone, PartialEq)]
pub enum Late {
    /// Everything: nothing newer touched its keys.
    OnTime,
    /// Everything but its changes to these keys (digests), which the table
    /// already holds or newer committed changes superseded; `all` when that
    /// is every key it changes. `truncated`: its TRUNCATE is in the table
    /// already and must not be applied again.
    Superseded {
        /// The superseded keys.
        keys: HashSet<u128>,
        /// They are all the request changes.
        all: bool,
        /// Its TRUNCATE was applied before.
        truncated: bool,
    },
    /// Nothing can be applied safely; dead-letter it with why.
    Refused(String),
}

/// Keyed requests of one attempt, in source order, each with what it may
/// still do: what newer committed changes (or requests of this commit that
/// go first) superseded is masked away, what cannot be applied safely is
/// refused (added to `refused`) and its files discarded.
pub(super) async fn apply(
    ctx: &PlanContext<'_>,
    ledger: &Ledger,
    mut fresh: Vec<Ready>,
    refused: &mut HashMap<String, String>,
    outcome: &mut CommitOutcome,
) -> Result<Vec<Ready>, CommitError> {
    fresh.sort_by_key(|r| row_delta::order_key(&r.request));
    let mut out: Vec<Ready> = Vec::with_capacity(fresh.len());
    for mut r in fresh {
        let before: Vec<&CommitRequest> = out.iter().map(|o| &o.request).collect();
        match resolve(ledger, &r.request, &r.claims, &before).await? {
            Late::OnTime => out.push(r),
            Late::Refused(reason) => {
                warn!(batch_id = %r.request.batch_id, %reason, "late keyed request refused");
                discard(ctx.file_io, &r.written).await;
                refused.insert(r.request.batch_id.clone(), reason);
            }
            Late::Superseded {
                keys,
                all,
                truncated,
            } => {
                let mut m = mask::drop_keys(ctx, &r.request, &keys).await?;
                info!(batch_id = %r.request.batch_id, keys = keys.len(), truncated, "keyed request: the table holds some of its changes already, or newer ones");
                if truncated {
                    m.request.truncate = false;
                }
                outcome.rows_dropped += m.dropped;
                if all && !m.request.truncate && m.request.state.is_empty() {
                    outcome.superseded.push(m.request.batch_id.clone());
                }
                r.written.extend(m.written);
                r.obsolete.extend(m.obsolete);
                r.request = m.request;
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Decides what `request` may do, given the ledger, which of its records
/// the table already accounts for (`claims`), and the requests of this
/// commit that go before it.
pub async fn resolve(
    ledger: &Ledger,
    request: &CommitRequest,
    claims: &Claims,
    before: &[&CommitRequest],
) -> Result<Late, CommitError> {
    let Some(own_path) = &request.key_file else {
        return Ok(Late::OnTime);
    };
    let truncated = match truncate_applied(request, claims) {
        Ok(t) => t,
        Err(reason) => return Ok(Late::Refused(reason)),
    };
    let committed = ledger.later_key_files(request, claims).await?;
    let in_commit: Vec<&String> = before
        .iter()
        .filter(|b| may_interleave(b, request))
        .filter_map(|b| b.key_file.as_ref())
        .collect();
    if claims.is_empty() && committed.is_empty() && in_commit.is_empty() {
        return Ok(Late::OnTime);
    }
    if request.truncate && !truncated && !committed.is_empty() {
        return Ok(Late::Refused(
            "it holds a TRUNCATE and later changes of its source are already committed; applying it now would remove them".into(),
        ));
    }
    let Some(own) = ledger.key_changes(own_path).await? else {
        return Ok(Late::Refused(format!("its key file {own_path} is gone")));
    };
    let mut superseded = applied(&own, request, claims);
    for path in committed.iter().chain(in_commit) {
        let Some(theirs) = ledger.key_changes(path).await? else {
            return Ok(Late::Refused(format!(
                "newer changes of its source were committed and their key file {path} is gone (older than floe.ledger.request-window-ms)"
            )));
        };
        newer(&own, &theirs, &mut superseded);
    }
    Ok(if superseded.is_empty() && !truncated {
        Late::OnTime
    } else {
        Late::Superseded {
            all: superseded.len() == own.all.len(),
            keys: superseded,
            truncated,
        }
    })
}

/// The keys whose last change in the request the table already holds (a
/// redelivery cut at other boundaries, a rerun of a grown file): applying
/// them again could undo newer changes.
fn applied(own: &KeyChanges, request: &CommitRequest, claims: &Claims) -> HashSet<u128> {
    if claims.is_empty() {
        return HashSet::new();
    }
    own.changes
        .iter()
        .filter(|(_, (source, pos))| {
            request
                .sources
                .iter()
                .enumerate()
                .any(|(i, s)| &s.source == source && claims.claims(request, i, pos.as_str()))
        })
        .map(|(digest, _)| *digest)
        .collect()
}

/// Whether the request's TRUNCATE is one the table already applied; an
/// error when it holds one, some of its records are in the table and it
/// does not say where its TRUNCATE is (a request of an older writer).
fn truncate_applied(request: &CommitRequest, claims: &Claims) -> Result<bool, String> {
    if !request.truncate || claims.is_empty() {
        return Ok(false);
    }
    let Some(at) = &request.truncate_at else {
        return Err("it holds a TRUNCATE, part of it is already in the table, and it does not say where its TRUNCATE is".into());
    };
    Ok(request.sources.iter().enumerate().any(|(i, s)| {
        matches!(s.positions, Positions::Range { .. }) && claims.claims(request, i, at.as_str())
    }))
}

/// Adds to `into` the keys whose change in `theirs` is of the same source and
/// at or after the change in `own` (at: the same change, already applied).
fn newer(own: &KeyChanges, theirs: &Arc<KeyChanges>, into: &mut HashSet<u128>) {
    for (digest, (source, pos)) in own.changes.iter() {
        if theirs
            .changes
            .get(digest)
            .is_some_and(|(s, p)| s == source && p >= pos)
        {
            into.insert(*digest);
        }
    }
}

/// True when an earlier request of this commit may hold a newer change of a
/// key `later` changes: they share a source whose positions are not ranges
/// in order (ranges sorted by first position never invert).
fn may_interleave(earlier: &CommitRequest, later: &CommitRequest) -> bool {
    earlier.sources.iter().chain(&earlier.order).any(|e| {
        later.sources.iter().chain(&later.order).any(|l| {
            e.source == l.source
                && match (&e.positions, &l.positions) {
                    (Positions::Range { last, .. }, Positions::Range { first, .. }) => {
                        last >= first
                    }
                    (
                        Positions::Key { order: Some(e), .. },
                        Positions::Key { order: Some(l), .. },
                    ) => e >= l,
                    _ => true,
                }
        })
    })
}
