//! Compaction: small data files of a partition bin-packed into files near
//! `write.target-file-size-bytes`, with every delete that applies to them
//! already applied, so the rewritten table holds no delete files; committed
//! as one `replace` snapshot that also merges the manifests.
//!
//! The rewritten files take the data sequence number of the snapshot the
//! compaction read, as Iceberg's rewrite does: a delete a writer commits
//! meanwhile has a higher number, so it still applies to the rewritten rows.
//! The commit is planned again on a conflict and goes through only while
//! every input file is still live; otherwise it fails cleanly and nothing is
//! lost (the next run compacts the new state).

use std::collections::{BTreeMap, HashSet};

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataFile, Operation, TableMetadata};
use tracing::info;
use uuid::Uuid;

use crate::catalog::LoadedTable;
use crate::commit::live::LiveFiles;
use crate::commit::snapshot::SnapshotPlan;
use crate::commit::{Action, CommitError, PlanContext};
use crate::request::CommitRequest;
use crate::write::{FileSettings, TableWriter};

/// A file is small below this share of the target size.
const SMALL: f64 = 0.75;

/// What one compaction read and wrote.
#[derive(Debug, Default, Clone)]
pub struct Rewrite {
    /// Data files replaced.
    pub removed_data: Vec<String>,
    /// Delete files that no longer apply to anything.
    pub removed_deletes: Vec<String>,
    /// The new files.
    pub added: Vec<(i32, DataFile)>,
    /// Data sequence number of the snapshot read.
    pub sequence_number: i64,
    /// Rows written.
    pub rows: u64,
}

/// The data files worth compacting. With deletes in the table every data
/// file, so no delete file is needed afterwards; otherwise the small files of
/// each partition that holds at least two.
pub fn select(live: &LiveFiles, meta: &TableMetadata) -> HashSet<String> {
    if !live.deletes.is_empty() {
        return live
            .data
            .iter()
            .map(|f| f.file.file_path().to_string())
            .collect();
    }
    let target = FileSettings::from_properties(meta.properties())
        .map(|s| s.target_file_size)
        .unwrap_or(512 * 1024 * 1024);
    let mut by_partition: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for f in &live.data {
        if (f.file.file_size_in_bytes() as f64) < target as f64 * SMALL {
            let key = format!("{}/{:?}", f.spec_id, f.file.partition());
            by_partition
                .entry(key)
                .or_default()
                .push(f.file.file_path());
        }
    }
    by_partition
        .into_values()
        .filter(|files| files.len() > 1)
        .flatten()
        .map(str::to_string)
        .collect()
}

/// Reads and rewrites the files worth compacting; `None` when nothing is.
pub async fn rewrite(
    ctx: &PlanContext<'_>,
    loaded: &LoadedTable,
) -> Result<Option<Rewrite>, CommitError> {
    let meta = ctx.metadata();
    let Some(current) = meta.current_snapshot() else {
        return Ok(None);
    };
    let live = LiveFiles::load(ctx.file_io, meta)
        .await
        .map_err(|e| ctx.build_err(e))?;
    let selected = select(&live, meta);
    if selected.is_empty() {
        return Ok(None);
    }

    let table = loaded.to_table(ctx.file_io.clone())?;
    let tasks: Vec<FileScanTask> = table
        .scan()
        .select_all()
        .with_concurrency_limit(4096)
        .build()
        .map_err(|e| ctx.build_err(e))?
        .plan_files()
        .await
        .map_err(|e| ctx.build_err(e))?
        .try_filter(|t| futures::future::ready(selected.contains(t.data_file_path())))
        .try_collect()
        .await
        .map_err(|e| ctx.build_err(e))?;
    let reader = ArrowReaderBuilder::new(
        ctx.file_io.clone(),
        iceberg::Runtime::try_current().map_err(|e| ctx.build_err(e))?,
    )
    .build();
    let batches: Vec<RecordBatch> = reader
        .read(futures::stream::iter(tasks.into_iter().map(Ok)).boxed())
        .map_err(|e| ctx.build_err(e))?
        .stream()
        .try_collect()
        .await
        .map_err(|e| ctx.build_err(e))?;
    let writer = TableWriter::new(&ctx.table.ident, meta, ctx.file_io.clone())?;
    let mut added = Vec::new();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if let Some(first) = batches.first() {
        let all = concat_batches(&first.schema(), &batches).map_err(|e| {
            ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("compaction: {e}"),
            ))
        })?;
        let name = format!("compact-{}", Uuid::now_v7().simple());
        for f in writer.write(&all, &name).await? {
            added.push((writer.spec_id(), f));
        }
    }
    let removed_deletes = if live.data.len() == selected.len() {
        live.deletes
            .iter()
            .map(|f| f.file.file_path().to_string())
            .collect()
    } else {
        Vec::new()
    };
    info!(
        files_in = selected.len(),
        files_out = added.len(),
        rows,
        deletes_dropped = removed_deletes.len(),
        "compaction rewrote files"
    );
    let mut removed_data: Vec<String> = selected.into_iter().collect();
    removed_data.sort();
    Ok(Some(Rewrite {
        removed_data,
        removed_deletes,
        added,
        sequence_number: current.sequence_number(),
        rows: rows as u64,
    }))
}

/// Commits a [`Rewrite`] (or, with none, only merges the manifests). The
/// ledger is the table property's, which a rewrite leaves as it is, so a
/// compaction retried after a concurrent commit restates nothing stale.
#[derive(Debug)]
pub struct Compact {
    /// The rewrite to commit.
    pub rewrite: Option<Rewrite>,
}

#[async_trait]
impl Action for Compact {
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        _requests: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        let mut plan = SnapshotPlan {
            operation: Operation::Replace,
            merge_manifests: true,
            ..Default::default()
        };
        if let Some(r) = &self.rewrite {
            let live = LiveFiles::load(ctx.file_io, ctx.metadata())
                .await
                .map_err(|e| ctx.build_err(e))?;
            let paths: HashSet<&str> = live
                .data
                .iter()
                .chain(&live.deletes)
                .map(|f| f.file.file_path())
                .collect();
            if let Some(gone) = r
                .removed_data
                .iter()
                .chain(&r.removed_deletes)
                .find(|p| !paths.contains(p.as_str()))
            {
                return Err(CommitError::Build {
                    table: ctx.table_name(),
                    source: Box::new(iceberg::Error::new(
                        iceberg::ErrorKind::DataInvalid,
                        format!(
                            "compaction input {gone} was removed meanwhile; nothing was committed, the next run compacts the new state"
                        ),
                    )),
                });
            }
            plan.added_data = r.added.clone();
            plan.data_sequence_number = Some(r.sequence_number);
            plan.removed_data = r
                .removed_data
                .iter()
                .chain(&r.removed_deletes)
                .cloned()
                .collect();
        }
        Ok(vec![plan])
    }
}
