//! Position-delete files: `(file_path, pos)` rows naming the rows of data
//! files that are gone, with the field ids the Iceberg spec reserves for
//! them, sorted by path and position as the spec asks. Every Iceberg reader
//! reads them (pyiceberg 0.12 and Snowflake included, which refuse equality
//! deletes). A position-delete file applies to data files of its own
//! partition only, so a commit writes one per partition it deletes from.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use iceberg::spec::{
    DataContentType, DataFile, NestedField, PartitionKey, PrimitiveType, Schema, Struct, Type,
};

use super::{TableWriter, WriteError};

/// Field id of `file_path` in position-delete files.
pub const FILE_PATH_FIELD_ID: i32 = 2147483546;
/// Field id of `pos` in position-delete files.
pub const POS_FIELD_ID: i32 = 2147483545;

/// The schema of position-delete files.
pub fn schema() -> iceberg::Result<Schema> {
    Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                FILE_PATH_FIELD_ID,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::required(
                POS_FIELD_ID,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )),
        ])
        .build()
}

impl TableWriter {
    /// Writes one position-delete file for rows of data files of partition
    /// `partition` of spec `spec_id`; `rows` in any order.
    pub async fn write_position_deletes(
        &self,
        spec_id: i32,
        partition: &Struct,
        rows: &mut [(String, i64)],
        name: &str,
    ) -> Result<Vec<DataFile>, WriteError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        rows.sort_unstable();
        let schema = Arc::new(schema().map_err(|e| self.err(e))?);
        let arrow =
            Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).map_err(|e| self.err(e))?);
        let paths: ArrayRef = Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(p, _)| p.as_str()),
        ));
        let positions: ArrayRef = Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, pos)| *pos),
        ));
        let batch = RecordBatch::try_new(arrow, vec![paths, positions]).map_err(|e| {
            self.err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                e.to_string(),
            ))
        })?;
        let spec = self.metadata_spec(spec_id).ok_or_else(|| {
            self.err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("no partition spec {spec_id}"),
            ))
        })?;
        let dir = if spec.is_unpartitioned() {
            self.data_location.clone()
        } else {
            let key = PartitionKey::new(
                spec.as_ref().clone(),
                self.schema.clone(),
                partition.clone(),
            );
            format!("{}/{}", self.data_location, key.to_path())
        };
        let path = format!("{dir}/{name}-pos-deletes.parquet");
        self.write_delete_file(&path, schema, &batch, |b| {
            b.content(DataContentType::PositionDeletes)
                .partition(partition.clone())
                .partition_spec_id(spec_id);
        })
        .await
    }
}
