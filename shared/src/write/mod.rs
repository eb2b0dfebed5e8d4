//! Arrow batches → Parquet data files in the table's storage, with the column
//! metrics Iceberg needs, one file (or more, past the target size) per partition.
//!
//! Row groups are bounded by the batch a writer holds (a source batch), so
//! `write.parquet.row-group-size-bytes` never binds before the batch ends.

mod dictionary;
pub mod footer;
mod metrics;
pub mod parquet;
pub mod position;
mod properties;
pub mod rows;
pub mod vector;

use std::sync::Arc;

use ::parquet::file::metadata::KeyValue;
use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::{Field, Schema as ArrowSchema};
use iceberg::TableIdent;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, FormatVersion, PartitionKey, PartitionSpecRef,
    Schema, SchemaRef, TableMetadata,
};
pub use metrics::{MetricsConfig, MetricsMode};
use parquet::ParquetFile;
pub use position::FileDeletes;
pub use properties::*;
use rows::RowId;

use crate::error::{Classify, ConfigError, ErrorKind};
use crate::ident::display;

/// The number table property `key` holds, if it is set.
fn number<T: std::str::FromStr>(
    props: &std::collections::HashMap<String, String>,
    key: &str,
) -> Result<Option<T>, ConfigError> {
    props
        .get(key)
        .map(|v| {
            v.trim().parse::<T>().map_err(|_| ConfigError::Property {
                key: key.into(),
                value: v.clone(),
                reason: "not a valid number".into(),
            })
        })
        .transpose()
}

