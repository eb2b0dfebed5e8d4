//! Reads one data or delete file back as Arrow onto a schema, matching
//! columns by field id at every depth: a column, or a field of a struct,
//! list element or map value, that the file predates reads as null; a
//! widened type is cast. Compaction, copy-on-write, key filters and lineage
//! all read through here, so a table whose nested structs gained fields by
//! evolution reads the same way on each of them.
//!
//! iceberg-rust 0.10's reader fills only top-level columns a file lacks
//! ("Incorrect number of arrays for StructArray fields" for a nested one),
//! so the parquet crate reads the file here and the columns are fitted to
//! the schema by id. A file without field ids (written by a tool that
//! names columns only) is left to iceberg-rust's scan, which maps names.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, MapArray, RecordBatch, RecordBatchOptions, StructArray};
use arrow_array::{GenericListArray, OffsetSizeTrait, new_null_array};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema as ArrowSchema};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowFileReader, ArrowReaderBuilder};
use iceberg::io::{FileIO, FileMetadata};
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataFile, SchemaRef};
use iceberg::{Error, ErrorKind};
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ParquetRecordBatchStreamBuilder, ProjectionMask};

/// Reads the top-level columns `field_ids` of `file` as `schema` has them,
/// in that order.
pub async fn read_file(
    file_io: &FileIO,
    schema: SchemaRef,
    field_ids: Vec<i32>,
    file: &DataFile,
) -> iceberg::Result<Vec<RecordBatch>> {
    let path = file.file_path();
    let target = iceberg::arrow::schema_to_arrow_schema(&schema)?;
    let wanted = field_ids
        .iter()
        .map(|id| {
            target
                .fields()
                .iter()
                .find(|f| field_id(f) == Some(*id))
                .cloned()
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::DataInvalid,
                        format!("{path}: field id {id} is not a column of the schema read with"),
                    )
                })
        })
        .collect::<iceberg::Result<Vec<FieldRef>>>()?;
    let parquet_err = |e: parquet::errors::ParquetError| {
        Error::new(ErrorKind::DataInvalid, format!("{path}: {e}"))
    };
    let size = FileMetadata {
        size: file.file_size_in_bytes(),
    };
    let source = ArrowFileReader::new(size, file_io.new_input(path)?.reader().await?);
    let builder = ParquetRecordBatchStreamBuilder::new(source)
        .await
        .map_err(parquet_err)?;
    let file_schema = builder.schema().clone();
    if !has_field_ids(file_schema.fields()) {
        return scan(file_io, schema, field_ids, file).await;
    }
    let roots: Vec<usize> = file_schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| field_id(f).is_some_and(|id| field_ids.contains(&id)))
        .map(|(i, _)| i)
        .collect();
    let out_schema = Arc::new(ArrowSchema::new(wanted.clone()));
    if roots.is_empty() {
        // None of the columns is in the file: its rows, all null.
        let rows =
            usize::try_from(builder.metadata().file_metadata().num_rows()).map_err(|_| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("{path}: a negative row count"),
                )
            })?;
        return Ok(vec![nulls(&out_schema, rows)?]);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let stream = builder.with_projection(mask).build().map_err(parquet_err)?;
    let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(parquet_err)?;
    batches
        .iter()
        .map(|batch| fit_batch(batch, &wanted, &out_schema, path))
        .collect()
}

/// `batch`, read from the file at `path`, as the columns `wanted`.
fn fit_batch(
    batch: &RecordBatch,
    wanted: &[FieldRef],
    out_schema: &Arc<ArrowSchema>,
    path: &str,
) -> iceberg::Result<RecordBatch> {
    let columns = wanted
        .iter()
        .map(|want| {
            let at = batch
                .schema()
                .fields()
                .iter()
                .position(|f| field_id(f) == field_id(want));
            match at {
                Some(i) => fit(batch.column(i), want),
                None => Ok(new_null_array(want.data_type(), batch.num_rows())),
            }
            .map_err(|e| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("{path}: column `{}` onto the table's schema", want.name()),
                )
                .with_source(e)
            })
        })
        .collect::<iceberg::Result<Vec<ArrayRef>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(out_schema.clone(), columns, &options).map_err(|e| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("{path}: rows onto the table's schema"),
        )
        .with_source(e)
    })
}

/// A batch of `rows` rows, every column null.
fn nulls(schema: &Arc<ArrowSchema>, rows: usize) -> iceberg::Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), rows))
        .collect();
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, "a file's rows as nulls").with_source(e))
}

/// The Iceberg field id Arrow field metadata carries.
fn field_id(f: &Field) -> Option<i32> {
    f.metadata().get(PARQUET_FIELD_ID_META_KEY)?.parse().ok()
}

/// Whether the file's columns carry field ids (every Iceberg writer's
/// do; a file imported from elsewhere may name its columns only).
fn has_field_ids(fields: &Fields) -> bool {
    fields.iter().any(|f| field_id(f).is_some())
}

/// `array`, read from a file, as the table's `target` field has it: struct
/// fields matched by id (absent ones null), list elements and map entries
/// fitted the same way, other types cast.
fn fit(array: &ArrayRef, target: &Field) -> Result<ArrayRef, arrow_schema::ArrowError> {
    if array.data_type() == target.data_type() {
        return Ok(array.clone());
    }
    match target.data_type() {
        DataType::Struct(fields) => {
            let Some(source) = array.as_struct_opt() else {
                return cast(array, target);
            };
            fit_struct(source, fields).map(|s| Arc::new(s) as ArrayRef)
        }
        DataType::List(element) => match array.data_type() {
            DataType::List(_) => fit_list(array.as_list::<i32>(), element),
            DataType::LargeList(own) => {
                let narrow = arrow_cast::cast(array, &DataType::List(own.clone()))?;
                fit_list(narrow.as_list::<i32>(), element)
            }
            _ => cast(array, target),
        },
        DataType::Map(entries, sorted) => {
            let (Some(source), DataType::Struct(fields)) =
                (array.as_map_opt(), entries.data_type())
            else {
                return cast(array, target);
            };
            let inner = fit_struct(source.entries(), fields)?;
            let map = MapArray::try_new(
                entries.clone(),
                source.offsets().clone(),
                inner,
                source.nulls().cloned(),
                *sorted,
            )?;
            Ok(Arc::new(map))
        }
        _ => cast(array, target),
    }
}

fn fit_struct(
    source: &StructArray,
    fields: &Fields,
) -> Result<StructArray, arrow_schema::ArrowError> {
    let source_fields = source.fields();
    let columns = fields
        .iter()
        .map(|want| {
            let at = source_fields
                .iter()
                .position(|f| field_id(f).is_some() && field_id(f) == field_id(want));
            match at {
                Some(i) => fit(source.column(i), want),
                None => Ok(new_null_array(want.data_type(), source.len())),
            }
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    StructArray::try_new(fields.clone(), columns, source.nulls().cloned())
}

fn fit_list<O: OffsetSizeTrait>(
    source: &GenericListArray<O>,
    element: &FieldRef,
) -> Result<ArrayRef, arrow_schema::ArrowError> {
    let values = fit(source.values(), element)?;
    Ok(Arc::new(GenericListArray::<O>::try_new(
        element.clone(),
        source.offsets().clone(),
        values,
        source.nulls().cloned(),
    )?))
}

fn cast(array: &ArrayRef, target: &Field) -> Result<ArrayRef, arrow_schema::ArrowError> {
    arrow_cast::cast(array, target.data_type())
}

/// iceberg-rust's scan of the one file, for a file without field ids.
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
