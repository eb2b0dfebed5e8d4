//! Four writers (four processes' worth of pipeline, each with its own catalog
//! connection) evolving the same table at once converge on one schema.

use std::io::Cursor;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_core::source::SourceKind;
use floe_core::tabledef;
use floe_test_support::scan;

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_adding_different_columns_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let t = parse_table("bronze.t").unwrap();
    let first = Embedded::open(dir.path(), Faults::none()).unwrap();
    first
        .create_table(
            &t,
            tabledef::creation(
                "t",
                tabledef::parse_schema(SCHEMA).unwrap(),
                Default::default(),
                Default::default(),
            ),
        )
        .await
        .unwrap();
    let columns = ["col_a", "col_b", "col_c", "col_d"];
    let writers: Vec<Embedded> = columns
        .iter()
        .map(|_| Embedded::open(dir.path(), Faults::none()).unwrap())
        .collect();
    let opts = IngestOptions {
        writers: 1,
        batch_records: 50,
        commit_window: std::time::Duration::ZERO,
        ..IngestOptions::default()
    };
    let runs = writers
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(w, (floe, col))| {
            let data: String = (0..200)
                .map(|i| format!("{{\"id\":{},\"{col}\":{}}}\n", w * 1000 + i, i + 1))
                .collect();
            let input = Input {
                source: format!("test:{col}"),
                kind: SourceKind::File,
                reader: Box::new(Cursor::new(data.into_bytes())),
                path: None,
            };
            let (t, opts) = (&t, &opts);
            async move { floe.ingest(Some(t), vec![input], opts).await }
        });
    let reports = futures::future::join_all(runs).await;
    for r in &reports {
        let r = r.as_ref().unwrap();
        assert_eq!(r.records_committed, 200);
        assert!(r.rejected.is_empty(), "{:?}", r.rejected);
    }

    let catalog = first.catalog();
    let loaded = catalog.load_table(&t).await.unwrap();
    let schema = loaded.metadata.current_schema();
    for col in columns {
        assert!(
            schema.field_by_name(col).is_some(),
            "{col} missing from {schema:?}"
        );
    }
    assert_eq!(
        schema.as_struct().fields().len(),
        5,
        "no column added twice"
    );

    let batches = scan(catalog.as_ref(), &t).await;
    let mut rows = 0;
    for b in &batches {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            rows += 1;
            let w = (ids.value(i) / 1000) as usize;
            // Each row has its own writer's column and nulls in the others.
            for (c, col) in columns.iter().enumerate() {
                let v = b.column_by_name(col).unwrap().as_primitive::<Int64Type>();
                assert_eq!(v.is_valid(i), c == w, "row {} column {col}", ids.value(i));
                if c == w {
                    assert_eq!(v.value(i), ids.value(i) % 1000 + 1);
                }
            }
        }
    }
    assert_eq!(rows, 800);
}
