//! Row deletes by position, in the form the table's format asks for:
//! position-delete files before v3, `(file_path, pos)` rows with the field
//! ids the Iceberg spec reserves for them, sorted by path and position, read
//! by every Iceberg reader (pyiceberg 0.12 and Snowflake included, which
//! refuse equality deletes), one per partition since it applies to data
//! files of its own partition only; deletion vectors from v3 on
//! ([`super::vector`]), where new position-delete files are not allowed.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, NestedField, PartitionKey, PrimitiveType, Schema,
    Struct, Type,
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

/// Deleted rows of one data file.
#[derive(Debug, Clone)]
pub struct FileDeletes {
    /// The data file's path.
    pub data_file: String,
    /// The data file's partition spec.
    pub spec_id: i32,
    /// The data file's partition.
    pub partition: Struct,
    /// Row positions: from v3 on, every row of the file deleted so far (its
    /// one vector replaces the one before); before v3, the rows this commit
    /// deletes.
    pub rows: Vec<u32>,
}

impl TableWriter {
    /// Writes `deletes` as the table's format asks: position-delete files
    /// before v3, deletion vectors in one Puffin file from v3 on. Files are
    /// named after `name`; each comes with its partition spec id.
    pub async fn write_row_deletes(
        &self,
        deletes: Vec<FileDeletes>,
        name: &str,
    ) -> Result<Vec<(i32, DataFile)>, WriteError> {
        let deletes: Vec<FileDeletes> =
            deletes.into_iter().filter(|d| !d.rows.is_empty()).collect();
        if deletes.is_empty() {
            return Ok(Vec::new());
        }
        if self.format_version >= FormatVersion::V3 {
            return self.write_vectors(&deletes, name).await;
        }
        let mut groups: HashMap<(i32, Struct), Vec<(String, i64)>> = HashMap::new();
        for d in deletes {
            groups.entry((d.spec_id, d.partition)).or_default().extend(
                d.rows
                    .iter()
                    .map(|row| (d.data_file.clone(), i64::from(*row))),
            );
        }
        let mut out = Vec::new();
        for (n, ((spec_id, partition), mut rows)) in groups.into_iter().enumerate() {
            let name = format!("{name}-{n}");
            for f in self
                .write_position_deletes(spec_id, &partition, &mut rows, &name)
                .await?
            {
                out.push((spec_id, f));
            }
        }
        Ok(out)
    }

    /// Writes one position-delete file for rows of data files of partition
    /// `partition` of spec `spec_id`; `rows` in any order.
    async fn write_position_deletes(
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
