//! Shredder microbenchmarks: JSON records into Arrow columns, for the 6-field
//! benchmark event and a 50-column record, with heap bytes and allocations
//! per record counted by a wrapping global allocator; and the 6-field event
//! as Confluent-framed Avro, decoded to the shredder's JSON and shredded, as
//! the writer does for registry Avro (the schema already cached).
//!
//! `cargo bench -p floe-core --bench shred` (criterion's report: time per
//! batch of 10,000 records; divide by 10,000 for ns/record). The allocation
//! counts are printed once per shape before criterion runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use floe_core::avro::{Decoder, framing};
use floe_core::iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Schema, Type};
use floe_core::shred::{ShredOptions, Shredder};

/// Records per batch, as a writer's source batch.
const BATCH: usize = 10_000;

/// Counts heap allocations and bytes, to report them per record.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn field(id: i32, name: &str, t: PrimitiveType, required: bool) -> NestedFieldRef {
    Arc::new(NestedField::new(id, name, Type::Primitive(t), required))
}

fn event_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            field(1, "id", PrimitiveType::Long, true),
            field(2, "user_id", PrimitiveType::Long, false),
            field(3, "event_type", PrimitiveType::String, false),
            field(4, "value", PrimitiveType::Long, false),
            field(5, "info", PrimitiveType::String, false),
            field(6, "ts", PrimitiveType::Timestamptz, false),
        ])
        .build()
        .expect("event schema")
}

/// Records shaped like the project's `gen_events.py` (~128-142 bytes each).
fn event_records(n: usize) -> Vec<String> {
    let types = ["click", "view", "purchase", "scroll", "hover"];
    (0..n)
        .map(|i| {
            format!(
                r#"{{"id":{i},"user_id":{},"event_type":"{}","value":{},"info":"event info for record {i}","ts":"2026-11-30T10:00:00Z"}}"#,
                i % 10_000 + 1,
                types[i % 5],
                i % 1000 + (i * 7919) % 100,
            )
        })
        .collect()
}

/// The 6-field event's Avro schema: `ts` a timestamp-micros instant.
const EVENT_AVRO: &str = r#"{"type":"record","name":"Event","fields":[
    {"name":"id","type":"long"},
    {"name":"user_id","type":["null","long"]},
    {"name":"event_type","type":["null","string"]},
    {"name":"value","type":["null","long"]},
    {"name":"info","type":["null","string"]},
    {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}
]}"#;

/// The same events as [`event_records`], Confluent-framed Avro (schema id 1).
fn event_avro(n: usize) -> Vec<Vec<u8>> {
    use apache_avro::types::{Record, Value};
    let schema = apache_avro::Schema::parse_str(EVENT_AVRO).expect("event Avro schema");
    let types = ["click", "view", "purchase", "scroll", "hover"];
    let some = |v: Value| Value::Union(1, Box::new(v));
    (0..n)
        .map(|i| {
            let mut r = Record::new(&schema).expect("record schema");
            r.put("id", i as i64);
            r.put("user_id", some(Value::Long((i % 10_000 + 1) as i64)));
            r.put("event_type", some(Value::String(types[i % 5].into())));
            r.put(
                "value",
                some(Value::Long((i % 1000 + (i * 7919) % 100) as i64)),
            );
            r.put(
                "info",
                some(Value::String(format!("event info for record {i}"))),
            );
            r.put("ts", some(Value::TimestampMicros(1_796_032_800_000_000)));
            let mut framed = vec![0, 0, 0, 0, 1];
            framed.extend(apache_avro::to_avro_datum(&schema, r).expect("datum"));
            framed
        })
        .collect()
}

/// Checks and shreds one batch of framed Avro records: the opener's check,
/// then the shredder reading each datum into its columns.
fn shred_avro(decoder: &Decoder, shredder: &mut Shredder, records: &[Vec<u8>]) {
    for r in records {
        let (_, datum) = framing(r).expect("framed");
        decoder.check(datum).expect("valid datum");
        shredder.push_avro(decoder, datum).expect("valid record");
    }
    black_box(shredder.finish().expect("batch"));
}

