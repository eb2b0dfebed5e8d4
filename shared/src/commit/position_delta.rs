//! Keyed requests committed with position deletes (`floe.keyed.deletes =
//! position`, the default): every key a request changes is looked up in the
//! table's current rows (and in the rows of the requests before it in the
//! same commit), and the row it replaces is named in a position-delete file,
//! so the table never holds an equality delete and every reader (pyiceberg,
//! Snowflake, Athena, DuckDB, iceberg-rust) reads it. All the requests of a
//! commit become ONE snapshot, applied in source order: a later request's
//! change to a key deletes the earlier one's new row in the same snapshot
//! (position deletes apply to data files of their own sequence number), a key
//! moved to another partition is deleted in the partition it left. On format
//! v3 tables the deletes are deletion vectors: a file's new vector holds its
//! earlier one's rows too and replaces it in the same snapshot, so no data
//! file ever has two.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{DataContentType, DataFile, FormatVersion, Operation, Struct};
use roaring::RoaringBitmap;
use tracing::info;
use uuid::Uuid;

use super::error::CommitError;
use super::live::{LiveFile, LiveFiles};
use super::locate::{FileKeys, digests_of};
use super::plan::PlanContext;
use super::read::read_file;
use super::snapshot::SnapshotPlan;
use crate::ledger;
use crate::request::CommitRequest;
use crate::write::{FileDeletes, TableWriter};

/// Summary key: rows the snapshot's position deletes remove.
pub const ROWS_DELETED: &str = "floe.pos.rows-deleted";
/// Summary key: keyed requests the snapshot coalesces.
pub const COALESCED: &str = "floe.pos.requests";

/// A data file whose rows may be deleted: in the table, or new in this commit.
struct Target {
    path: String,
    spec_id: i32,
    partition: Struct,
    /// Its data sequence number (`None` for files added by this commit,
    /// which equality deletes already in the table never reach).
    sequence_number: Option<i64>,
    keys: Arc<FileKeys>,
    /// Rows already gone (by the table's position deletes or this commit).
    gone: RoaringBitmap,
    /// Rows this commit deletes.
    deleted: Vec<u32>,
    /// The deletion vector the table holds for it (its key), which a new one
    /// replaces.
    vector: Option<String>,
}

/// Plans ONE snapshot applying `ordered` (source order) with position deletes.
pub async fn plan(
    ctx: &PlanContext<'_>,
    ordered: &[&CommitRequest],
) -> Result<SnapshotPlan, CommitError> {
    let meta = ctx.metadata();
    let schema = meta.current_schema().clone();
    let key_names: Vec<String> = schema
        .identifier_field_ids()
        .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
        .collect();
    let (mut targets, equality) = lookup_targets(ctx, &schema, &key_names, ordered).await?;
    let mut plan = SnapshotPlan {
        operation: Operation::Overwrite,
        ..Default::default()
    };
    let mut added: Vec<(i32, DataFile)> = Vec::new();
    let mut rows_deleted = 0u64;
    for (i, r) in ordered.iter().enumerate() {
        if r.truncate {
            // Every row before it is gone: the table's files with the
            // snapshot's truncation, this commit's earlier files unwritten.
            plan.truncate = true;
            targets.clear();
            plan.obsolete
                .extend(added.drain(..).map(|(_, f)| f.file_path().to_string()));
        }
        let touched = touched_keys(ctx, &schema, &key_names, r).await?;
        rows_deleted += delete_rows(&mut targets, &touched, &equality);
        // Key rows a writer wrote for another mode (a copy-on-write table
        // that holds delete files) are read above, never committed.
        plan.obsolete.extend(
            r.delete_files(meta)?
                .iter()
                .map(|f| f.file_path().to_string()),
        );
        let looked_up = ordered[i + 1..].iter().any(|later| looks_up(later));
        for file in r.data_files(meta)? {
            if looked_up {
                targets.push(new_target(ctx, &schema, &key_names, r.spec_id, &file).await?);
            }
            added.push((r.spec_id, file));
        }
    }
    plan.added_data = added;
    let deletes = write_deletes(ctx, &targets).await?;
    for f in &deletes {
        plan.written.push(f.1.file_path().to_string());
    }
    plan.added_deletes = deletes;
    // A file with new deletes has a new vector (only v3 tables have any).
    plan.removed_data.extend(
        targets
            .iter()
            .filter(|t| !t.deleted.is_empty())
            .filter_map(|t| t.vector.clone()),
    );
    if plan.added_deletes.is_empty() && !plan.truncate {
        plan.operation = Operation::Append;
    }
    plan.properties = ledger::summary_entries(ordered.iter().copied());
    plan.properties
        .push((ROWS_DELETED.to_string(), rows_deleted.to_string()));
    plan.properties
        .push((COALESCED.to_string(), ordered.len().to_string()));
    info!(
        requests = ordered.len(),
        rows_deleted,
        delete_files = plan.added_deletes.len(),
        "keyed requests resolved to position deletes"
    );
    Ok(plan)
}

