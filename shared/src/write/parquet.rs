//! One Parquet file written through arrow-rs, closed into the data-file
//! entry Iceberg needs (row count, size, split offsets, and the column
//! metrics the table's metrics modes keep, `write::metrics`).
//!
//! floe writes its files itself rather than through iceberg-rust's
//! `ParquetWriter` (0.10), whose Parquet schema leaves a uuid column a bare
//! FIXED_LEN_BYTE_ARRAY(16): Iceberg's Parquet mapping annotates it UUID, as
//! Java and Spark write it, and readers that go by the file alone (pyarrow,
//! DuckDB's `read_parquet`) otherwise see 16 opaque bytes.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use bytes::Bytes;
use futures::future::BoxFuture;
use iceberg::io::{FileWrite, OutputFile};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, NestedFieldRef, PrimitiveType, Schema,
    SchemaRef, Struct, Type,
};
use iceberg::{Error, ErrorKind};
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::async_writer::AsyncFileWriter;
use parquet::arrow::{ArrowSchemaConverter, AsyncArrowWriter};
use parquet::basic::{LogicalType, Type as PhysicalType};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use parquet::schema::types::{SchemaDescriptor, Type as ParquetType, TypePtr};

use super::metrics::{MetricsConfig, MetricsMode};

/// A Parquet file being written: opened at its first rows, so a file that
/// gets none is never made.
pub struct ParquetFile {
    output: OutputFile,
    schema: SchemaRef,
    props: WriterProperties,
    modes: HashMap<i32, MetricsMode>,
    writer: Option<AsyncArrowWriter<Sink>>,
    nans: HashMap<i32, u64>,
}

impl ParquetFile {
    /// A file at `output` holding rows of `schema`, encoded as `props` say,
    /// its entry keeping the column metrics `metrics` asks for.
    pub fn new(
        output: OutputFile,
        schema: SchemaRef,
        props: WriterProperties,
        metrics: &MetricsConfig,
    ) -> Self {
        Self {
            modes: metrics.modes(&schema),
            output,
            schema,
            props,
            writer: None,
            nans: HashMap::new(),
        }
    }

    /// Appends `batch`, whose columns are the schema's fields in order.
    pub async fn write(&mut self, batch: &RecordBatch) -> iceberg::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        count_nans(
            self.schema.as_struct().fields(),
            batch.columns(),
            &mut self.nans,
        );
        let writer = match self.writer.take() {
            Some(writer) => writer,
            None => open(&self.output, &self.schema, &self.props).await?,
        };
        let writer = self.writer.insert(writer);
        writer
            .write(batch)
            .await
            .map_err(|e| unexpected("writing Parquet", e))
    }

    /// Bytes written so far, those still buffered for the open row group
    /// included: what decides when a file has reached its target size.
    pub fn written_size(&self) -> usize {
        self.writer
            .as_ref()
            .map_or(0, |w| w.bytes_written() + w.in_progress_size())
    }

    /// Finishes the file; its data-file entry (content, partition and spec
    /// still to set), or `None` when it got no rows and was never made.
    pub async fn close(self) -> iceberg::Result<Option<DataFileBuilder>> {
        let Some(mut writer) = self.writer else {
            return Ok(None);
        };
        let meta = writer
            .finish()
            .await
            .map_err(|e| unexpected("finishing Parquet", e))?;
        let size = writer.bytes_written() as u64;
        let mut entry = entry(&self.schema, &self.modes, &meta, size, self.nans)?;
        entry.file_path(self.output.location().to_string());
        Ok(Some(entry))
    }
}

/// arrow-rs's writer onto `output`, with the Parquet schema [`annotate`] makes.
async fn open(
    output: &OutputFile,
    schema: &Schema,
    props: &WriterProperties,
) -> iceberg::Result<AsyncArrowWriter<Sink>> {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
    let converted = ArrowSchemaConverter::new()
        .convert(&arrow)
        .map_err(|e| unexpected("the Parquet schema", e))?;
    let root = annotate(&converted.root_schema_ptr(), schema)
        .map_err(|e| unexpected("the Parquet schema", e))?;
    let options = ArrowWriterOptions::new()
        .with_properties(props.clone())
        .with_parquet_schema(SchemaDescriptor::new(root));
    let sink = Sink(output.writer().await?);
    AsyncArrowWriter::try_new_with_options(sink, arrow, options)
        .map_err(|e| unexpected("opening the Parquet writer", e))
}

