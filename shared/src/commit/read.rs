//! Reads one data or delete file back as Arrow, through iceberg-rust's reader,
//! so columns are matched by field id and projected onto the current schema
//! (columns added since the file was written read as null, widened types are
//! cast) exactly as any scan of the table would see them.

use arrow_array::RecordBatch;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataFile, SchemaRef};

/// Reads the columns `field_ids` of `file` as `schema` has them.
pub async fn read_file(
    file_io: &FileIO,
    schema: SchemaRef,
    field_ids: Vec<i32>,
    file: &DataFile,
) -> iceberg::Result<Vec<RecordBatch>> {
    let task = FileScanTask::builder()
        .with_file_size_in_bytes(file.file_size_in_bytes())
        .with_start(0)
        .with_length(file.file_size_in_bytes())
        .with_record_count(Some(file.record_count()))
        .with_data_file_path(file.file_path().to_string())
        .with_data_file_format(file.file_format())
        .with_schema(schema)
        .with_project_field_ids(field_ids)
        .with_case_sensitive(true)
        .build();
    let reader = ArrowReaderBuilder::new(file_io.clone(), iceberg::Runtime::try_current()?).build();
    let tasks = futures::stream::iter([Ok(task)]).boxed();
    reader.read(tasks)?.stream().try_collect().await
}
