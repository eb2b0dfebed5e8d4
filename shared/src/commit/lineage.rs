//! Row lineage for format v3 tables: every row gets a table-wide `_row_id`
//! when it is first committed, by inheritance, so floe writes no ids into
//! the data files it adds for new rows. Rows a rewrite moves (compaction,
//! copy-on-write) keep theirs: the new file holds each row's `_row_id` and
//! `_last_updated_sequence_number` as columns. A snapshot takes the table's
//! `next-row-id` as its `first-row-id`; each data manifest without a `first_row_id` takes the next
//! range, as wide as its added and existing rows; a data file inherits its
//! manifest's id plus the rows of the files before it. Ids already handed
//! out must survive a manifest rewrite, so entries floe carries into a new
//! manifest get their inherited id written out.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use futures::StreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::{FileIO, FileMetadata};
use iceberg::spec::{
    DataFile, DataFileBuilder, FormatVersion, Manifest, ManifestContentType, ManifestFile,
    NestedField, PrimitiveType, Schema, SchemaRef, TableMetadata, Type,
};
use iceberg::{Error, ErrorKind};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

/// Field id the spec reserves for `_row_id`.
pub const ROW_ID: i32 = 2147483540;

/// Field id the spec reserves for `_last_updated_sequence_number`.
pub const LAST_UPDATED: i32 = 2147483539;

/// The schema a rewrite (compaction, copy-on-write) reads and writes the
/// table's rows with, and whether it carries their lineage: on a v3 table
/// the current schema with the lineage columns, so moved rows keep theirs;
/// else the current schema.
pub fn rewrite_schema(metadata: &TableMetadata) -> iceberg::Result<(SchemaRef, bool)> {
    let current = metadata.current_schema();
    match metadata.format_version() >= FormatVersion::V3 {
        true => Ok((with_lineage(current)?, true)),
        false => Ok((current.clone(), false)),
    }
}

/// `schema` with the two lineage columns after its own: what a file of
/// moved rows is written with, and read back with (a file without them
/// reads them as nulls).
fn with_lineage(schema: &Schema) -> iceberg::Result<SchemaRef> {
    let mut fields: Vec<_> = schema.as_struct().fields().to_vec();
    let long = || Type::Primitive(PrimitiveType::Long);
    fields.push(NestedField::optional(ROW_ID, "_row_id", long()).into());
    fields
        .push(NestedField::optional(LAST_UPDATED, "_last_updated_sequence_number", long()).into());
    Ok(Arc::new(
        Schema::builder()
            .with_schema_id(schema.schema_id())
            .with_identifier_field_ids(schema.identifier_field_ids())
            .with_fields(fields)
            .build()?,
    ))
}

/// The lineage a data file holds in its own columns (a file a rewrite
/// wrote), each as long as the file and null where a row inherits.
#[derive(Debug)]
struct Written {
    row_ids: Int64Array,
    sequence_numbers: Int64Array,
}

impl Written {
    /// What `file` holds; `None` for a file without lineage columns (every
    /// row inherits). iceberg-rust's reader takes the reserved field ids for
    /// metadata columns and does not read them from the file, so the
    /// parquet crate reads them here: the footer and the two columns' chunks
    /// only, in ranged reads, not the file again.
    async fn read(file_io: &FileIO, file: &DataFile) -> iceberg::Result<Option<Self>> {
        let sizes = file.column_sizes();
        if !sizes.contains_key(&ROW_ID) && !sizes.contains_key(&LAST_UPDATED) {
            return Ok(None);
        }
        let path = file.file_path();
        let err = |e: parquet::errors::ParquetError| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("{path}: lineage columns: {e}"),
            )
        };
        let size = FileMetadata {
            size: file.file_size_in_bytes(),
        };
        let source = ArrowFileReader::new(size, file_io.new_input(path)?.reader().await?);
        let builder = ParquetRecordBatchStreamBuilder::new(source)
            .await
            .map_err(err)?;
        let descr = builder.parquet_schema();
        let leaf = |id: i32| {
            descr.columns().iter().position(|c| {
                let info = c.self_type().get_basic_info();
                info.has_id() && info.id() == id
            })
        };
        let (row_leaf, seq_leaf) = (leaf(ROW_ID), leaf(LAST_UPDATED));
        let leaves: Vec<usize> = [row_leaf, seq_leaf].into_iter().flatten().collect();
        if leaves.is_empty() {
            return Ok(None);
        }
        let mask = ProjectionMask::leaves(descr, leaves);
        let mut batches = builder.with_projection(mask).build().map_err(err)?;
        let (mut ids, mut seqs) = (Vec::new(), Vec::new());
        while let Some(batch) = batches.next().await {
            let batch = batch.map_err(err)?;
            // Projected columns come in file order: the row id's first.
            let mut columns = batch.columns().iter();
            for (at, out) in [(row_leaf, &mut ids), (seq_leaf, &mut seqs)] {
                match at.and_then(|_| columns.next()) {
                    Some(c) => match c.as_primitive_opt::<Int64Type>() {
                        Some(c) => out.extend(c.iter()),
                        None => {
                            return Err(err(parquet::errors::ParquetError::General(
                                "a lineage column is not a long".into(),
                            )));
                        }
                    },
                    None => out.extend(std::iter::repeat_n(None, batch.num_rows())),
                }
            }
        }
        Ok(Some(Written {
            row_ids: ids.into_iter().collect(),
            sequence_numbers: seqs.into_iter().collect(),
        }))
    }
}