fn unexpected(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::new(ErrorKind::Unexpected, what.to_string()).with_source(e)
}

/// arrow-rs's Parquet writer onto an Iceberg output file.
struct Sink(Box<dyn FileWrite>);

impl AsyncFileWriter for Sink {
    fn write(&mut self, bs: Bytes) -> BoxFuture<'_, parquet::errors::Result<()>> {
        Box::pin(async move {
            self.0
                .write(bs)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn complete(&mut self) -> BoxFuture<'_, parquet::errors::Result<()>> {
        Box::pin(async move {
            self.0
                .close()
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }
}

/// `ty` with every leaf that holds an Iceberg uuid annotated with Parquet's
/// UUID logical type; arrow-rs's conversion leaves it bare unless its
/// canonical extension types are on, which would also change what every
/// Parquet read in floe returns.
fn annotate(ty: &TypePtr, schema: &Schema) -> parquet::errors::Result<TypePtr> {
    let info = ty.get_basic_info();
    let id = info.has_id().then(|| info.id());
    match ty.as_ref() {
        ParquetType::PrimitiveType {
            physical_type: PhysicalType::FIXED_LEN_BYTE_ARRAY,
            type_length: 16,
            ..
        } if id.is_some_and(|id| is_uuid(schema, id)) => {
            let mut b = ParquetType::primitive_type_builder(
                info.name(),
                PhysicalType::FIXED_LEN_BYTE_ARRAY,
            )
            .with_length(16)
            .with_logical_type(Some(LogicalType::Uuid))
            .with_id(id);
            if info.has_repetition() {
                b = b.with_repetition(info.repetition());
            }
            Ok(Arc::new(b.build()?))
        }
        ParquetType::PrimitiveType { .. } => Ok(ty.clone()),
        ParquetType::GroupType { fields, .. } => {
            let fields = fields
                .iter()
                .map(|f| annotate(f, schema))
                .collect::<parquet::errors::Result<Vec<_>>>()?;
            let mut b = ParquetType::group_type_builder(info.name())
                .with_fields(fields)
                .with_converted_type(info.converted_type())
                .with_logical_type(info.logical_type_ref().cloned())
                .with_id(id);
            if info.has_repetition() {
                b = b.with_repetition(info.repetition());
            }
            Ok(Arc::new(b.build()?))
        }
    }
}

fn is_uuid(schema: &Schema, id: i32) -> bool {
    schema
        .field_by_id(id)
        .is_some_and(|f| matches!(f.field_type.as_ref(), Type::Primitive(PrimitiveType::Uuid)))
}

/// Adds the NaNs of each float and double column, at any depth, to `nans`
/// by field id; Parquet's statistics leave NaN out of min and max and do
/// not count it.
fn count_nans(fields: &[NestedFieldRef], columns: &[ArrayRef], nans: &mut HashMap<i32, u64>) {
    for (field, column) in fields.iter().zip(columns) {
        count_field(field, column, nans);
    }
}

fn count_field(field: &NestedFieldRef, array: &ArrayRef, nans: &mut HashMap<i32, u64>) {
    let n = match (field.field_type.as_ref(), array.data_type()) {
        (Type::Primitive(PrimitiveType::Float), DataType::Float32) => array
            .as_primitive::<Float32Type>()
            .iter()
            .filter(|v| v.is_some_and(f32::is_nan))
            .count(),
        (Type::Primitive(PrimitiveType::Double), DataType::Float64) => array
            .as_primitive::<Float64Type>()
            .iter()
            .filter(|v| v.is_some_and(f64::is_nan))
            .count(),
        (Type::Struct(s), DataType::Struct(_)) => {
            count_nans(s.fields(), array.as_struct().columns(), nans);
            return;
        }
        (Type::List(l), DataType::List(_)) => {
            let list = array.as_list::<i32>();
            let values = in_range(list.values(), list.value_offsets());
            count_field(&l.element_field, &values, nans);
            return;
        }
        (Type::List(l), DataType::LargeList(_)) => {
            let list = array.as_list::<i64>();
            let values = in_range(list.values(), list.value_offsets());
            count_field(&l.element_field, &values, nans);
            return;
        }
        (Type::Map(m), DataType::Map(_, _)) => {
            let map = array.as_map();
            let keys = in_range(map.keys(), map.value_offsets());
            let values = in_range(map.values(), map.value_offsets());
            count_field(&m.key_field, &keys, nans);
            count_field(&m.value_field, &values, nans);
            return;
        }
        _ => return,
    };
    *nans.entry(field.id).or_default() += n as u64;
}

/// The part of a list's or map's child array its (possibly sliced) rows
/// use: a slice keeps the whole child and moves only its offsets.
fn in_range<O: Into<i64> + Copy>(values: &ArrayRef, offsets: &[O]) -> ArrayRef {
    let at = |o: Option<&O>| o.map_or(0, |o| usize::try_from((*o).into()).unwrap_or(0));
    let (start, end) = (at(offsets.first()), at(offsets.last()));
    values.slice(start, end.saturating_sub(start))
}

/// The data-file entry of a written file: its counts and size, and its
/// column metrics.
fn entry(
    schema: &Schema,
    modes: &HashMap<i32, MetricsMode>,
    meta: &ParquetMetaData,
    size: u64,
    mut nans: HashMap<i32, u64>,
) -> iceberg::Result<DataFileBuilder> {
    let mut m = Metrics::default();
    for group in meta.row_groups() {
        for chunk in group.columns() {
            m.add(schema, modes, chunk)?;
        }
    }
    nans.retain(|id, _| mode(modes, *id) != MetricsMode::None);
    let mut b = DataFileBuilder::default();
    b.content(DataContentType::Data)
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::empty())
        .record_count(meta.file_metadata().num_rows() as u64)
        .file_size_in_bytes(size)
        .column_sizes(m.sizes)
        .value_counts(m.values)
        .null_value_counts(m.nulls)
        .nan_value_counts(nans)
        .lower_bounds(m.lower)
        .upper_bounds(m.upper)
        .split_offsets(Some(
            meta.row_groups()
                .iter()
                .filter_map(|g| g.file_offset())
                .collect(),
        ));
    Ok(b)
}

/// Per column (by field id, at any depth), summed over a file's row groups:
/// its size, and as its [`MetricsMode`] asks, its value and null counts and
/// bounds. A bound comes from Parquet's statistics where they are exact, or,
/// for a mode that truncates, from Parquet's own truncated ones too (a
/// prefix of the true minimum, a raised prefix above the maximum).
#[derive(Default)]
struct Metrics {
    sizes: HashMap<i32, u64>,
    values: HashMap<i32, u64>,
    nulls: HashMap<i32, u64>,
    lower: HashMap<i32, Datum>,
    upper: HashMap<i32, Datum>,
}

impl Metrics {
    fn add(
        &mut self,
        schema: &Schema,
        modes: &HashMap<i32, MetricsMode>,
        chunk: &ColumnChunkMetaData,
    ) -> iceberg::Result<()> {
        let info = chunk.column_descr().self_type().get_basic_info();
        let Some(field) = info
            .has_id()
            .then(|| schema.field_by_id(info.id()))
            .flatten()
        else {
            return Ok(());
        };
        let id = field.id;
        *self.sizes.entry(id).or_default() += chunk.compressed_size() as u64;
        let mode = mode(modes, id);
        if mode == MetricsMode::None {
            return Ok(());
        }
        *self.values.entry(id).or_default() += chunk.num_values() as u64;
        let Some(stats) = chunk.statistics() else {
            return Ok(());
        };
        if let Some(n) = stats.null_count_opt() {
            *self.nulls.entry(id).or_default() += n;
        }
        if mode == MetricsMode::Counts {
            return Ok(());
        }
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!("column {id} is a Parquet leaf but not an Iceberg primitive"),
            ));
        };
        let truncates = matches!(mode, MetricsMode::Truncate(_));
        let sides = [
            (stats.min_is_exact(), stats.min_bytes_opt(), false),
            (stats.max_is_exact(), stats.max_bytes_opt(), true),
        ];
        for (exact, bytes, upper) in sides {
            let value = match exact {
                true => bound(ty, stats, bytes)?,
                // Parquet cut a string at a character boundary; a prefix
                // that still does not decode is no bound.
                false if truncates => bound(ty, stats, bytes).ok().flatten(),
                false => None,
            };
            let Some(value) = value.and_then(|v| mode.bound(v, upper)) else {
                continue;
            };
            match upper {
                false => widen(&mut self.lower, id, value, Ordering::Less),
                true => widen(&mut self.upper, id, value, Ordering::Greater),
            }
        }
        Ok(())
    }
}

