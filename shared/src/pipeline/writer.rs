//! The writer step: one source batch in, data files durable in storage, bad
//! records dead-lettered, one commit request enqueued — and only then success.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iceberg::TableIdent;
use tokio::sync::Mutex;
use tracing::{debug, instrument};
use uuid::Uuid;

use super::PipelineError;
use crate::catalog::{CatalogRef, LoadedTable};
use crate::dlq::{DeadLetters, Rejected};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;
use crate::metrics::Counters;
use crate::ndjson::Chunk;
use crate::queue::QueueRef;
use crate::request::{CommitRequest, VERSION};
use crate::shred::{ShredOptions, Shredder};
use crate::source::SourceSpan;
use crate::write::TableWriter;

/// The records of a source batch.
#[derive(Debug, Clone)]
pub enum Records {
    /// NDJSON lines; a record's position is its line number.
    Ndjson(Chunk),
    /// Separate records, each with its source position (offset, sequence number, message id).
    Items(Vec<(String, Bytes)>),
}

impl Records {
    fn for_each(&self, mut f: impl FnMut(&dyn Fn() -> String, &[u8])) {
        match self {
            Records::Ndjson(chunk) => {
                for (line, rec) in chunk.records() {
                    f(&|| format!("line {line}"), rec);
                }
            }
            Records::Items(items) => {
                for (pos, rec) in items {
                    f(&|| pos.clone(), rec);
                }
            }
        }
    }
}

/// One invocation's worth of records for one table.
#[derive(Debug, Clone)]
pub struct SourceBatch {
    /// The target table.
    pub table: TableIdent,
    /// Deterministic id derived from `spans` (see [`crate::source::batch_id`]).
    pub batch_id: String,
    /// The source positions the batch covers.
    pub spans: Vec<SourceSpan>,
    /// The records.
    pub records: Records,
}

/// What the writer step did with a batch.
#[derive(Debug, Clone, Default)]
pub struct WriteReport {
    /// The batch.
    pub batch_id: String,
    /// Records written to data files.
    pub records: u64,
    /// Data files written.
    pub files: usize,
    /// Bytes of data files written.
    pub bytes: u64,
    /// Records dead-lettered.
    pub rejected: Vec<Rejected>,
    /// Where they were dead-lettered.
    pub dead_letter_location: Option<String>,
}

struct TableContext {
    loaded: LoadedTable,
    writer: TableWriter,
}

/// The writer step, shared by concurrent tasks.
pub struct Writer {
    catalog: CatalogRef,
    queue: QueueRef,
    dead_letters: Arc<dyn DeadLetters>,
    faults: Faults,
    counters: Arc<Counters>,
    options: ShredOptions,
    tables: Mutex<HashMap<TableIdent, Arc<TableContext>>>,
}

impl Writer {
    /// A writer step over these parts.
    pub fn new(
        catalog: CatalogRef,
        queue: QueueRef,
        dead_letters: Arc<dyn DeadLetters>,
        faults: Faults,
        counters: Arc<Counters>,
        options: ShredOptions,
    ) -> Self {
        Self {
            catalog,
            queue,
            dead_letters,
            faults,
            counters,
            options,
            tables: Mutex::new(HashMap::new()),
        }
    }

    async fn table(&self, ident: &TableIdent) -> Result<Arc<TableContext>, PipelineError> {
        let mut tables = self.tables.lock().await;
        if let Some(ctx) = tables.get(ident) {
            return Ok(ctx.clone());
        }
        let loaded = self.catalog.load_table(ident).await?;
        let writer = TableWriter::new(ident, &loaded.metadata, self.catalog.file_io().clone())
            .map_err(|source| PipelineError::Write {
                batch_id: String::new(),
                source,
            })?;
        let ctx = Arc::new(TableContext { loaded, writer });
        tables.insert(ident.clone(), ctx.clone());
        Ok(ctx)
    }

