//! Arrow batches → Parquet data files in the table's storage, with the column
//! metrics Iceberg needs, one file (or more, past the target size) per partition.
//!
//! Row groups are bounded by the batch a writer holds (a source batch), so
//! `write.parquet.row-group-size-bytes` never binds before the batch ends.

mod dictionary;
mod properties;

use arrow_array::RecordBatch;
use iceberg::TableIdent;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, PartitionKey, PartitionSpecRef, Schema, SchemaRef, TableMetadata,
};
use iceberg::writer::CurrentFileStatus;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
pub use properties::*;

use crate::ident::display;

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
        source: PropertyError,
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

/// Writes data files for one table at one schema and partition spec.
pub struct TableWriter {
    ident: TableIdent,
    schema: SchemaRef,
    spec: PartitionSpecRef,
    file_io: FileIO,
    data_location: String,
    settings: FileSettings,
    splitter: Option<RecordBatchPartitionSplitter>,
}

impl TableWriter {
    /// A writer for the table's current schema and default partition spec.
    pub fn new(
        ident: &TableIdent,
        metadata: &TableMetadata,
        file_io: FileIO,
    ) -> Result<Self, WriteError> {
        let table = display(ident);
        let settings = FileSettings::from_properties(metadata.properties()).map_err(|source| {
            WriteError::Property {
                table: table.clone(),
                source,
            }
        })?;
        let schema = metadata.current_schema().clone();
        let spec = metadata.default_partition_spec().clone();
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
            file_io,
            data_location,
            settings,
            splitter,
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
        let builder = ParquetWriterBuilder::new(self.settings.parquet.clone(), key_schema);
        let path = format!("{}/{name}-eq-deletes.parquet", self.data_location);
        let output = self.file_io.new_output(&path).map_err(|e| self.err(e))?;
        let mut writer = builder.build(output).await.map_err(|e| self.err(e))?;
        writer.write(keys).await.map_err(|e| self.err(e))?;
        let mut files = Vec::new();
        for mut b in writer.close().await.map_err(|e| self.err(e))? {
            b.content(DataContentType::EqualityDeletes)
                .equality_ids(Some(ids.clone()))
                .partition_spec_id(self.spec.spec_id());
            files.push(b.build().map_err(|e| {
                self.err(iceberg::Error::new(
                    iceberg::ErrorKind::Unexpected,
                    e.to_string(),
                ))
            })?);
        }
        Ok(files)
    }

    /// Writes the batch as data files named `<name>-<n>.parquet`; returns them with metrics.
    pub async fn write(
        &self,
        batch: &RecordBatch,
        name: &str,
    ) -> Result<Vec<DataFile>, WriteError> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let parts = match &self.splitter {
            None => vec![(None, batch.clone())],
            Some(splitter) => splitter
                .split(batch)
                .map_err(|e| self.err(e))?
                .into_iter()
                .map(|(key, part)| (Some(key), part))
                .collect(),
        };
        let mut files = Vec::new();
        for (key, part) in parts {
            self.write_partition(key.as_ref(), &part, name, &mut files)
                .await?;
        }
        Ok(files)
    }

    async fn write_partition(
        &self,
        key: Option<&PartitionKey>,
        batch: &RecordBatch,
        name: &str,
        files: &mut Vec<DataFile>,
    ) -> Result<(), WriteError> {
        let dir = match key {
            Some(k) => format!("{}/{}", self.data_location, k.to_path()),
            None => self.data_location.clone(),
        };
        let props = dictionary::tune(&self.settings.parquet, batch);
        let builder = ParquetWriterBuilder::new(props, self.schema.clone());
        let mut offset = 0;
        while offset < batch.num_rows() {
            let path = format!("{dir}/{name}-{:05}.parquet", files.len());
            let output = self.file_io.new_output(&path).map_err(|e| self.err(e))?;
            let mut writer = builder.build(output).await.map_err(|e| self.err(e))?;
            while offset < batch.num_rows() {
                let len = ROLL_CHECK_ROWS.min(batch.num_rows() - offset);
                writer
                    .write(&batch.slice(offset, len))
                    .await
                    .map_err(|e| self.err(e))?;
                offset += len;
                if writer.current_written_size() as u64 >= self.settings.target_file_size {
                    break;
                }
            }
            for mut b in writer.close().await.map_err(|e| self.err(e))? {
                if let Some(k) = key {
                    b.partition(k.data().clone());
                }
                b.partition_spec_id(self.spec.spec_id());
                let file = b.build().map_err(|e| {
                    self.err(iceberg::Error::new(
                        iceberg::ErrorKind::Unexpected,
                        e.to_string(),
                    ))
                })?;
                files.push(file);
            }
        }
        Ok(())
    }

    fn err(&self, source: iceberg::Error) -> WriteError {
        WriteError::Iceberg {
            table: display(&self.ident),
            source: Box::new(source),
        }
    }
}
