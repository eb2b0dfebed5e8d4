//! A table's part of a batch made durable: data files, equality deletes
//! and the key file in storage, then its commit request enqueued. Only
//! after the enqueue does the part count as written.

use arrow_array::RecordBatch;
use bytes::Bytes;
use iceberg::spec::DataFile;
use tracing::debug;
use uuid::Uuid;

use super::PipelineError;
use super::env::Env;
use super::identity;
use super::part::{KeyedFiles, Output, Part, TableContext, shred_options};
use super::report::WriteReport;
use crate::config::ChangeOrder;
use crate::faults::FaultPoint;
use crate::keyed_mode::KeyedMode;
use crate::ledger::{self, KeyFile};
use crate::metrics::Counters;
use crate::request::CommitRequest;
use crate::shred::Shredder;
use crate::source::{Positions, SourceBatch, SourceSpan};
use crate::write::rows::RowId;

/// Writes a table's part of a batch: data files, its deletes and key
/// file, then the commit request enqueued.
pub(super) async fn write_files(
    env: &Env,
    part: &Part<'_>,
    output: Output,
    report: &mut WriteReport,
) -> Result<(), PipelineError> {
    let (batch_id, batch) = (part.batch_id, part.batch);
    let Output {
        ctx,
        data,
        row_ids,
        keys,
        rejected,
    } = output;
    let name = format!(
        "{}-{}",
        batch_id.get(..16).unwrap_or(batch_id),
        Uuid::now_v7().simple()
    );
    let deletes = key_deletes(part, &ctx, keys.as_ref(), &name).await?;
    if !needs_request(batch, &data, &deletes, keys.as_ref(), rejected) {
        return Ok(());
    }
    let row_ids: Option<Vec<RowId>> = row_ids.into_iter().collect();
    let files = ctx
        .writer
        .write_rows(&data, row_ids.as_deref(), &name)
        .await
        .map_err(|e| part.write_err(e))?;
    let key_file = match &keys {
        Some(k) if !k.file.is_empty() => Some(write_key_file(env, part, &ctx, k, &name).await?),
        _ => None,
    };
    let records = data.num_rows() as u64;
    let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
    report.records += records;
    report.files += files.len();
    report.bytes += bytes;
    let c = &env.parts.counters;
    Counters::add(&c.data_files, files.len() as u64);
    Counters::add(&c.data_bytes, bytes);
    Counters::add(&c.records_written, records);
    env.fault(FaultPoint::AfterUpload, &part.table, batch_id)?;

    let mut request = CommitRequest::new(
        part.ident.clone(),
        batch_id.to_string(),
        batch.spans.clone(),
    )
    .with_files(
        &ctx.loaded.metadata,
        (ctx.writer.schema_id(), ctx.writer.spec_id()),
        files,
        deletes,
        records,
    )?
    .with_source(batch.state.clone(), rejected, batch.oldest_ms)
    .ordered_after(order_spans(
        batch,
        keys.as_ref(),
        ctx.settings.order_changes_by,
    ));
    if let Some(k) = &keys {
        request = request.keyed(k.truncate, key_file);
        request.truncate_at = k.truncate_at.clone();
    }
    enqueue(env, part, &request).await?;
    debug!(records, "batch written");
    Ok(())
}

/// The spans the request is ordered after: a replay's first sources, and
/// the table's change order over the batch's changes (when it has one), so
/// the committer applies its changes per key against later ones of any
/// source.
fn order_spans(
    batch: &SourceBatch,
    keys: Option<&KeyedFiles>,
    by: Option<ChangeOrder>,
) -> Vec<SourceSpan> {
    let mut spans = identity::origin_spans(batch);
    if let (Some(by), Some((first, last))) = (by, keys.and_then(|k| k.order.clone())) {
        spans.push(SourceSpan {
            source: by.source().to_string(),
            positions: Positions::Range { first, last },
            stream: false,
        });
    }
    spans
}

/// Sends the part's commit request to the table's queue.
async fn enqueue(env: &Env, part: &Part<'_>, request: &CommitRequest) -> Result<(), PipelineError> {
    env.parts
        .queue
        .send_to(part.ident, Bytes::from(request.to_bytes()?))
        .await
        .map_err(|source| PipelineError::Queue {
            table: part.table.clone(),
            batch_id: part.batch_id.to_string(),
            source,
        })?;
    Counters::add(&env.parts.counters.requests, 1);
    env.fault(FaultPoint::AfterEnqueue, &part.table, part.batch_id)
}