    /// Runs the step for one batch; success means every record is durable in a
    /// data file or the dead-letter location, and the commit request is enqueued.
    #[instrument(skip_all, fields(table = %display(&batch.table), batch_id = %batch.batch_id))]
    pub async fn write(&self, batch: SourceBatch) -> Result<WriteReport, PipelineError> {
        let table = display(&batch.table);
        let batch_id = batch.batch_id.clone();
        let ctx = self.table(&batch.table).await?;
        let schema = ctx.loaded.metadata.current_schema();
        let shred_err = |source| PipelineError::Shred {
            table: table.clone(),
            batch_id: batch_id.clone(),
            source: Box::new(source),
        };
        let mut shredder = Shredder::new(schema, self.options.clone()).map_err(shred_err)?;
        let source_name = batch
            .spans
            .first()
            .map(|s| s.source.clone())
            .unwrap_or_default();
        let mut rejected = Vec::new();
        let mut seen = 0u64;
        batch.records.for_each(|position, record| {
            seen += 1;
            if let Err(e) = shredder.push(record) {
                rejected.push(Rejected {
                    table: table.clone(),
                    batch_id: batch_id.clone(),
                    source: source_name.clone(),
                    position: position(),
                    field: e.field,
                    reason: e.reason,
                    record: String::from_utf8_lossy(record).into_owned(),
                });
            }
        });
        Counters::add(&self.counters.records_in, seen);
        let data = shredder.finish().map_err(shred_err)?;

        let mut report = WriteReport {
            batch_id: batch_id.clone(),
            records: data.num_rows() as u64,
            ..Default::default()
        };
        if !rejected.is_empty() {
            let location = self
                .dead_letters
                .put(&batch.table, &batch_id, &rejected)
                .await?;
            Counters::add(&self.counters.records_rejected, rejected.len() as u64);
            report.dead_letter_location = Some(location);
        }
        report.rejected = rejected;
        if data.num_rows() == 0 {
            return Ok(report);
        }

        let name = format!(
            "{}-{}",
            batch_id.get(..16).unwrap_or(&batch_id),
            Uuid::now_v7().simple()
        );
        let files =
            ctx.writer
                .write(&data, &name)
                .await
                .map_err(|source| PipelineError::Write {
                    batch_id: batch_id.clone(),
                    source,
                })?;
        report.files = files.len();
        report.bytes = files.iter().map(|f| f.file_size_in_bytes()).sum();
        Counters::add(&self.counters.data_files, report.files as u64);
        Counters::add(&self.counters.data_bytes, report.bytes);
        Counters::add(&self.counters.records_written, report.records);
        self.fault(FaultPoint::AfterUpload, &table, &batch_id)?;

        let spec_id = ctx.writer.spec_id();
        let request = CommitRequest {
            version: VERSION,
            table: batch.table.clone(),
            batch_id: batch_id.clone(),
            sources: batch.spans,
            schema_id: ctx.writer.schema_id(),
            spec_id,
            data_files: CommitRequest::encode_files(
                &ctx.loaded.metadata,
                spec_id,
                files,
                (&batch.table, &batch_id),
            )?,
            delete_files: Vec::new(),
            record_count: report.records,
            rejected_count: report.rejected.len() as u64,
            created_at_ms: now_ms(),
        };
        self.queue
            .send(Bytes::from(request.to_bytes()?))
            .await
            .map_err(|source| PipelineError::Queue {
                table: table.clone(),
                batch_id: batch_id.clone(),
                source,
            })?;
        Counters::add(&self.counters.requests, 1);
        self.fault(FaultPoint::AfterEnqueue, &table, &batch_id)?;
        debug!(
            records = report.records,
            files = report.files,
            "batch written"
        );
        Ok(report)
    }

    fn fault(&self, point: FaultPoint, table: &str, batch_id: &str) -> Result<(), PipelineError> {
        self.faults
            .hit(point)
            .map_err(|source| PipelineError::Fault {
                table: table.to_string(),
                batch_id: batch_id.to_string(),
                source,
            })
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
