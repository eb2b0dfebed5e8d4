//! Times the shredder on the 6-field benchmark event and on a 50-column record.
//!
//! Run with `cargo run --release --example shred_timing [event|wide]` (both by default).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use floe_core::iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Schema, Type};
use floe_core::shred::{ShredOptions, Shredder};

const RECORDS: usize = 1_000_000;
const BATCH: usize = 10_000;
const ROUNDS: usize = 3;

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
fn event_records() -> Vec<String> {
    let types = ["click", "view", "purchase", "scroll", "hover"];
    (0..RECORDS)
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

fn wide_records() -> Vec<String> {
    (0..RECORDS)
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

/// Best of `ROUNDS` runs: (push ns/record, push+finish ns/record).
fn time(schema: &Schema, records: &[String]) -> (f64, f64) {
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        let mut shredder = Shredder::new(schema, ShredOptions::default()).expect("shredder");
        let mut push_ns = 0u128;
        let mut total_ns = 0u128;
        for chunk in records.chunks(BATCH) {
            let start = Instant::now();
            for r in chunk {
                shredder.push(r.as_bytes()).expect("valid record");
            }
            let pushed = start.elapsed();
            let batch = shredder.finish().expect("batch");
            total_ns += start.elapsed().as_nanos();
            push_ns += pushed.as_nanos();
            black_box(batch);
        }
        let n = records.len() as f64;
        best.0 = best.0.min(push_ns as f64 / n);
        best.1 = best.1.min(total_ns as f64 / n);
    }
    best
}

fn main() {
    let only = std::env::args().nth(1);
    let wants = |shape: &str| only.as_deref().is_none_or(|o| o == shape);
    let mut shapes = Vec::new();
    if wants("event") {
        shapes.push(("event (6 fields)", event_schema(), event_records()));
    }
    if wants("wide") {
        shapes.push(("wide (50 columns)", wide_schema(), wide_records()));
    }
    for (name, schema, records) in shapes {
        let bytes: usize = records.iter().map(String::len).sum();
        let (push, total) = time(&schema, &records);
        println!(
            "{name:18} avg {:5.0} B/record: push {push:7.1} ns/record, push+finish {total:7.1} ns/record ({:.2} M records/s)",
            bytes as f64 / records.len() as f64,
            1e3 / total,
        );
    }
}