/// `batches`, `file` read whole with [`rewrite_schema`], with each row's
/// lineage written out: the value the file holds, else the one it inherits
/// from `inherits`, the file's `first_row_id` and data sequence number
/// (`None` for a file not committed yet, whose new rows have no lineage
/// until they are).
pub async fn lined(
    file_io: &FileIO,
    file: &DataFile,
    batches: Vec<RecordBatch>,
    inherits: Option<(Option<i64>, i64)>,
) -> iceberg::Result<Vec<RecordBatch>> {
    let written = Written::read(file_io, file).await?;
    let mut start = 0u64;
    let mut out = Vec::with_capacity(batches.len());
    for b in &batches {
        out.push(written_out(b, written.as_ref(), inherits, start)?);
        start += b.num_rows() as u64;
    }
    Ok(out)
}

/// `batch`, rows at positions `start`… of a file holding `written`, with
/// each row's lineage written out as [`lined`] says.
fn written_out(
    batch: &RecordBatch,
    written: Option<&Written>,
    inherits: Option<(Option<i64>, i64)>,
    start: u64,
) -> iceberg::Result<RecordBatch> {
    let n = batch.num_columns();
    if n < 2 {
        return Err(Error::new(
            ErrorKind::Unexpected,
            "a batch read for lineage has no lineage columns",
        ));
    }
    let at = |i: usize| start as usize + i;
    let held = |array: Option<&Int64Array>, i: usize| {
        array
            .filter(|a| at(i) < a.len() && !a.is_null(at(i)))
            .map(|a| a.value(at(i)))
    };
    let rows = 0..batch.num_rows();
    let ids: Int64Array = rows
        .clone()
        .map(|i| {
            held(written.map(|w| &w.row_ids), i).or_else(|| inherits?.0?.checked_add(at(i) as i64))
        })
        .collect();
    let seqs: Int64Array = rows
        .map(|i| held(written.map(|w| &w.sequence_numbers), i).or(inherits.map(|(_, s)| s)))
        .collect();
    let mut columns = batch.columns().to_vec();
    columns[n - 2] = Arc::new(ids) as ArrayRef;
    columns[n - 1] = Arc::new(seqs) as ArrayRef;
    RecordBatch::try_new(batch.schema(), columns)
        .map_err(|e| Error::new(ErrorKind::Unexpected, "lineage columns").with_source(e))
}

/// Assigns a `first_row_id` to each data manifest in `manifests` that has
/// none, from `next` on, in list order; returns the table's next row id.
pub fn assign(manifests: &mut [ManifestFile], mut next: u64) -> iceberg::Result<u64> {
    for m in manifests
        .iter_mut()
        .filter(|m| m.content == ManifestContentType::Data && m.first_row_id.is_none())
    {
        let rows = m
            .added_rows_count
            .zip(m.existing_rows_count)
            .map(|(a, e)| a + e)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!(
                        "manifest {} has no row counts to assign row ids by",
                        m.manifest_path
                    ),
                )
            })?;
        m.first_row_id = Some(next);
        next = next.checked_add(rows).ok_or_else(|| {
            Error::new(ErrorKind::DataInvalid, "row ids overflow a 64-bit integer")
        })?;
    }
    Ok(next)
}

/// The `first_row_id` each entry of `manifest` has, written or inherited, in
/// entry order (`None` for entries that have none: deleted entries whose
/// manifest predates v3, and delete files).
pub fn first_row_ids(file: &ManifestFile, manifest: &Manifest) -> Vec<Option<i64>> {
    let mut next = file.first_row_id.and_then(|id| i64::try_from(id).ok());
    manifest
        .entries()
        .iter()
        .map(|e| {
            let own = e.data_file().first_row_id();
            if own.is_some() || !e.is_alive() || file.content != ManifestContentType::Data {
                return own;
            }
            let id = next?;
            next = id.checked_add(e.record_count() as i64);
            Some(id)
        })
        .collect()
}

/// `file` with its `first_row_id` written out; `spec_id` is its manifest's
/// partition spec (a [`DataFile`] does not expose its own).
pub fn with_first_row_id(file: &DataFile, spec_id: i32, id: i64) -> iceberg::Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(id))
        .partition_spec_id(spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| {
        Error::new(
            ErrorKind::Unexpected,
            format!("rebuilding a data file: {e}"),
        )
    })
}
