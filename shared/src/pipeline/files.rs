//! A table's part of a batch made durable: data files, equality deletes
//! and the key file in storage, then its commit request enqueued. Only
//! after the enqueue does the part count as written.

use arrow_array::RecordBatch;
use bytes::Bytes;
use iceberg::TableIdent;
use iceberg::spec::DataFile;
use tracing::debug;
use uuid::Uuid;

use super::PipelineError;
use super::identity;
use super::part::{KeyedFiles, Output, TableContext, shred_err, shred_options};
use super::writer::{WriteReport, Writer};
use crate::commit::KeyedMode;
use crate::faults::FaultPoint;
use crate::ident::display;
use crate::ledger::{self, KeyFile};
use crate::metrics::Counters;
use crate::request::CommitRequest;
use crate::shred::Shredder;
use crate::source::SourceBatch;
use crate::write::rows::RowId;

impl Writer {
    /// Writes a table's part of a batch: data files, its deletes and key
    /// file, then the commit request enqueued.
    pub(super) async fn write_files(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        output: Output,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let table = display(ident);
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
        let deletes = self
            .key_deletes(&ctx, &table, batch_id, keys.as_ref(), &name)
            .await?;
        if !needs_request(batch, &data, &deletes, keys.as_ref(), rejected) {
            return Ok(());
        }
        let row_ids: Option<Vec<RowId>> = row_ids.into_iter().collect();
        let files = ctx
            .writer
            .write_rows(&data, row_ids.as_deref(), &name)
            .await
            .map_err(|source| PipelineError::Write {
                batch_id: batch_id.to_string(),
                source,
            })?;
        let key_file = match &keys {
            Some(k) if !k.file.is_empty() => {
                Some(self.write_key_file(&ctx, batch, k, &name, batch_id).await?)
            }
            _ => None,
        };
        let records = data.num_rows() as u64;
        let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
        report.records += records;
        report.files += files.len();
        report.bytes += bytes;
        let c = &self.parts.counters;
        Counters::add(&c.data_files, files.len() as u64);
        Counters::add(&c.data_bytes, bytes);
        Counters::add(&c.records_written, records);
        self.fault(FaultPoint::AfterUpload, &table, batch_id)?;

        let mut request =
            CommitRequest::new(ident.clone(), batch_id.to_string(), batch.spans.clone())
                .with_files(
                    &ctx.loaded.metadata,
                    (ctx.writer.schema_id(), ctx.writer.spec_id()),
                    files,
                    deletes,
                    records,
                )?
                .with_source(batch.state.clone(), rejected, batch.oldest_ms)
                .ordered_after(identity::origin_spans(batch));
        if let Some(k) = &keys {
            request = request.keyed(k.truncate, key_file);
            request.truncate_at = k.truncate_at.clone();
        }
        self.enqueue(ident, batch_id, &request).await?;
        debug!(records, "batch written");
        Ok(())
    }

    /// Sends the part's commit request to the table's queue.
    async fn enqueue(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        request: &CommitRequest,
    ) -> Result<(), PipelineError> {
        let table = display(ident);
        self.parts
            .queue
            .send_to(ident, Bytes::from(request.to_bytes()?))
            .await
            .map_err(|source| PipelineError::Queue {
                table: table.clone(),
                batch_id: batch_id.to_string(),
                source,
            })?;
        Counters::add(&self.parts.counters.requests, 1);
        self.fault(FaultPoint::AfterEnqueue, &table, batch_id)
    }

    /// The equality deletes of a keyed part, when its table takes them:
    /// with position deletes the committer finds the rows a batch replaces
    /// from its key file, so only equality-delete and copy-on-write tables
    /// take the keys as a file of key rows.
    async fn key_deletes(
        &self,
        ctx: &TableContext,
        table: &str,
        batch_id: &str,
        keys: Option<&KeyedFiles>,
        name: &str,
    ) -> Result<Vec<DataFile>, PipelineError> {
        let key_rows = !matches!(KeyedMode::of(&ctx.loaded.metadata), KeyedMode::Positions);
        match keys {
            Some(k) if key_rows && !k.keys.is_empty() => {
                self.write_deletes(ctx, table, batch_id, &k.keys, name)
                    .await
            }
            _ => Ok(Vec::new()),
        }
    }

    /// Writes the key file of a keyed batch beside the table's ledger.
    async fn write_key_file(
        &self,
        ctx: &TableContext,
        batch: &SourceBatch,
        keys: &KeyedFiles,
        name: &str,
        batch_id: &str,
    ) -> Result<String, PipelineError> {
        let path = format!(
            "{}/{name}.json.zst",
            ledger::place::keys_dir(&ctx.loaded.metadata)
        );
        let file = KeyFile::new(identity::key_sources(batch), &keys.file);
        let write_err = |source| PipelineError::Write {
            batch_id: batch_id.to_string(),
            source: crate::write::WriteError::Iceberg {
                table: display(&ctx.loaded.ident),
                source: Box::new(source),
            },
        };
        self.parts
            .catalog
            .file_io()
            .new_output(&path)
            .map_err(write_err)?
            .write(file.to_bytes())
            .await
            .map_err(write_err)?;
        Ok(path)
    }

    /// Writes the equality deletes of a keyed batch: one key row per touched key.
    async fn write_deletes(
        &self,
        ctx: &TableContext,
        table: &str,
        batch_id: &str,
        keys: &[Vec<u8>],
        name: &str,
    ) -> Result<Vec<iceberg::spec::DataFile>, PipelineError> {
        let write_err = |source| PipelineError::Write {
            batch_id: batch_id.to_string(),
            source,
        };
        let Some(key_schema) = ctx.writer.key_schema().map_err(write_err)? else {
            return Ok(Vec::new());
        };
        let mut shredder = Shredder::new(&key_schema, shred_options(&ctx.settings))
            .map_err(|s| shred_err(table, batch_id, s))?;
        for k in keys {
            // Only keys that shredded once reach here.
            let _ = shredder.push(k);
        }
        let keys = shredder
            .finish()
            .map_err(|s| shred_err(table, batch_id, s))?;
        ctx.writer
            .write_deletes(&keys, name)
            .await
            .map_err(write_err)
    }
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
