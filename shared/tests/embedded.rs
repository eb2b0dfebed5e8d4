//! The embedded pipeline in-process: tables read back through iceberg-rust's
//! own scan, error faults at every step, and concurrent committers.

use std::io::Cursor;
use std::path::Path;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::ident::parse_table;
use floe_core::tabledef;
use futures::TryStreamExt;

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"info","required":false,"type":"string"},
  {"id":3,"name":"ts","required":false,"type":"timestamptz"}]}"#;

fn records(ids: std::ops::Range<i64>) -> Vec<u8> {
    ids.map(|i| {
        format!("{{\"id\":{i},\"info\":\"record {i}\",\"ts\":\"2026-11-30T10:00:{:02}.{i:06}+01:00\"}}\n", i % 60)
    })
    .collect::<String>()
    .into_bytes()
}

fn input(name: &str, data: Vec<u8>) -> Input {
    Input {
        source: format!("test:{name}"),
        reader: Box::new(Cursor::new(data)),
    }
}

fn options(batch: u64) -> IngestOptions {
    IngestOptions {
        writers: 2,
        batch_records: batch,
        commit_window: std::time::Duration::from_millis(0),
        ..IngestOptions::default()
    }
}

async fn create(dir: &Path) -> Embedded {
    let floe = Embedded::open(dir, Faults::none()).unwrap();
    let ident = parse_table("bronze.t").unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    floe.create_table(
        &ident,
        tabledef::creation("t", schema, Default::default(), Default::default()),
    )
    .await
    .unwrap();
    floe
}

/// Reads the table with iceberg-rust's scan: (id, info, ts micros) sorted by id.
async fn scan(floe: &Embedded) -> Vec<(i64, Option<String>, Option<i64>)> {
    let catalog = floe.catalog();
    let loaded = catalog
        .load_table(&parse_table("bronze.t").unwrap())
        .await
        .unwrap();
    let table = loaded.to_table(catalog.file_io().clone()).unwrap();
    let batches: Vec<RecordBatch> = table
        .scan()
        .select_all()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut rows = Vec::new();
    for b in batches {
        let id = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let info = b
            .column_by_name("info")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            rows.push((
                id.value(i),
                info.is_valid(i).then(|| info.value(i).to_string()),
                ts.is_valid(i).then(|| ts.value(i)),
            ));
        }
    }
    rows.sort();
    rows
}

fn expected_ts(i: i64) -> i64 {
    // 2026-11-30T10:00:SS.ffffff+01:00 is 09:00:SS UTC.
    1_796_029_200_000_000 + (i % 60) * 1_000_000 + i
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_rust_scan_reads_back_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let floe = create(dir.path()).await;
    let t = parse_table("bronze.t").unwrap();
    let report = floe
        .ingest(&t, vec![input("a", records(0..2000))], &options(300))
        .await
        .unwrap();
    assert_eq!(report.records_committed, 2000);
    assert_eq!(report.requests, 7);
    let rows = scan(&floe).await;
    assert_eq!(rows.len(), 2000);
    for (i, (id, info, ts)) in rows.into_iter().enumerate() {
        let i = i as i64;
        assert_eq!(id, i);
        assert_eq!(info.as_deref(), Some(format!("record {i}").as_str()));
        assert_eq!(ts, Some(expected_ts(i)), "ts of {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_at_each_step_then_retry_leaves_every_row_once() {
    for point in FaultPoint::ALL {
        let dir = tempfile::tempdir().unwrap();
        create(dir.path()).await;
        let t = parse_table("bronze.t").unwrap();
        let faulty = Embedded::open(dir.path(), Faults::at(point, FaultMode::Error, 2)).unwrap();
        // Writer faults fail the ingest; committer faults are retried inside it.
        let first = faulty
            .ingest(&t, vec![input("a", records(0..1000))], &options(250))
            .await;
        match point {
            FaultPoint::AfterUpload | FaultPoint::AfterEnqueue => {
                let err = first
                    .expect_err("a writer fault fails the ingest")
                    .to_string();
                assert!(err.contains(point.name()), "{point}: {err}");
            }
            _ => {
                let r = first.unwrap_or_else(|e| panic!("{point}: {e}"));
                assert_eq!(r.records_committed, 1000, "{point}");
            }
        }
        let clean = Embedded::open(dir.path(), Faults::none()).unwrap();
        clean
            .ingest(&t, vec![input("a", records(0..1000))], &options(250))
            .await
            .unwrap();
        let ids: Vec<i64> = scan(&clean).await.into_iter().map(|r| r.0).collect();
        assert_eq!(
            ids,
            (0..1000).collect::<Vec<_>>(),
            "{point}: rows lost or doubled"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_committers_on_one_table_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    create(dir.path()).await;
    let t = parse_table("bronze.t").unwrap();
    // Two processes' worth of pipeline, each with its own catalog connection.
    let a = Embedded::open(dir.path(), Faults::none()).unwrap();
    let b = Embedded::open(dir.path(), Faults::none()).unwrap();
    let opts = options(100);
    let (ra, rb) = tokio::join!(
        a.ingest(&t, vec![input("a", records(0..3000))], &opts),
        b.ingest(&t, vec![input("b", records(3000..6000))], &opts),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.records_committed + rb.records_committed, 6000);
    let ids: Vec<i64> = scan(&a).await.into_iter().map(|r| r.0).collect();
    assert_eq!(ids, (0..6000).collect::<Vec<_>>());
    // Every snapshot's parent is the previous one: no commit overwrote another.
    let loaded = a.catalog().load_table(&t).await.unwrap();
    let mut lineage = 0;
    let mut next = loaded.metadata.current_snapshot_id();
    while let Some(s) = next.and_then(|id| loaded.metadata.snapshot_by_id(id)) {
        lineage += 1;
        next = s.parent_snapshot_id();
    }
    assert_eq!(lineage, loaded.metadata.snapshots().len());
}
