//! Keyed tables: a batch's changes folded per key ([`super::keyed`]), each
//! key's newest state shredded, and a state that does not fit replaced by
//! the key's state before it, so a rejected change never deletes a row.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::RecordBatch;

use super::PipelineError;
use super::classify::{Classified, Row};
use super::env::Env;
use super::evolving::shred_evolving;
use super::identity::{Identity, order_value};
use super::keyed::{self, Folded};
use super::part::{KeyedFiles, Output, Part, TableContext, shred_options};
use super::reads::Aligned;
use super::report::WriteReport;
use crate::change::Change;
use crate::config::ChangeOrder;
use crate::dlq::Rejected;
use crate::rowkey;
use crate::shred::{Shredder, UnknownFields};
use crate::source::{Pos, Position};

/// Rejects change `i` of the batch: field at fault, reason.
type Reject<'r> = dyn FnMut(usize, &str, &str) + Send + 'r;

/// Folds a keyed batch per key (keys compared by typed value) and shreds
/// each key's newest state that fits; keys whose every state is rejected
/// are not touched.
pub(super) async fn upsert(
    env: &Env,
    part: &Part<'_>,
    classified: Classified<'_>,
    rejected: &mut Vec<Rejected>,
    report: &mut WriteReport,
) -> Result<Output, PipelineError> {
    let Classified {
        mut changes,
        change_records: mut records,
        ..
    } = classified;
    let order = part.ctx.settings.order_changes_by;
    if let Some(by) = order {
        in_change_order(part, by, &mut changes, &mut records, rejected);
    }
    // Folding takes the changes' rows; their positions stay readable.
    let positions: Vec<Pos<'_>> = changes.iter().map(|(pos, _)| *pos).collect();
    let mut reject = |i: usize, field: &str, reason: &str| {
        rejected.push(part.reject(positions[i], field, reason, &records[i]));
    };
    let mut folded = fold(part, &mut changes, &mut reject)?;
    // Newest states first; keys whose newest state is rejected fall back.
    let mut chosen: Vec<Option<usize>> = folded
        .keys
        .iter()
        .map(|k| k.states.len().checked_sub(1))
        .collect();
    let reads = match part.batch.records.reads() {
        Some(r) => Some(Aligned::of(part, r, !folded.keys.is_empty())?),
        None => None,
    };
    if let Some(r) = &reads {
        r.supersede(&folded, &mut chosen);
    }
    let (ctx, data, written) = shred_states(
        env,
        part,
        &folded,
        &mut chosen,
        &positions,
        &mut reject,
        report,
    )
    .await?;
    let identity = Identity::of(part.batch, order);
    let mut row_ids = written
        .into_iter()
        .filter_map(|k| chosen[k].map(|c| folded.keys[k].states[c].change))
        .map(|i| identity.row(positions[i]))
        .collect();
    let mut keys = touched(&mut folded, &chosen, &changes, &identity);
    let appends = reads.as_ref().is_some_and(|r| r.appends());
    let data = match reads {
        Some(r) => r.append(part, data, &mut row_ids, &mut keys, &identity)?,
        None => data,
    };
    // Rows that only append, beside no change that touched a key: a plain
    // append for the committer, which then looks nothing up.
    let keys = (!appends || !keys.is_empty()).then_some(keys);
    Ok(Output {
        ctx,
        data,
        row_ids,
        keys,
        rejected: 0,
    })
}

/// Shreds every key's chosen state, evolving the schema as
/// [`Self::shred_evolving`] does; a state that still does not fit is
/// rejected and its key falls back to the state before, until each key's
/// state fits or none is left. Returns the keys written, in row order.
/// Every pass shreds (and evolves for) the states chosen then: a state a
/// key falls back to may bring fields of its own, which must evolve the
/// table, not be dropped.
async fn shred_states(
    env: &Env,
    part: &Part<'_>,
    folded: &Folded,
    chosen: &mut [Option<usize>],
    positions: &[Pos<'_>],
    reject: &mut Reject<'_>,
    report: &mut WriteReport,
) -> Result<(Arc<TableContext>, RecordBatch, Vec<usize>), PipelineError> {
    loop {
        let (rows, owners) = states(folded, chosen, positions);
        let shredded = shred_evolving(env, part, &rows, report).await?;
        if shredded.failed.is_empty() {
            let written = shredded.accepted.iter().map(|i| owners[*i]).collect();
            return Ok((shredded.ctx, shredded.data, written));
        }
        for (i, field, reason) in shredded.failed {
            let k = owners[i];
            if let Some(c) = chosen[k] {
                reject(folded.keys[k].states[c].change, &field, &reason);
                chosen[k] = c.checked_sub(1);
            }
        }
    }
}

/// Puts a batch's changes in the table's change order `by` (stable, so
/// changes the order does not tell apart keep their batch order); a change
/// without a place in it is rejected, naming the field.
fn in_change_order<'a>(
    part: &Part<'_>,
    by: ChangeOrder,
    changes: &mut Vec<(Pos<'a>, Change)>,
    records: &mut Vec<Cow<'a, [u8]>>,
    rejected: &mut Vec<Rejected>,
) {
    let mut placed: Vec<_> = std::mem::take(changes)
        .into_iter()
        .zip(std::mem::take(records))
        .map(|(change, record)| (order_value(&change.1, by), change, record))
        .collect();
    placed.retain(|(at, (pos, _), record)| {
        if at.is_none() {
            rejected.push(part.reject(
                *pos,
                "",
                &format!(
                    "the table orders its changes by {} (order_changes_by) and this change has none",
                    by.field()
                ),
                record,
            ));
        }
        at.is_some()
    });
    placed.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, change, record) in placed {
        changes.push(change);
        records.push(record);
    }
}

