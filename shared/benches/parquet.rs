//! One Parquet data file of 100,000 rows, written by floe's own writer
//! (`floe_core::write::parquet`, since it annotates uuid columns) and by
//! iceberg-rust's `ParquetWriter`, which floe used before, on the same rows
//! with the same properties: the 6-field benchmark event, and the same with
//! a uuid column.
//!
//! `cargo bench -p floe-core --bench parquet` (criterion: time per file, and
//! rows/s).

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeBinaryArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use floe_core::write::MetricsConfig;
use floe_core::write::parquet::ParquetFile;
use iceberg::io::FileIO;
use iceberg::spec::{NestedField, PrimitiveType, Schema, SchemaRef, Type};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

const ROWS: usize = 100_000;

fn field(id: i32, name: &str, ty: PrimitiveType) -> Arc<NestedField> {
    Arc::new(NestedField::optional(id, name, Type::Primitive(ty)))
}

/// The event's schema and rows, with a uuid column when `uuid`.
fn table(uuid: bool) -> (SchemaRef, RecordBatch) {
    let mut fields = vec![
        field(1, "id", PrimitiveType::Long),
        field(2, "user_id", PrimitiveType::Long),
        field(3, "event_type", PrimitiveType::String),
        field(4, "value", PrimitiveType::Long),
        field(5, "info", PrimitiveType::String),
        field(6, "ts", PrimitiveType::Timestamptz),
    ];
    let n = ROWS as i64;
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..n)),
        Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 977))),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| ["click", "view", "buy"][i as usize % 3]),
        )),
        Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7 % 1000))),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("some text of the event {i}")),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(
                (0..n).map(|i| 1_796_292_000_000_000 + i * 1000),
            )
            .with_timezone("+00:00"),
        ),
    ];
    if uuid {
        fields.push(field(7, "request", PrimitiveType::Uuid));
        let ids = (0..ROWS as u128)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).to_be_bytes());
        columns.push(Arc::new(
            FixedSizeBinaryArray::try_from_iter(ids).expect("uuids"),
        ));
    }
    let schema = Arc::new(
        Schema::builder()
            .with_fields(fields)
            .build()
            .expect("schema"),
    );
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).expect("arrow schema"));
    (schema, RecordBatch::try_new(arrow, columns).expect("batch"))
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let io = FileIO::new_with_fs();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level")))
        .build();
    // Every metric, as iceberg-rust's writer keeps them.
    let full = MetricsConfig::full();
    let mut group = c.benchmark_group("parquet_file");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);
    for (shape, uuid) in [("event", false), ("event_uuid", true)] {
        let (schema, batch) = table(uuid);
        let path = dir.path().join(format!("{shape}.parquet"));
        let path = path.to_str().expect("utf-8 path");
        group.bench_function(format!("{shape}/floe"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let output = io.new_output(path).expect("output");
                    let mut w = ParquetFile::new(output, schema.clone(), props.clone(), &full);
                    w.write(&batch).await.expect("write");
                    black_box(w.close().await.expect("close"))
                })
            })
        });
        group.bench_function(format!("{shape}/iceberg_rust"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let output = io.new_output(path).expect("output");
                    let mut w = ParquetWriterBuilder::new(props.clone(), schema.clone())
                        .build(output)
                        .await
                        .expect("writer");
                    w.write(&batch).await.expect("write");
                    black_box(w.close().await.expect("close"))
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
