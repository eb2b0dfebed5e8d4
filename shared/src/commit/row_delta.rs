//! Row delta: keyed requests applied in source order. Tables with position
//! deletes (the default) get ONE snapshot for all of them, every change
//! resolved to the rows it replaces (see [`super::position_delta`]); tables
//! set to copy-on-write get their touched files rewritten, in one snapshot
//! (see [`super::copy_on_write`]). Tables with equality deletes get one
//! snapshot EACH, in source order, chained in one catalog commit: an equality
//! delete applies only to data of lower sequence numbers, so a later
//! request's deletes remove an earlier request's rows while its own rows
//! survive, and the table ends with the last state of every key.

use async_trait::async_trait;
use iceberg::spec::Operation;

use super::error::CommitError;
use super::plan::{Action, PlanContext};
use super::snapshot::SnapshotPlan;
use super::{copy_on_write, position_delta};
use crate::keyed_mode::KeyedMode;
use crate::ledger;
use crate::request::CommitRequest;
use crate::source::Position;

/// The row-delta action.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowDelta;

#[async_trait]
impl Action for RowDelta {
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        requests: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        let mut ordered: Vec<&CommitRequest> = requests.iter().collect();
        ordered.sort_by_key(|r| order_key(r));
        let metadata = ctx.metadata();
        let mode = KeyedMode::of(metadata);
        if mode == KeyedMode::CopyOnWrite
            && let Some(plan) = copy_on_write::plan(ctx, &ordered).await?
        {
            return Ok(vec![plan]);
        }
        // A copy-on-write table that holds delete files lands here too: its
        // readers may apply no equality deletes (pyiceberg refuses them), so
        // position deletes, which every reader applies, until compaction.
        if mode != KeyedMode::Equalities {
            return Ok(vec![position_delta::plan(ctx, &ordered).await?]);
        }
        ordered
            .into_iter()
            .filter(|r| {
                // A request whose every change was superseded (or that only
                // records its claims) adds no snapshot; the ledger records it.
                !(r.data_files.is_empty()
                    && r.delete_files.is_empty()
                    && !r.truncate
                    && r.state.is_empty())
            })
            .map(|r| {
                let added_data: Vec<_> = r
                    .data_files(metadata)?
                    .into_iter()
                    .map(|f| (r.spec_id, f))
                    .collect();
                let added_deletes: Vec<_> = r
                    .delete_files(metadata)?
                    .into_iter()
                    .map(|f| (r.spec_id, f))
                    .collect();
                let operation = match (added_data.is_empty(), added_deletes.is_empty()) {
                    (_, true) => Operation::Append,
                    (true, false) => Operation::Delete,
                    (false, false) => Operation::Overwrite,
                };
                let operation = if r.truncate {
                    Operation::Overwrite
                } else {
                    operation
                };
                Ok(SnapshotPlan {
                    operation,
                    added_data,
                    added_deletes,
                    truncate: r.truncate,
                    properties: ledger::summary_entries([r]),
                    ..Default::default()
                })
            })
            .collect()
    }

    fn keyed(&self) -> bool {
        true
    }
}

/// Source order: by each request's first span (source name, then first
/// position, or for HTTP its place in the order of receipts); the writer's
/// clock only between requests whose source has no order.
pub fn order_key(r: &CommitRequest) -> (String, Option<Position>, i64) {
    let first = r.sources.first();
    (
        first.map(|s| s.source.clone()).unwrap_or_default(),
        first.and_then(|s| match &s.positions {
            crate::source::Positions::Range { first, .. } => Some(first.clone()),
            crate::source::Positions::Key { order, .. } => order.clone(),
            crate::source::Positions::Ids { .. } => None,
        }),
        r.created_at_ms,
    )
}