/// `id`'s mode; a field the schema names but `modes` lacks (none should)
/// keeps everything.
fn mode(modes: &HashMap<i32, MetricsMode>, id: i32) -> MetricsMode {
    modes.get(&id).copied().unwrap_or(MetricsMode::Full)
}

/// Keeps `value` as `id`'s bound when there is none yet or it lies further
/// out (`beyond`: `Less` for a lower bound).
fn widen(bounds: &mut HashMap<i32, Datum>, id: i32, value: Datum, beyond: Ordering) {
    match bounds.get(&id) {
        Some(b) if value.partial_cmp(b) != Some(beyond) => {}
        _ => {
            bounds.insert(id, value);
        }
    }
}

/// A min or max of Parquet statistics (`bytes`, plain-encoded) as a value of
/// `ty`. Iceberg's single-value form is Parquet's plain encoding for every
/// type floe writes except a decimal Parquet keeps as an integer (Iceberg
/// wants its unscaled big-endian bytes).
fn bound(
    ty: &PrimitiveType,
    stats: &Statistics,
    bytes: Option<&[u8]>,
) -> iceberg::Result<Option<Datum>> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let unscaled = match (ty, stats) {
        (PrimitiveType::Decimal { .. }, Statistics::Int32(_)) => {
            bytes.try_into().map(|b| i128::from(i32::from_le_bytes(b)))
        }
        (PrimitiveType::Decimal { .. }, Statistics::Int64(_)) => {
            bytes.try_into().map(|b| i128::from(i64::from_le_bytes(b)))
        }
        _ => return Datum::try_from_bytes(bytes, ty.clone()).map(Some),
    };
    let unscaled = unscaled.map_err(|e| unexpected("a decimal column's statistics", e))?;
    Datum::try_from_bytes(&unscaled.to_be_bytes(), ty.clone()).map(Some)
}

