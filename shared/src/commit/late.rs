//! Keyed requests applied per key in source order, whenever they arrive.
//! A keyed request whose source committed newer changes meanwhile (its
//! commit failed and came back after later ones, a standard queue reordered
//! it, a second poller took it) contributes only its changes to keys no
//! newer change touched: the table ends as if every change had been applied
//! in source order. The same holds between requests of one commit whose
//! positions interleave (DynamoDB Streams shards in one event).

use std::collections::HashSet;
use std::sync::Arc;

use super::CommitError;
use crate::ledger::{KeyChanges, Ledger};
use crate::request::CommitRequest;
use crate::source::Positions;

/// What a keyed request may still do.
#[derive(Debug, Clone, PartialEq)]
pub enum Late {
    /// Everything: nothing newer touched its keys.
    OnTime,
    /// Everything but its changes to these keys (digests), which newer
    /// committed changes superseded; `all` when that is every key it changes.
    Superseded {
        /// The superseded keys.
        keys: HashSet<u128>,
        /// They are all the request changes.
        all: bool,
    },
    /// Nothing can be applied safely; dead-letter it with why.
    Refused(String),
}

/// Decides what `request` may do, given the ledger and the requests of this
/// commit that go before it.
pub async fn resolve(
    ledger: &Ledger,
    request: &CommitRequest,
    before: &[&CommitRequest],
) -> Result<Late, CommitError> {
    let Some(own_path) = &request.key_file else {
        return Ok(Late::OnTime);
    };
    let mut committed = ledger.later_key_files(request).await?;
    if !request.order.is_empty() {
        // A replay of dead letters: the later changes of the sources its
        // records first came from, committed long before the replay was made.
        let mut origins = CommitRequest::new(
            request.table.clone(),
            request.batch_id.clone(),
            request.order.clone(),
        );
        origins.created_at_ms = i64::MIN;
        for path in ledger.later_key_files(&origins).await? {
            if !committed.contains(&path) {
                committed.push(path);
            }
        }
    }
    let in_commit: Vec<&String> = before
        .iter()
        .filter(|b| may_interleave(b, request))
        .filter_map(|b| b.key_file.as_ref())
        .collect();
    if committed.is_empty() && in_commit.is_empty() {
        return Ok(Late::OnTime);
    }
    if request.truncate && !committed.is_empty() {
        return Ok(Late::Refused(
            "it holds a TRUNCATE and later changes of its source are already committed; applying it now would remove them".into(),
        ));
    }
    let Some(own) = ledger.key_changes(own_path).await? else {
        return Ok(Late::Refused(format!("its key file {own_path} is gone")));
    };
    let mut superseded = HashSet::new();
    for path in committed.iter().chain(in_commit) {
        let Some(theirs) = ledger.key_changes(path).await? else {
            return Ok(Late::Refused(format!(
                "newer changes of its source were committed and their key file {path} is gone (older than floe.ledger.request-window-ms)"
            )));
        };
        newer(&own, &theirs, &mut superseded);
    }
    Ok(if superseded.is_empty() {
        Late::OnTime
    } else {
        Late::Superseded {
            all: superseded.len() == own.all.len(),
            keys: superseded,
        }
    })
}

/// Adds to `into` the keys whose change in `theirs` is of the same source and
/// at or after the change in `own` (at: the same change, already applied).
fn newer(own: &Arc<KeyChanges>, theirs: &Arc<KeyChanges>, into: &mut HashSet<u128>) {
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
                    _ => true,
                }
        })
    })
}
