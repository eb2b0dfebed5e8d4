//! Append: every pending append request of a table becomes ONE snapshot.
//! Appends commute, so coalescing them loses no order a reader could see.

use async_trait::async_trait;
use iceberg::spec::{Operation, TableMetadata};

use super::error::CommitError;
use super::plan::{Action, PlanContext};
use super::snapshot::SnapshotPlan;
use crate::ledger;
use crate::request::{CommitRequest, RequestError};

/// The append action.
#[derive(Debug, Clone, Copy, Default)]
pub struct Append;

#[async_trait]
impl Action for Append {
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        requests: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        // Requests that only record their claims (every record rejected, or
        // masked away) add no snapshot; the ledger records them all the same.
        let plan = plan(ctx.metadata(), requests)?;
        Ok(if plan.added_data.is_empty() {
            Vec::new()
        } else {
            vec![plan]
        })
    }
}

fn plan(
    metadata: &TableMetadata,
    requests: &[CommitRequest],
) -> Result<SnapshotPlan, RequestError> {
    let mut added_data = Vec::new();
    for r in requests {
        added_data.extend(r.data_files(metadata)?.into_iter().map(|f| (r.spec_id, f)));
    }
    let properties = ledger::summary_entries(requests);
    Ok(SnapshotPlan {
        operation: Operation::Append,
        added_data,
        properties,
        ..Default::default()
    })
}