/// The equality deletes of a keyed part, when its table takes them:
/// with position deletes the committer finds the rows a batch replaces
/// from its key file, so only equality-delete and copy-on-write tables
/// take the keys as a file of key rows.
async fn key_deletes(
    part: &Part<'_>,
    ctx: &TableContext,
    keys: Option<&KeyedFiles>,
    name: &str,
) -> Result<Vec<DataFile>, PipelineError> {
    let key_rows = !matches!(KeyedMode::of(&ctx.loaded.metadata), KeyedMode::Positions);
    match keys {
        Some(k) if key_rows && (!k.keys.is_empty() || k.reads.is_some()) => {
            write_deletes(part, ctx, k, name).await
        }
        _ => Ok(Vec::new()),
    }
}

/// Writes the key file of a keyed batch beside the table's ledger.
async fn write_key_file(
    env: &Env,
    part: &Part<'_>,
    ctx: &TableContext,
    keys: &KeyedFiles,
    name: &str,
) -> Result<String, PipelineError> {
    let path = format!(
        "{}/{name}.json.zst",
        ledger::place::keys_dir(&ctx.loaded.metadata)
    );
    let file = KeyFile::new(
        identity::key_sources(part.batch, ctx.settings.order_changes_by),
        &keys.file,
    );
    let write_err = |source| {
        part.write_err(crate::write::WriteError::Iceberg {
            table: part.table.clone(),
            source: Box::new(source),
        })
    };
    env.parts
        .catalog
        .file_io()
        .new_output(&path)
        .map_err(write_err)?
        .write(file.to_bytes())
        .await
        .map_err(write_err)?;
    Ok(path)
}

/// Writes the equality deletes of a keyed batch: one key row per touched
/// key, those of its rows read into columns taken from their columns.
async fn write_deletes(
    part: &Part<'_>,
    ctx: &TableContext,
    touched: &KeyedFiles,
    name: &str,
) -> Result<Vec<DataFile>, PipelineError> {
    let Some(key_schema) = ctx.writer.key_schema().map_err(|e| part.write_err(e))? else {
        return Ok(Vec::new());
    };
    let mut shredder =
        Shredder::new(&key_schema, shred_options(&ctx.settings)).map_err(|s| part.shred_err(s))?;
    for k in &touched.keys {
        // Only keys that shredded once reach here.
        let _ = shredder.push(k);
    }
    let mut keys = shredder.finish().map_err(|s| part.shred_err(s))?;
    if let Some(reads) = &touched.reads {
        keys = with_read_keys(part, keys, reads)?;
    }
    ctx.writer
        .write_deletes(&keys, name)
        .await
        .map_err(|e| part.write_err(e))
}

/// `keys` and after them the key columns of `reads` (rows already in the
/// table's columns, so in the key schema's types).
fn with_read_keys(
    part: &Part<'_>,
    keys: RecordBatch,
    reads: &RecordBatch,
) -> Result<RecordBatch, PipelineError> {
    let err = |reason: String| PipelineError::Reads {
        table: part.table.clone(),
        batch_id: part.batch_id.to_string(),
        reason,
    };
    let schema = keys.schema();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let i = reads
            .schema()
            .index_of(field.name())
            .map_err(|_| err(format!("key column {} is missing", field.name())))?;
        columns.push(reads.column(i).clone());
    }
    let read_keys =
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| err(e.to_string()))?;
    arrow_select::concat::concat_batches(&schema, [&keys, &read_keys])
        .map_err(|e| err(e.to_string()))
}

/// Whether the part has anything for the committer. A keyed batch of
/// deletes only has no files with position deletes, but its key file says
/// what goes; a batch whose every record was rejected still says so to the
/// ledger, so a redelivery that would now accept them adds nothing the
/// dead-letter location already holds.
fn needs_request(
    batch: &SourceBatch,
    data: &RecordBatch,
    deletes: &[DataFile],
    keys: Option<&KeyedFiles>,
    rejected: u64,
) -> bool {
    let truncate = keys.is_some_and(|k| k.truncate);
    let touches = keys.is_some_and(|k| !k.file.is_empty());
    let nothing = data.num_rows() == 0 && deletes.is_empty() && !truncate && !touches;
    !(nothing && batch.state.is_empty() && (rejected == 0 || batch.spans.is_empty()))
}