/// Each change's key digest, then the fold; changes without a key, or
/// with one or an unchanged column that does not fit, are rejected.
fn fold(
    part: &Part<'_>,
    changes: &mut [(Pos<'_>, Change)],
    reject: &mut Reject<'_>,
) -> Result<Folded, PipelineError> {
    let mut keys = Vec::with_capacity(changes.len());
    let case_insensitive = part.ctx.settings.case_insensitive;
    for (i, k) in keyed::keys(changes, &part.key_names, case_insensitive)
        .into_iter()
        .enumerate()
    {
        match k {
            Ok(k) => keys.push(k),
            Err(e) => {
                reject(i, &e.field, &e.reason);
                keys.push(None);
            }
        }
    }
    let digests = key_digests(part, &mut keys, reject)?;
    let (folded, errors) = keyed::fold(changes, keys, &digests);
    for (i, e) in errors {
        reject(i, &e.field, &e.reason);
    }
    Ok(folded)
}

/// The rows of each key's chosen state, borrowed from the fold, with the key each belongs to; deletes have none.
fn states<'f>(
    folded: &'f Folded,
    chosen: &[Option<usize>],
    positions: &[Pos<'f>],
) -> (Vec<Row<'f>>, Vec<usize>) {
    let mut rows = Vec::new();
    let mut owners = Vec::new();
    for (k, c) in chosen.iter().enumerate() {
        let Some(state) = c.map(|c| &folded.keys[k].states[c]) else {
            continue;
        };
        if let Some(row) = &state.row {
            rows.push((positions[state.change], row.as_bytes().into()));
            owners.push(k);
        }
    }
    (rows, owners)
}

/// Every key with a state left is touched: deleted, then re-added if its
/// state is a row; keys with none left are not touched at all.
fn touched(
    folded: &mut Folded,
    chosen: &[Option<usize>],
    changes: &[(Pos<'_>, Change)],
    identity: &Identity<'_>,
) -> KeyedFiles {
    let mut keys = Vec::new();
    let mut file = Vec::new();
    for (k, c) in chosen.iter().enumerate() {
        let Some(c) = c else { continue };
        let key = &mut folded.keys[k];
        let (pos, change) = &changes[key.states[*c].change];
        keys.push(std::mem::take(&mut key.key));
        let (src, at) = identity.key_change(*pos, change);
        file.push((key.digest, src, at));
    }
    let order = file
        .iter()
        .filter_map(|(_, _, at)| at.clone())
        .fold(
            None,
            |range: Option<(Position, Position)>, at| match range {
                None => Some((at.clone(), at)),
                Some((lo, hi)) => Some((lo.min(at.clone()), hi.max(at))),
            },
        )
        .filter(|_| identity.ordered());
    KeyedFiles {
        keys,
        file,
        order,
        truncate: folded.truncate,
        truncate_at: folded
            .truncate_at
            .and_then(|i| changes.get(i))
            .and_then(|(pos, change)| identity.key_position(*pos, change)),
        reads: None,
    }
}

/// The digest of each change's key, shredded by the key columns' types; a
/// key that does not fit is reported through `reject` and dropped from `keys`.
fn key_digests(
    part: &Part<'_>,
    keys: &mut [Option<Vec<u8>>],
    reject: &mut Reject<'_>,
) -> Result<Vec<Option<u128>>, PipelineError> {
    let ctx = &part.ctx;
    let mut digests = vec![None; keys.len()];
    let Some(key_schema) = ctx.writer.key_schema().map_err(|e| part.write_err(e))? else {
        return Ok(digests);
    };
    let mut options = shred_options(&ctx.settings);
    options.unknown_fields = UnknownFields::Ignore;
    let mut shredder = Shredder::new(&key_schema, options).map_err(|s| part.shred_err(s))?;
    let mut rows = Vec::new();
    for (i, k) in keys.iter_mut().enumerate() {
        let Some(key) = k.as_ref() else {
            continue;
        };
        match shredder.push(key) {
            Ok(()) => rows.push(i),
            Err(e) => {
                reject(i, &e.field, &e.reason);
                *k = None;
            }
        }
    }
    let keys = shredder.finish().map_err(|s| part.shred_err(s))?;
    let all: Vec<usize> = (0..keys.num_columns()).collect();
    let computed = rowkey::digests(&keys, &all).map_err(|e| PipelineError::TableDef {
        table: part.table.clone(),
        source: e.into(),
    })?;
    for (row, i) in rows.into_iter().enumerate() {
        digests[i] = computed.get(row).copied();
    }
    Ok(digests)
}