/// The JSON path for the same batch: each datum decoded to JSON text, shredded.
fn shred_avro_json(decoder: &Decoder, shredder: &mut Shredder, records: &[Vec<u8>]) {
    for r in records {
        let (_, datum) = framing(r).expect("framed");
        let json = decoder.json(datum).expect("valid datum");
        shredder.push(&json).expect("valid record");
    }
    black_box(shredder.finish().expect("batch"));
}

fn wide_types(i: usize) -> PrimitiveType {
    match i % 5 {
        0 => PrimitiveType::Long,
        1 => PrimitiveType::Double,
        2 => PrimitiveType::String,
        3 => PrimitiveType::Boolean,
        _ => PrimitiveType::Timestamptz,
    }
}

fn wide_schema() -> Schema {
    let fields = (0..50)
        .map(|i| field(i as i32 + 1, &format!("col_{i}"), wide_types(i), false))
        .collect::<Vec<_>>();
    Schema::builder()
        .with_fields(fields)
        .build()
        .expect("wide schema")
}

fn wide_records(n: usize) -> Vec<String> {
    (0..n)
        .map(|r| {
            let cols: Vec<String> = (0..50)
                .map(|i| {
                    let v = match i % 5 {
                        0 => format!("{}", r * 31 + i),
                        1 => format!("{}.{}", r % 1000, i),
                        2 => format!("\"value {r} of column {i}\""),
                        3 => format!("{}", (r + i) % 2 == 0),
                        _ => format!(
                            "\"2026-11-30T10:{:02}:{:02}.{:03}Z\"",
                            i % 60,
                            r % 60,
                            r % 1000
                        ),
                    };
                    format!("\"col_{i}\":{v}")
                })
                .collect();
            format!("{{{}}}", cols.join(","))
        })
        .collect()
}

/// Shreds one batch into a record batch.
fn shred(shredder: &mut Shredder, records: &[String]) {
    for r in records {
        shredder.push(r.as_bytes()).expect("valid record");
    }
    black_box(shredder.finish().expect("batch"));
}

/// Heap allocations and bytes per record of a warm shredder.
fn allocations(name: &str, schema: &Schema, records: &[String]) {
    let mut shredder = Shredder::new(schema, ShredOptions::default()).expect("shredder");
    shred(&mut shredder, records);
    let (a0, b0) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    shred(&mut shredder, records);
    let n = records.len() as f64;
    let bytes_in: usize = records.iter().map(String::len).sum();
    println!(
        "{name}: {:.0} B of JSON/record, {:.2} allocations/record, {:.1} heap bytes allocated/record",
        bytes_in as f64 / n,
        (ALLOCS.load(Ordering::Relaxed) - a0) as f64 / n,
        (BYTES.load(Ordering::Relaxed) - b0) as f64 / n,
    );
}

fn bench(c: &mut Criterion) {
    let shapes = [
        ("event_6_fields", event_schema(), event_records(BATCH)),
        ("wide_50_columns", wide_schema(), wide_records(BATCH)),
    ];
    let mut group = c.benchmark_group("shred");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, schema, records) in &shapes {
        allocations(name, schema, records);
        let mut shredder = Shredder::new(schema, ShredOptions::default()).expect("shredder");
        group.bench_function(*name, |b| b.iter(|| shred(&mut shredder, records)));
    }
    let avro = event_avro(BATCH);
    let decoder = Decoder::new("schema id 1".into(), EVENT_AVRO).expect("decoder");
    let bytes_in: usize = avro.iter().map(Vec::len).sum();
    println!(
        "event_6_fields_avro: {:.0} B of framed Avro/record",
        bytes_in as f64 / BATCH as f64
    );
    let mut shredder = Shredder::new(&event_schema(), ShredOptions::default()).expect("shredder");
    group.bench_function("event_6_fields_avro", |b| {
        b.iter(|| shred_avro(&decoder, &mut shredder, &avro))
    });
    group.bench_function("event_6_fields_avro_via_json", |b| {
        b.iter(|| shred_avro_json(&decoder, &mut shredder, &avro))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