/// The table's files as targets (see [`table_targets`]) when a request
/// looks rows up. Only requests that change keys do: a request's new files
/// are likewise read for their keys only when one after it in this commit
/// looks up (a Postgres copy's chunk that appends, or the commit's last
/// request, is looked up in by no one here).
async fn lookup_targets(
    ctx: &PlanContext<'_>,
    schema: &iceberg::spec::SchemaRef,
    key_names: &[String],
    ordered: &[&CommitRequest],
) -> Result<(Vec<Target>, HashMap<u128, i64>), CommitError> {
    if !ordered.iter().any(|r| looks_up(r)) {
        return Ok(Default::default());
    }
    let live = LiveFiles::load_cached(ctx.file_io, ctx.metadata(), ctx.manifests)
        .await
        .map_err(|e| ctx.build_err(e))?;
    table_targets(ctx, schema, key_names, &live).await
}

/// Whether `r` changes keys whose rows must be found: it names its keys
/// in a key file or, from a writer that wrote none, in delete files.
fn looks_up(r: &CommitRequest) -> bool {
    r.key_file.is_some() || !r.delete_files.is_empty()
}

/// Marks deleted every row of `targets` that holds one of `touched`, except
/// where an equality delete newer than the file removed the key already;
/// returns how many rows that newly deletes.
/// `touched` is ascending.
fn delete_rows(targets: &mut [Target], touched: &[u128], equality: &HashMap<u128, i64>) -> u64 {
    let mut deleted = 0;
    // File by file: one file's keys stay in cache for every touched key (a
    // Postgres copy's 100th chunk asks 99 files for 10,000 keys each).
    for t in targets.iter_mut() {
        for (digest, row) in t.keys.rows_of_sorted(touched) {
            let eq_gone = t
                .sequence_number
                .is_some_and(|seq| equality.get(&digest).is_some_and(|d| *d > seq));
            if !eq_gone && t.gone.insert(row) {
                t.deleted.push(row);
                deleted += 1;
            }
        }
    }
    deleted
}

/// A data file of this commit as a target later requests' changes delete from.
async fn new_target(
    ctx: &PlanContext<'_>,
    schema: &iceberg::spec::SchemaRef,
    key_names: &[String],
    spec_id: i32,
    file: &DataFile,
) -> Result<Target, CommitError> {
    let keys = ctx
        .locator
        .keys(ctx.file_io, schema, key_names, file)
        .await
        .map_err(|e| ctx.build_err(e))?;
    Ok(Target {
        path: file.file_path().to_string(),
        spec_id,
        partition: file.partition().clone(),
        sequence_number: None,
        keys,
        gone: RoaringBitmap::new(),
        deleted: Vec::new(),
        vector: None,
    })
}

