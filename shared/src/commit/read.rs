//! Reads one data or delete file back as Arrow, through iceberg-rust's reader,
//! so columns are matched by field id and projected onto the current schema
//! (columns added since the file was written read as null, widened types are
//! cast) exactly as any scan of the table would see them.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, new_null_array};
use arrow_schema::{Field, Schema as ArrowSchema};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataFile, SchemaRef, Type};

use crate::write::footer;

/// Reads the columns `field_ids` of `file` as `schema` has them.
pub async fn read_file(
    file_io: &FileIO,
    schema: SchemaRef,
    field_ids: Vec<i32>,
    file: &DataFile,
) -> iceberg::Result<Vec<RecordBatch>> {
    let top = schema.as_struct();
    let nested = |id: &i32| {
        top.field_by_id(*id)
            .is_some_and(|f| holds_list_or_map(&f.field_type))
    };
    let top_level = field_ids.iter().all(|id| top.field_by_id(*id).is_some());
    if !top_level || !field_ids.iter().any(nested) {
        return scan(file_io, schema, field_ids, file).await;
    }
    // iceberg-rust 0.10 cannot fill a list or map column that a file
    // predates with nulls ("unexpected target column type List"), so a
    // table that gained one could never be compacted again: read the
    // columns the file has, and add the others as nulls here.
    let meta = footer::read(file_io, file.file_path(), file.file_size_in_bytes()).await?;
    let present = footer::top_level_field_ids(&meta);
    let (held, absent): (Vec<i32>, Vec<i32>) =
        field_ids.iter().partition(|id| present.contains(id));
    if absent.is_empty() {
        return scan(file_io, schema, field_ids, file).await;
    }
    let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)?;
    let field_of = |id: i32| -> iceberg::Result<Arc<Field>> {
        let name = schema
            .field_by_id(id)
            .map(|f| f.name.clone())
            .unwrap_or_default();
        arrow
            .field_with_name(&name)
            .map(|f| Arc::new(f.clone()))
            .map_err(|e| invalid("a column the table's schema has", e))
    };
    let batches = if held.is_empty() {
        let rows = usize::try_from(file.record_count()).unwrap_or(usize::MAX);
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        vec![
            RecordBatch::try_new_with_options(Arc::new(ArrowSchema::empty()), vec![], &options)
                .map_err(|e| invalid("an empty batch of the file's rows", e))?,
        ]
    } else {
        scan(file_io, schema.clone(), held.clone(), file).await?
    };
    batches
        .into_iter()
        .map(|batch| {
            let rows = batch.num_rows();
            let mut fields = Vec::with_capacity(field_ids.len());
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(field_ids.len());
            for id in &field_ids {
                match held.iter().position(|h| h == id) {
                    Some(i) => {
                        fields.push(batch.schema().field(i).clone().into());
                        columns.push(batch.column(i).clone());
                    }
                    None => {
                        let field = field_of(*id)?;
                        columns.push(new_null_array(field.data_type(), rows));
                        fields.push(field);
                    }
                }
            }
            RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns)
                .map_err(|e| invalid("the file's rows in the table's columns", e))
        })
        .collect()
}

/// Whether a value of `ty` holds a list or a map, at any depth.
fn holds_list_or_map(ty: &Type) -> bool {
    match ty {
        Type::Primitive(_) => false,
        Type::Struct(s) => s.fields().iter().any(|f| holds_list_or_map(&f.field_type)),
        Type::List(_) | Type::Map(_) => true,
    }
}

/// iceberg-rust's scan of the one file.
async fn scan(
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

/// Arrow refused to build `what`.
fn invalid(what: &str, e: arrow_schema::ArrowError) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, what.to_string()).with_source(e)
}
