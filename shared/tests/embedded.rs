//! The embedded pipeline in-process: tables read back through iceberg-rust's
//! own scan, error faults at every step, and concurrent committers.

use std::io::Cursor;
use std::path::Path;

use arrow_array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::ident::parse_table;
use floe_core::source::SourceKind;
use floe_core::tabledef;

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
        kind: SourceKind::File,
        reader: Box::new(Cursor::new(data)),
        path: None,
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
    let batches =
        floe_test_support::scan(floe.catalog().as_ref(), &parse_table("bronze.t").unwrap()).await;
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
        .ingest(Some(&t), vec![input("a", records(0..2000))], &options(300))
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
        // Writer points fail the second batch; committer points the first commit,
        // since every batch may coalesce into one.
        let nth = match point {
            FaultPoint::AfterUpload | FaultPoint::AfterEnqueue => 2,
            _ => 1,
        };
        let faulty = Embedded::open(dir.path(), Faults::at(point, FaultMode::Error, nth)).unwrap();
        // Writer faults fail the ingest; committer faults are retried inside it.
        let first = faulty
            .ingest(Some(&t), vec![input("a", records(0..1000))], &options(250))
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
                if point == FaultPoint::AfterCommit {
                    // The unacknowledged requests came back and were recognised.
                    assert!(r.duplicates >= 1, "{point}: {r:?}");
                }
            }
        }
        let clean = Embedded::open(dir.path(), Faults::none()).unwrap();
        clean
            .ingest(Some(&t), vec![input("a", records(0..1000))], &options(250))
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
        a.ingest(Some(&t), vec![input("a", records(0..3000))], &opts),
        b.ingest(Some(&t), vec![input("b", records(3000..6000))], &opts),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_rust_scan_reads_every_type_exactly() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Decimal128Type, TimestampMicrosecondType};

    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../local-dev/tests/data");
    let dir = tempfile::tempdir().unwrap();
    // Evolution off: record 4's unknown nested `extra` is ignored, not added.
    let mut config = floe_core::config::Config::default();
    config.defaults.evolution = false;
    let floe = Embedded::with_config(dir.path(), config, Faults::none()).unwrap();
    let ident = parse_table("silver.all_types").unwrap();
    let schema = tabledef::parse_schema(
        &std::fs::read_to_string(data.join("all_types.schema.json")).unwrap(),
    )
    .unwrap();
    floe.create_table(
        &ident,
        tabledef::creation("all_types", schema, Default::default(), Default::default()),
    )
    .await
    .unwrap();
    let file = std::fs::File::open(data.join("all_types.ndjson")).unwrap();
    let inputs = vec![Input {
        source: "test:all_types".into(),
        kind: SourceKind::File,
        reader: Box::new(file),
        path: None,
    }];
    let report = floe
        .ingest(Some(&ident), inputs, &options(100))
        .await
        .unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);

    let batches = floe_test_support::scan(floe.catalog().as_ref(), &ident).await;
    let batch = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(batch.num_rows(), 4);
    let col = |name: &str| batch.column_by_name(name).unwrap().clone();
    let ids = col("id");
    let row = |id: i64| {
        (0..batch.num_rows())
            .find(|i| {
                ids.as_primitive::<arrow_array::types::Int64Type>()
                    .value(*i)
                    == id
            })
            .unwrap()
    };
    let dec = col("dec");
    let dec = dec.as_primitive::<Decimal128Type>();
    assert_eq!(
        dec.value(row(1)),
        12_345_678_901_234_567_890_123_456_780_123_456_789
    );
    assert_eq!(dec.value(row(3)), -1);
    assert_eq!(dec.value(row(4)), 15_000_000_000_000);
    assert!(dec.is_null(row(2)));
    let tstz = col("tstz");
    let tstz = tstz.as_primitive::<TimestampMicrosecondType>();
    // 2026-11-30T10:00:00.123456+05:30 and epoch millis 1764496800123.
    assert_eq!(tstz.value(row(1)), 1_796_013_000_123_456);
    assert_eq!(tstz.value(row(3)), 1_764_496_800_123_000);
    let points = col("points");
    let points = points.as_list::<i32>();
    assert!(points.is_null(row(2)), "a missing optional list stays null");
    assert_eq!(points.value(row(1)).len(), 1);
    assert_eq!(points.value(row(3)).len(), 0);
    let m = col("m");
    let m = m.as_map();
    assert_eq!(m.value(row(1)).len(), 2);
    let s = col("s");
    assert_eq!(
        s.as_string::<i32>().value(row(1)),
        "h\u{e9}llo \"q\" \u{1f600}"
    );
}