/// The keys a request changes, ascending: its key file's, or, for a
/// request from a writer that wrote none (v1), its equality-delete files'
/// rows.
async fn touched_keys(
    ctx: &PlanContext<'_>,
    schema: &iceberg::spec::SchemaRef,
    key_names: &[String],
    r: &CommitRequest,
) -> Result<Vec<u128>, CommitError> {
    if let Some(path) = &r.key_file {
        return match ctx.ledger.key_file(path).await? {
            Some(k) => Ok(sorted(k.all.clone())),
            None => Err(ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("request {}: its key file {path} is gone", r.batch_id),
            ))),
        };
    }
    let mut out = Vec::new();
    for f in r.delete_files(ctx.metadata())? {
        let keys = ctx
            .locator
            .keys(ctx.file_io, schema, key_names, &f)
            .await
            .map_err(|e| ctx.build_err(e))?;
        out.extend(keys.digests());
    }
    Ok(sorted(out))
}

fn sorted(mut digests: Vec<u128>) -> Vec<u128> {
    digests.sort_unstable();
    digests
}

/// The table's live data files as targets, with the rows its live delete
/// files already remove (files whose every row is gone are no target); and,
/// for tables that still hold equality deletes (written before position
/// deletes were the default), each deleted key's highest delete sequence
/// number.
async fn table_targets(
    ctx: &PlanContext<'_>,
    schema: &iceberg::spec::SchemaRef,
    key_names: &[String],
    live: &LiveFiles,
) -> Result<(Vec<Target>, HashMap<u128, i64>), CommitError> {
    let mut equality: HashMap<u128, i64> = HashMap::new();
    // Position deletes and vectors are the known rows' (`rows.rs`).
    for d in &live.deletes {
        if d.file.content_type() == DataContentType::PositionDeletes {
            continue;
        }
        let batches = read_file(
            ctx.file_io,
            schema.clone(),
            d.file.equality_ids().unwrap_or_default(),
            &d.file,
        )
        .await
        .map_err(|e| ctx.build_err(e))?;
        for b in &batches {
            for digest in digests_of(b, key_names).map_err(|e| ctx.build_err(e))? {
                let seq = equality.entry(digest).or_insert(d.sequence_number);
                *seq = (*seq).max(d.sequence_number);
            }
        }
    }
    let rows = ctx
        .known
        .live_rows(
            ctx.locator,
            ctx.file_io,
            ctx.metadata().uuid(),
            schema,
            key_names,
            live,
        )
        .await
        .map_err(|e| ctx.build_err(e))?;
    let mut targets = Vec::with_capacity(live.data.len());
    for (
        LiveFile {
            file,
            spec_id,
            sequence_number,
            ..
        },
        rows,
    ) in live.data.iter().zip(rows)
    {
        let Some(rows) = rows else { continue };
        targets.push(Target {
            path: file.file_path().to_string(),
            spec_id: *spec_id,
            partition: file.partition().clone(),
            sequence_number: Some(*sequence_number),
            keys: rows.keys,
            gone: rows.gone,
            deleted: Vec::new(),
            vector: rows.vector,
        });
    }
    Ok((targets, equality))
}

/// The rows this commit deletes, as the table's format asks: position-delete
/// files naming them, or (v3) each touched file's whole new vector.
async fn write_deletes(
    ctx: &PlanContext<'_>,
    targets: &[Target],
) -> Result<Vec<(i32, DataFile)>, CommitError> {
    let meta = ctx.metadata();
    let whole = meta.format_version() >= FormatVersion::V3;
    let deletes = targets
        .iter()
        .filter(|t| !t.deleted.is_empty())
        .map(|t| FileDeletes {
            data_file: t.path.clone(),
            spec_id: t.spec_id,
            partition: t.partition.clone(),
            rows: if whole {
                t.gone.iter().collect()
            } else {
                t.deleted.clone()
            },
        })
        .collect();
    let writer = TableWriter::new(&ctx.table.ident, meta, ctx.file_io.clone())?;
    let name = format!("pos-{}", Uuid::now_v7().simple());
    Ok(writer.write_row_deletes(deletes, &name).await?)
}
