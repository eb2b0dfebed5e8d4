//! The writer step end to end on a local warehouse: one source batch of
//! 10,000 records in, Parquet files and a commit request out (no commit),
//! for an append-only table, a keyed table taking Debezium changes (decoded,
//! folded per key, shredded, key file and deletes written) and the same with
//! a changelog beside it. Five changes per key, as a CDC stream's hot keys.
//!
//! `cargo bench -p floe-core --bench writer` (criterion: time per batch of
//! 10,000 records, and records/s).

use std::hint::black_box;
use std::path::Path;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_core::pipeline::Writer;
use floe_core::source::{Positions, Records, Source, SourceBatch, SourceKind, SourceSpan};

const BATCH: usize = 10_000;
const CHANGES_PER_KEY: usize = 5;

fn row(id: usize, n: usize) -> String {
    format!(
        r#"{{"id":{id},"user_id":{},"event_type":"click","value":{n},"info":"some text of the event {n}","ts":"2026-12-01T10:00:{:02}Z"}}"#,
        id % 977,
        n % 60
    )
}

fn events(n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(row(i, i))).collect()
}

fn debezium(n: usize) -> Vec<Bytes> {
    let keys = n / CHANGES_PER_KEY;
    (0..n)
        .map(|i| {
            let op = if i < keys { "c" } else { "u" };
            Bytes::from(format!(
                r#"{{"op":"{op}","before":null,"after":{},"source":{{"lsn":{},"ts_ms":1764583200000}},"ts_ms":1764583200001}}"#,
                row(i % keys, i),
                1000 + i
            ))
        })
        .collect()
}

/// The batch-th batch of `records`, from an SQS queue (message ids as positions).
fn batch(records: &[Bytes], batch: usize) -> SourceBatch {
    let items: Vec<(String, Bytes)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("m{batch}-{i}"), r.clone()))
        .collect();
    let spans = vec![SourceSpan {
        source: "sqs:bench".into(),
        positions: Positions::Ids {
            ids: items.iter().map(|(id, _)| id.clone()).collect(),
        },
        stream: false,
    }];
    SourceBatch::new(
        Source::new(SourceKind::Sqs, "bench"),
        spans,
        Records::Items(items),
    )
}

fn writer(rt: &tokio::runtime::Runtime, dir: &Path, table: &str, section: &str) -> Writer {
    let text = format!(
        "[warehouse]\npath = {:?}\n[routing]\ntable = \"{table}\"\n[tables.\"{table}\"]\n{section}\n",
        dir.display()
    );
    let config = Config::from_toml_str(&text, dir, &|_| None).expect("bench config");
    let deployment = rt
        .block_on(Deployment::from_config(
            config,
            Faults::none(),
            Role::Writer,
        ))
        .expect("embedded deployment");
    deployment.writer().expect("writer")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let shapes = [
        ("append", "", events(BATCH)),
        ("keyed", "identifier_fields = [\"id\"]", debezium(BATCH)),
        (
            "keyed+changelog",
            "identifier_fields = [\"id\"]\nchangelog = \"beside\"",
            debezium(BATCH),
        ),
    ];
    let mut group = c.benchmark_group("writer");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(10);
    for (name, section, records) in shapes {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = format!("bench.{}", name.replace('+', "_"));
        parse_table(&table).expect("table name");
        let writer = writer(&rt, dir.path(), &table, section);
        // The first batch creates the table; the timed ones write to it.
        rt.block_on(writer.write(batch(&records, 0)))
            .expect("first batch");
        let mut n = 1;
        group.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let report = rt
                    .block_on(writer.write(batch(&records, n)))
                    .expect("batch");
                assert!(report.rejected.is_empty(), "{:?}", report.rejected.first());
                black_box(report.records)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