#[cfg(test)]
mod tests {
    use arrow_array::builder::{
        Float64Builder, Int64Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder,
    };
    use arrow_array::{
        BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float32Array,
        Float64Array, Int32Array, Int64Array, LargeBinaryArray, StringArray, StructArray,
        Time64MicrosecondArray, TimestampMicrosecondArray, TimestampNanosecondArray,
    };
    use iceberg::io::FileIO;
    use iceberg::spec::{DataFile, ListType, MapType, NestedField, StructType};
    use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::properties::EnabledStatistics;

    use super::*;

    fn p(id: i32, name: &str, ty: PrimitiveType) -> NestedFieldRef {
        Arc::new(NestedField::optional(id, name, Type::Primitive(ty)))
    }

    /// Every primitive floe writes, at the top level and nested, with nulls,
    /// NaNs and a string longer than Parquet keeps exact statistics for.
    fn table() -> (SchemaRef, RecordBatch) {
        let dec = |precision, scale| PrimitiveType::Decimal { precision, scale };
        let point = StructType::new(vec![
            p(31, "x", PrimitiveType::Double),
            p(32, "u", PrimitiveType::Uuid),
        ]);
        let fields = vec![
            Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )),
            p(2, "flag", PrimitiveType::Boolean),
            p(3, "small", PrimitiveType::Int),
            p(4, "f", PrimitiveType::Float),
            p(5, "d", PrimitiveType::Double),
            p(6, "price", dec(9, 2)),
            p(7, "big", dec(38, 10)),
            p(8, "day", PrimitiveType::Date),
            p(9, "at", PrimitiveType::Time),
            p(10, "ts", PrimitiveType::Timestamp),
            p(11, "tstz", PrimitiveType::Timestamptz),
            p(12, "ns", PrimitiveType::TimestampNs),
            p(13, "s", PrimitiveType::String),
            p(14, "u", PrimitiveType::Uuid),
            p(15, "fx", PrimitiveType::Fixed(4)),
            p(16, "bin", PrimitiveType::Binary),
            Arc::new(NestedField::optional(17, "point", Type::Struct(point))),
            Arc::new(NestedField::optional(
                18,
                "xs",
                Type::List(ListType::new(Arc::new(NestedField::optional(
                    33,
                    "element",
                    Type::Primitive(PrimitiveType::Double),
                )))),
            )),
            Arc::new(NestedField::optional(
                19,
                "attrs",
                Type::Map(MapType::new(
                    Arc::new(NestedField::required(
                        34,
                        "key",
                        Type::Primitive(PrimitiveType::String),
                    )),
                    Arc::new(NestedField::optional(
                        35,
                        "value",
                        Type::Primitive(PrimitiveType::Long),
                    )),
                )),
            )),
        ];
        let schema = Arc::new(Schema::builder().with_fields(fields).build().unwrap());
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let uuid = |b: u8| Some([b; 16]);
        let uuids = || {
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                [uuid(9), None, uuid(3)].into_iter(),
                16,
            )
            .unwrap()
        };
        let DataType::Struct(point_fields) = arrow.field(16).data_type().clone() else {
            unreachable!()
        };
        let point = StructArray::new(
            point_fields,
            vec![
                Arc::new(Float64Array::from(vec![Some(f64::NAN), Some(-1.5), None])),
                Arc::new(uuids()),
            ],
            None,
        );
        let mut xs =
            ListBuilder::new(Float64Builder::new()).with_field(match arrow.field(17).data_type() {
                DataType::List(f) => f.clone(),
                _ => unreachable!(),
            });
        xs.append_value([Some(1.0), Some(f64::NAN)]);
        xs.append_null();
        xs.append_value([Some(-2.0)]);
        let (key, value) = match arrow.field(18).data_type() {
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(f) => (f[0].clone(), f[1].clone()),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        };
        let mut attrs = MapBuilder::new(
            Some(MapFieldNames {
                entry: "key_value".into(),
                key: "key".into(),
                value: "value".into(),
            }),
            StringBuilder::new(),
            Int64Builder::new(),
        )
        .with_keys_field(key)
        .with_values_field(value);
        attrs.keys().append_value("a");
        attrs.values().append_value(5);
        attrs.append(true).unwrap();
        attrs.append(false).unwrap();
        attrs.keys().append_value("b");
        attrs.values().append_null();
        attrs.append(true).unwrap();
        let long = "z".repeat(100);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![3, 1, 2])),
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            Arc::new(Int32Array::from(vec![Some(-7), Some(70), None])),
            Arc::new(Float32Array::from(vec![
                Some(f32::NAN),
                Some(0.5),
                Some(-0.25),
            ])),
            Arc::new(Float64Array::from(vec![Some(2.5), None, Some(f64::NAN)])),
            Arc::new(
                Decimal128Array::from(vec![Some(-12345), Some(99), None])
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
            Arc::new(
                Decimal128Array::from(vec![Some(i128::MAX / 7), Some(-1), None])
                    .with_precision_and_scale(38, 10)
                    .unwrap(),
            ),
            Arc::new(Date32Array::from(vec![Some(20_000), None, Some(-3)])),
            Arc::new(Time64MicrosecondArray::from(vec![
                Some(1),
                Some(86_399_999_999),
                None,
            ])),
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(-5),
                Some(1_796_292_000_000_000),
                None,
            ])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![None, Some(7), Some(8)])
                    .with_timezone("+00:00"),
            ),
            Arc::new(TimestampNanosecondArray::from(vec![
                Some(1_796_292_000_123_456_789),
                None,
                Some(1),
            ])),
            Arc::new(StringArray::from(vec![Some("bcd"), Some("a"), None])),
            Arc::new(uuids()),
            Arc::new(
                FixedSizeBinaryArray::try_from_iter(
                    [[1u8, 2, 3, 4], [0, 0, 0, 0], [9, 9, 9, 9]].into_iter(),
                )
                .unwrap(),
            ),
            Arc::new(LargeBinaryArray::from(vec![
                Some(&b"\xff"[..]),
                Some(long.as_bytes()),
                None,
            ])),
            Arc::new(point),
            Arc::new(xs.finish()),
            Arc::new(attrs.finish()),
        ];
        let batch = RecordBatch::try_new(arrow, columns).unwrap();
        (schema, batch)
    }

    fn metrics(f: &DataFile) -> String {
        let sorted = |m: &HashMap<i32, u64>| {
            format!(
                "{:?}",
                m.iter().collect::<std::collections::BTreeMap<_, _>>()
            )
        };
        let bounds = |m: &HashMap<i32, Datum>| {
            format!(
                "{:?}",
                m.iter().collect::<std::collections::BTreeMap<_, _>>()
            )
        };
        format!(
            "rows {}\nsizes {}\nvalues {}\nnulls {}\nnans {}\nlower {}\nupper {}\nsplits {:?}",
            f.record_count(),
            sorted(f.column_sizes()),
            sorted(f.value_counts()),
            sorted(f.null_value_counts()),
            sorted(f.nan_value_counts()),
            bounds(f.lower_bounds()),
            bounds(f.upper_bounds()),
            f.split_offsets(),
        )
    }

    fn footer(path: &std::path::Path) -> ParquetMetaData {
        let bytes = Bytes::from(std::fs::read(path).unwrap());
        ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .unwrap()
    }

    /// The same rows through iceberg-rust's writer (what floe used before)
    /// and through this one: every metric equal, and only this file says
    /// its uuid columns are UUIDs.
    #[tokio::test]
    async fn metrics_match_iceberg_rusts_writer_and_uuid_columns_are_annotated() {
        let (schema, batch) = table();
        let dir = tempfile::tempdir().unwrap();
        let io = FileIO::new_with_fs();
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_statistics_truncate_length(Some(16))
            // Two row groups: bounds and counts are summed across them.
            .set_max_row_group_row_count(Some(2))
            .build();
        let theirs = dir.path().join("theirs.parquet");
        let output = io.new_output(theirs.to_str().unwrap()).unwrap();
        let mut w = ParquetWriterBuilder::new(props.clone(), schema.clone())
            .build(output)
            .await
            .unwrap();
        w.write(&batch).await.unwrap();
        let mut b = w.close().await.unwrap().pop().unwrap();
        let theirs_file = b.partition_spec_id(0).build().unwrap();

        let ours = dir.path().join("ours.parquet");
        let mut w = ParquetFile::new(
            io.new_output(ours.to_str().unwrap()).unwrap(),
            schema.clone(),
            props,
            &MetricsConfig::full(),
        );
        w.write(&batch.slice(0, 2)).await.unwrap();
        w.write(&batch.slice(2, 1)).await.unwrap();
        let ours_file = w
            .close()
            .await
            .unwrap()
            .unwrap()
            .partition_spec_id(0)
            .build()
            .unwrap();

        assert_eq!(metrics(&ours_file), metrics(&theirs_file));
        assert_eq!(ours_file.split_offsets().map(|s| s.len()), Some(2));
        assert!(ours_file.lower_bounds().contains_key(&14), "uuid bounds");
        assert!(
            !ours_file.lower_bounds().contains_key(&16),
            "a truncated minimum is no bound"
        );
        assert_eq!(
            ours_file.nan_value_counts().get(&33),
            Some(&1),
            "NaN in a list"
        );
        assert_eq!(
            ours_file.file_size_in_bytes(),
            std::fs::metadata(&ours).unwrap().len()
        );

        let uuid_leaves = |meta: &ParquetMetaData| -> Vec<String> {
            meta.file_metadata()
                .schema_descr()
                .columns()
                .iter()
                .filter(|c| c.logical_type_ref() == Some(&LogicalType::Uuid))
                .map(|c| c.path().string())
                .collect()
        };
        assert_eq!(uuid_leaves(&footer(&ours)), ["u", "point.u"]);
        assert!(uuid_leaves(&footer(&theirs)).is_empty());
        let read = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&ours).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
        assert_eq!(read.columns(), batch.columns(), "every value reads back");
    }

    /// `write.metadata.metrics.*` decide what the entry keeps, per column;
    /// a truncated bound still bounds, even from Parquet's own truncated
    /// statistics.
    #[tokio::test]
    async fn metrics_modes_decide_what_the_entry_keeps() {
        let (schema, batch) = table();
        let props = crate::write::props(&[
            ("write.metadata.metrics.default", "truncate(1)"),
            ("write.metadata.metrics.column.d", "none"),
            ("write.metadata.metrics.column.small", "counts"),
            ("write.metadata.metrics.column.point.x", "full"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("modes.parquet");
        let output = FileIO::new_with_fs()
            .new_output(path.to_str().unwrap())
            .unwrap();
        let writer_props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_statistics_truncate_length(Some(16))
            .build();
        let metrics = MetricsConfig::from_properties(&props).unwrap();
        let mut w = ParquetFile::new(output, schema, writer_props, &metrics);
        w.write(&batch).await.unwrap();
        let f = w
            .close()
            .await
            .unwrap()
            .unwrap()
            .partition_spec_id(0)
            .build()
            .unwrap();
        let kept = |id: i32| {
            [
                f.value_counts().contains_key(&id),
                f.null_value_counts().contains_key(&id),
                f.lower_bounds().contains_key(&id),
                f.upper_bounds().contains_key(&id),
            ]
        };
        // none: the size only (and no NaN count); counts: no bounds.
        assert_eq!(kept(5), [false; 4]);
        assert!(f.column_sizes().contains_key(&5) && !f.nan_value_counts().contains_key(&5));
        assert_eq!(kept(3), [true, true, false, false]);
        // truncate(1): "a".."bcd" is kept as "a".."c"; a long binary minimum
        // Parquet truncated itself becomes a one-byte prefix.
        assert_eq!(f.lower_bounds()[&13], Datum::string("a"));
        assert_eq!(f.upper_bounds()[&13], Datum::string("c"));
        assert_eq!(f.lower_bounds()[&16], Datum::binary(b"z".to_vec()));
        assert_eq!(f.upper_bounds()[&16], Datum::binary(vec![0xff]));
        // Other types keep whole bounds; a column set to full keeps its own.
        assert_eq!(
            f.upper_bounds()[&10],
            Datum::timestamp_micros(1_796_292_000_000_000)
        );
        assert_eq!(f.lower_bounds()[&31], Datum::double(-1.5));
    }

    #[tokio::test]
    async fn a_file_that_gets_no_rows_is_never_made() {
        let (schema, batch) = table();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.parquet");
        let output = FileIO::new_with_fs()
            .new_output(path.to_str().unwrap())
            .unwrap();
        let mut w = ParquetFile::new(
            output,
            schema,
            WriterProperties::default(),
            &MetricsConfig::default(),
        );
        w.write(&batch.slice(0, 0)).await.unwrap();
        assert_eq!(w.written_size(), 0);
        assert!(w.close().await.unwrap().is_none());
        assert!(!path.exists());
    }
}