/// Table properties from pairs, for the tests of what reads them.
#[cfg(test)]
fn props(kv: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Rows handed to the Parquet writer between two checks of the file size.
const ROLL_CHECK_ROWS: usize = 16 * 1024;

/// Why data files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A table property has a value floe cannot use.
    #[error("table {table}: {source}")]
    Property {
        /// The table.
        table: String,
        /// The property at fault.
        source: Box<ConfigError>,
    },
    /// Parquet encoding, partitioning or storage failed.
    #[error("table {table}: writing data files: {source}")]
    Iceberg {
        /// The table.
        table: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
}

/// Writing again may pass when storage failed; a property floe cannot use,
/// or data Parquet cannot hold, fails the same way every time.
impl Classify for WriteError {
    fn kind(&self) -> ErrorKind {
        match self {
            WriteError::Property { .. } => ErrorKind::Config,
            WriteError::Iceberg { source, .. } => Classify::kind(source.as_ref()),
        }
    }
}

/// One partition's rows of a batch, with the batch rows they were (when
/// tracked).
type Part = (Option<PartitionKey>, RecordBatch, Option<Vec<u32>>);

/// Writes data files for one table at one schema and partition spec.
pub struct TableWriter {
    ident: TableIdent,
    schema: SchemaRef,
    spec: PartitionSpecRef,
    specs: Vec<PartitionSpecRef>,
    file_io: FileIO,
    data_location: String,
    settings: FileSettings,
    splitter: Option<RecordBatchPartitionSplitter>,
    /// Decides how row deletes are written (deletion vectors from v3 on).
    format_version: FormatVersion,
}

impl TableWriter {
    /// A writer for the table's current schema and default partition spec.
    pub fn new(
        ident: &TableIdent,
        metadata: &TableMetadata,
        file_io: FileIO,
    ) -> Result<Self, WriteError> {
        Self::with(
            ident,
            metadata,
            metadata.current_schema().clone(),
            metadata.default_partition_spec().clone(),
            file_io,
        )
    }

    /// A writer for files of `schema` (the current one with columns of its
    /// own, such as row lineage) and the default partition spec.
    pub fn with_schema(
        ident: &TableIdent,
        metadata: &TableMetadata,
        schema: SchemaRef,
        file_io: FileIO,
    ) -> Result<Self, WriteError> {
        let spec = metadata.default_partition_spec().clone();
        Self::with(ident, metadata, schema, spec, file_io)
    }

    /// A writer for files of schema `schema_id` and partition spec `spec_id`,
    /// which need not be the current ones (rewriting a request's files as
    /// they were written).
    pub fn for_ids(
        ident: &TableIdent,
        metadata: &TableMetadata,
        schema_id: i32,
        spec_id: i32,
        file_io: FileIO,
    ) -> Result<Self, WriteError> {
        let missing = |what: String| WriteError::Iceberg {
            table: display(ident),
            source: Box::new(iceberg::Error::new(iceberg::ErrorKind::DataInvalid, what)),
        };
        let schema = metadata
            .schema_by_id(schema_id)
            .cloned()
            .ok_or_else(|| missing(format!("no schema {schema_id}")))?;
        let spec = metadata
            .partition_spec_by_id(spec_id)
            .cloned()
            .ok_or_else(|| missing(format!("no partition spec {spec_id}")))?;
        Self::with(ident, metadata, schema, spec, file_io)
    }

    fn with(
        ident: &TableIdent,
        metadata: &TableMetadata,
        schema: SchemaRef,
        spec: PartitionSpecRef,
        file_io: FileIO,
    ) -> Result<Self, WriteError> {
        let table = display(ident);
        let settings = FileSettings::from_properties(metadata.properties()).map_err(|source| {
            WriteError::Property {
                table: table.clone(),
                source: Box::new(source),
            }
        })?;
        let splitter = if spec.is_unpartitioned() {
            None
        } else {
            Some(
                RecordBatchPartitionSplitter::try_new_with_computed_values(
                    schema.clone(),
                    spec.clone(),
                )
                .map_err(|source| WriteError::Iceberg {
                    table: table.clone(),
                    source: Box::new(source),
                })?,
            )
        };
        let data_location = metadata
            .properties()
            .get("write.data.path")
            .cloned()
            .unwrap_or_else(|| format!("{}/data", metadata.location().trim_end_matches('/')));
        Ok(Self {
            ident: ident.clone(),
            schema,
            spec,
            specs: metadata.partition_specs_iter().cloned().collect(),
            file_io,
            data_location,
            settings,
            splitter,
            format_version: metadata.format_version(),
        })
    }

    /// The schema id files are written with.
    pub fn schema_id(&self) -> i32 {
        self.schema.schema_id()
    }

    /// The partition spec id files are written with.
    pub fn spec_id(&self) -> i32 {
        self.spec.spec_id()
    }

    /// The schema of equality-delete rows: the table's identifier fields, or
    /// `None` when the table has none (it is append-only).
    pub fn key_schema(&self) -> Result<Option<SchemaRef>, WriteError> {
        let ids: Vec<i32> = self.schema.identifier_field_ids().collect();
        if ids.is_empty() {
            return Ok(None);
        }
        let fields = ids.iter().filter_map(|id| {
            self.schema
                .as_struct()
                .fields()
                .iter()
                .find(|f| f.id == *id)
                .cloned()
        });
        let schema = Schema::builder()
            .with_schema_id(self.schema.schema_id())
            .with_identifier_field_ids(ids.clone())
            .with_fields(fields)
            .build()
            .map_err(|e| self.err(e))?;
        Ok(Some(std::sync::Arc::new(schema)))
    }

    /// Writes an equality-delete file of the key rows in `keys` (batch of [`Self::key_schema`]),
    /// deleting every older row with one of those keys.
    pub async fn write_deletes(
        &self,
        keys: &RecordBatch,
        name: &str,
    ) -> Result<Vec<DataFile>, WriteError> {
        let Some(key_schema) = self.key_schema()? else {
            return Ok(Vec::new());
        };
        if keys.num_rows() == 0 {
            return Ok(Vec::new());
        }
        if !self.spec.is_unpartitioned() {
            return Err(self.err(iceberg::Error::new(
                iceberg::ErrorKind::FeatureUnsupported,
                "keyed (upsert) tables must be unpartitioned for now",
            )));
        }
        let ids: Vec<i32> = key_schema.identifier_field_ids().collect();
        let path = format!("{}/{name}-eq-deletes.parquet", self.data_location);
        self.write_delete_file(&path, key_schema, keys, |b| {
            b.content(DataContentType::EqualityDeletes)
                .equality_ids(Some(ids.clone()))
                .partition_spec_id(self.spec.spec_id());
        })
        .await
    }

    /// Writes `batch` of `schema` as one delete file at `path`; `describe`
    /// sets its kind (content, equality ids, partition) on what the writer
    /// closes.
    async fn write_delete_file(
        &self,
        path: &str,
        schema: SchemaRef,
        batch: &RecordBatch,
        describe: impl Fn(&mut DataFileBuilder),
    ) -> Result<Vec<DataFile>, WriteError> {
        let output = self.file_io.new_output(path).map_err(|e| self.err(e))?;
        // Delete files keep every metric: a position-delete file's path
        // bounds are how readers tell which data file it deletes from.
        let mut writer = ParquetFile::new(
            output,
            schema,
            self.settings.parquet.clone(),
            &MetricsConfig::full(),
        );
        writer.write(batch).await.map_err(|e| self.err(e))?;
        let Some(mut b) = writer.close().await.map_err(|e| self.err(e))? else {
            return Ok(Vec::new());
        };
        describe(&mut b);
        let file = b
            .build()
            .map_err(|e| self.unexpected("a data file entry", e))?;
        Ok(vec![file])
    }

    /// Writes the batch as data files named `<name>-<n>.parquet`; returns them with metrics.
    pub async fn write(
        &self,
        batch: &RecordBatch,
        name: &str,
    ) -> Result<Vec<DataFile>, WriteError> {
        self.write_rows(batch, None, name).await
    }

    /// Writes the batch as [`Self::write`] does, each file carrying in its
    /// footer the source record of each of its rows (`rows[i]` for row `i`
    /// of `batch`; see [`rows`]).
    pub async fn write_rows(
        &self,
        batch: &RecordBatch,
        rows: Option<&[RowId]>,
        name: &str,
    ) -> Result<Vec<DataFile>, WriteError> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let rows = rows.filter(|r| r.len() == batch.num_rows());
        let parts: Vec<Part> = match (&self.splitter, rows) {
            (None, _) => vec![(None, batch.clone(), None)],
            (Some(splitter), None) => splitter
                .split(batch)
                .map_err(|e| self.err(e))?
                .into_iter()
                .map(|(key, part)| (Some(key), part, None))
                .collect(),
            (Some(splitter), Some(_)) => self.split_with_ordinals(splitter, batch)?,
        };
        let mut files = Vec::new();
        for (key, part, ordinals) in parts {
            let part_rows: Option<Vec<&RowId>> = rows.map(|rows| match &ordinals {
                Some(o) => o.iter().filter_map(|i| rows.get(*i as usize)).collect(),
                None => rows.iter().collect(),
            });
            self.write_partition(key.as_ref(), &part, part_rows.as_deref(), name, &mut files)
                .await?;
        }
        Ok(files)
    }

    /// Splits by partition keeping track of which input row each output row
    /// was: iceberg's splitter keeps row order but not row numbers, so the
    /// numbers ride along as one more column.
    fn split_with_ordinals(
        &self,
        splitter: &RecordBatchPartitionSplitter,
        batch: &RecordBatch,
    ) -> Result<Vec<Part>, WriteError> {
        let ordinals: ArrayRef =
            Arc::new(UInt32Array::from_iter_values(0..batch.num_rows() as u32));
        let mut fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(
            "_floe_ordinal",
            arrow_schema::DataType::UInt32,
            false,
        ));
        let mut columns = batch.columns().to_vec();
        columns.push(ordinals);
        let widened = RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns)
            .map_err(|e| self.unexpected("the batch with its row numbers", e))?;
        let last = batch.num_columns();
        splitter
            .split(&widened)
            .map_err(|e| self.err(e))?
            .into_iter()
            .map(|(key, part)| {
                let ordinals: Vec<u32> = part
                    .column(last)
                    .as_any()
                    .downcast_ref::<UInt32Array>()
                    .map(|a| a.values().to_vec())
                    .unwrap_or_default();
                let part = part
                    .project(&(0..last).collect::<Vec<_>>())
                    .map_err(|e| self.unexpected("a partition without its row numbers", e))?;
                Ok((Some(key), part, Some(ordinals)))
            })
            .collect()
    }

    async fn write_partition(
        &self,
        key: Option<&PartitionKey>,
        batch: &RecordBatch,
        rows: Option<&[&RowId]>,
        name: &str,
        files: &mut Vec<DataFile>,
    ) -> Result<(), WriteError> {
        let dir = match key {
            Some(k) => format!("{}/{}", self.data_location, k.to_path()),
            None => self.data_location.clone(),
        };
        let props = dictionary::tune(&self.settings.parquet, batch);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let path = format!("{dir}/{name}-{:05}.parquet", files.len());
            let output = self.file_io.new_output(&path).map_err(|e| self.err(e))?;
            let start = offset;
            // The footer names each row's record; a file that rolls over at
            // the target size ends early, so its rows are known only then:
            // size the file first, then write it with its footer.
            let end = match rows {
                Some(_) => self.rows_until_target(batch, start),
                None => batch.num_rows(),
            };
            let props = match rows {
                Some(rows) => props
                    .clone()
                    .into_builder()
                    .set_key_value_metadata(Some(vec![KeyValue::new(
                        rows::FOOTER_KEY.to_string(),
                        rows::encode(rows[start..end].iter().copied()),
                    )]))
                    .build(),
                None => props.clone(),
            };
            let mut writer =
                ParquetFile::new(output, self.schema.clone(), props, &self.settings.metrics);
            while offset < end {
                let len = ROLL_CHECK_ROWS.min(end - offset);
                writer
                    .write(&batch.slice(offset, len))
                    .await
                    .map_err(|e| self.err(e))?;
                offset += len;
                if rows.is_none() && writer.written_size() as u64 >= self.settings.target_file_size
                {
                    break;
                }
            }
            if let Some(mut b) = writer.close().await.map_err(|e| self.err(e))? {
                if let Some(k) = key {
                    b.partition(k.data().clone());
                }
                b.partition_spec_id(self.spec.spec_id());
                let file = b
                    .build()
                    .map_err(|e| self.unexpected("a data file entry", e))?;
                files.push(file);
            }
        }
        Ok(())
    }

    /// Where a file starting at row `start` should end to stay near the
    /// target size, judged before writing from the rows' Arrow size (Parquet
    /// with zstd is about a quarter of it for typical events).
    fn rows_until_target(&self, batch: &RecordBatch, start: usize) -> usize {
        let n = batch.num_rows();
        let expected = batch.get_array_memory_size() as u128 / 4;
        let target = u128::from(self.settings.target_file_size.max(1));
        if expected <= target {
            return n;
        }
        let per_file = ((n as u128 * target / expected) as usize).max(ROLL_CHECK_ROWS);
        (start + per_file).min(n)
    }

    /// The table's partition spec `spec_id`.
    fn metadata_spec(&self, spec_id: i32) -> Option<&PartitionSpecRef> {
        self.specs.iter().find(|s| s.spec_id() == spec_id)
    }

    fn err(&self, source: iceberg::Error) -> WriteError {
        WriteError::Iceberg {
            table: display(&self.ident),
            source: Box::new(source),
        }
    }

    /// A step Arrow or iceberg-rust should never refuse here failed building `what`.
    fn unexpected(
        &self,
        what: &str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> WriteError {
        self.err(
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, what.to_string()).with_source(e),
        )
    }
}
