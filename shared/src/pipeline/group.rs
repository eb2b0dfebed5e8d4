//! Routing: a batch's records sorted into one group per table, with what
//! could not be opened or routed set aside for the dead-letter location.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::TableIdent;
use iceberg::spec::StructType;

use super::PipelineError;
use super::env::Env;
use super::part::{Group, Groups, Names};
use super::scope::Scope;
use crate::avro::json_of;
use crate::change;
use crate::dlq::Rejected;
use crate::envelope::Undecodable;
use crate::ident::display;
use crate::metrics::Counters;
use crate::route::{Router, SourceInfo};
use crate::source::{Pos, SourceBatch, SourceKind};

/// Sorts `batch`'s records into one group per table: the batch's own
/// table, else the router's.
pub(super) fn group<'a>(
    env: &Env,
    router: Option<&Router>,
    batch: &'a SourceBatch,
    declared: Option<Arc<StructType>>,
) -> Result<Groups<'a>, PipelineError> {
    let source = SourceInfo::new(batch.source.kind, &batch.source.name);
    let fixed = batch
        .table
        .clone()
        .or_else(|| router.and_then(|r| r.fixed().cloned()));
    // DynamoDB stream records, straight from the stream or through
    // Kinesis Data Streams, are items to append-only tables.
    let items = matches!(
        batch.source.kind,
        SourceKind::DynamoDb | SourceKind::Kinesis
    )
    .then(|| env.item_row(&batch.source.name));
    let new_group = || Group {
        items,
        avro: batch.avro.clone(),
        ..Group::new(Vec::new(), declared.clone())
    };
    if let Some(t) = &fixed {
        return Ok(one_table(env, batch, t, new_group()));
    }
    if batch.records.reads().is_some() {
        // Columns cannot be routed row by row: they would go nowhere.
        return Err(PipelineError::NoTable);
    }
    // A router that reads a record's fields reads registry Avro as its
    // JSON text; the record itself stays binary for the shredder.
    let avro = batch
        .avro
        .as_deref()
        .filter(|_| router.is_some_and(Router::reads_fields));
    let mut tables = BTreeMap::new();
    let mut unrouted = Vec::new();
    let mut names = Names::default();
    let mut seen = 0u64;
    for (pos, record) in batch.records.iter() {
        seen += 1;
        // A record its envelope or registry could not open is dead-lettered
        // with the reason (it cannot be routed by a field it does not show).
        if let Some(bad) = Undecodable::of(record) {
            unrouted.push(undecodable(batch, None, pos, &bad));
            continue;
        }
        let json = match json_of(avro, record) {
            Ok(json) => json,
            Err(e) => {
                let scope = Scope::new("", &batch.batch_id, batch);
                unrouted.push(scope.reject(pos, &e.field, &e.reason, record));
                continue;
            }
        };
        match route(router, &json, &source)? {
            Ok(t) => Groups::of(&mut tables, &mut names, &t, new_group)
                .records
                .push((pos, Cow::Borrowed(record))),
            // A tombstone names only a key: it cannot be routed by a
            // record field, and goes nowhere rather than to dead letters.
            Err(_) if change::tombstone_key(record).is_some() => {}
            Err(reason) => unrouted.push(unroutable(env, batch, pos, &reason, record)),
        }
    }
    Counters::add(&env.parts.counters.records_in, seen);
    Ok(Groups { tables, unrouted })
}

/// [`group`] for a batch whose records all go to table `t` (its own, or
/// routing's one table): no route to ask and no table name to look up per
/// record, which at a million records a second is worth a few percent.
fn one_table<'a>(
    env: &Env,
    batch: &'a SourceBatch,
    t: &TableIdent,
    mut group: Group<'a>,
) -> Groups<'a> {
    let mut seen = 0u64;
    for (pos, record) in batch.records.iter() {
        seen += 1;
        // A record its envelope or registry could not open is dead-lettered
        // with the reason, with the table it was bound for.
        match Undecodable::of(record) {
            Some(bad) => group.rejected.push(undecodable(batch, Some(t), pos, &bad)),
            None => group.records.push((pos, Cow::Borrowed(record))),
        }
    }
    Counters::add(&env.parts.counters.records_in, seen);
    let mut tables = BTreeMap::new();
    // Source state alone (a snapshot's progress) still commits.
    if seen > 0 || !batch.state.is_empty() || batch.records.reads().is_some() {
        tables.insert(display(t), (t.clone(), group));
    }
    Groups {
        tables,
        unrouted: Vec::new(),
    }
}

/// The dead letter of a record its envelope or registry could not open,
/// named by the batch's own table when it has one.
fn undecodable(
    batch: &SourceBatch,
    fixed: Option<&TableIdent>,
    pos: Pos<'_>,
    bad: &Undecodable,
) -> Rejected {
    let table = fixed.map(display).unwrap_or_default();
    let raw = bad.record_text();
    Scope::new(&table, &batch.batch_id, batch).reject(pos, &bad.field, &bad.reason, raw.as_bytes())
}

/// The table `record` goes to, or why no route places it.
fn route(
    router: Option<&Router>,
    record: &[u8],
    source: &SourceInfo<'_>,
) -> Result<Result<TableIdent, String>, PipelineError> {
    match router {
        Some(router) => Ok(router.route(record, source).map_err(|e| e.to_string())),
        None => Err(PipelineError::NoTable),
    }
}

/// The dead letter of a record no route places, naming the routing field.
fn unroutable(
    env: &Env,
    batch: &SourceBatch,
    pos: Pos<'_>,
    reason: &str,
    record: &[u8],
) -> Rejected {
    let field = env
        .parts
        .config
        .routing
        .field
        .as_deref()
        .unwrap_or_default();
    Scope::new("", &batch.batch_id, batch).reject(pos, field, reason, record)
}
