//! The SQLite catalog under what other processes do to `catalog.db` and to
//! its answers: a reader holding a read transaction open while floe commits
//! (WAL: readers never block the writer), and a commit that applied, failed
//! to answer and was overtaken by another writer before its committer
//! reloaded. The table is read back by iceberg-rust, pyiceberg and DuckDB.

use std::sync::Arc;

use arrow_array::{Int64Array, StringArray};
use floe_core::catalog::{Catalog, CatalogRef, SqliteCatalog};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::storage::LocalWarehouse;
use floe_core::tabledef;
use floe_test_support::overtaking::Overtaking;
use floe_test_support::whole::missing_files;
use floe_test_support::{requests, scan, services};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

fn open(warehouse: &LocalWarehouse, faults: Faults) -> CatalogRef {
    Arc::new(
        SqliteCatalog::open(
            "floe",
            &warehouse.catalog_db(),
            &warehouse.uri(),
            warehouse.file_io(),
            faults,
        )
        .unwrap(),
    )
}

async fn table(warehouse: &LocalWarehouse) -> TableIdent {
    let ident = parse_table("bronze.t").unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    open(warehouse, Faults::none())
        .create_table(
            &ident,
            tabledef::creation("t", schema, Default::default(), Default::default()),
        )
        .await
        .unwrap();
    ident
}

async fn rows(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<(i64, String)> {
    let mut rows: Vec<(i64, String)> = scan(catalog, ident)
        .await
        .iter()
        .flat_map(|batch| {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let vs = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..batch.num_rows())
                .map(|i| (ids.value(i), vs.value(i).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

/// The table holds exactly `want` for iceberg-rust, pyiceberg and DuckDB,
/// and every file its metadata or log names is there.
async fn assert_table(
    dir: &std::path::Path,
    catalog: &dyn Catalog,
    ident: &TableIdent,
    want: &[(i64, &str)],
) {
    let missing = missing_files(catalog, ident).await;
    assert!(
        missing.is_empty(),
        "files the table names are gone: {missing:?}"
    );
    let want: Vec<(i64, String)> = want.iter().map(|(i, v)| (*i, v.to_string())).collect();
    assert_eq!(rows(catalog, ident).await, want, "iceberg-rust");
    let metadata = catalog.load_table(ident).await.unwrap().metadata_location;
    let list = dir.join("tables.json");
    std::fs::write(&list, serde_json::to_vec(&[&metadata]).unwrap()).unwrap();
    let read = services::python_json("shared/tests/read_tables.py", &[list.to_str().unwrap()]);
    for reader in ["duckdb", "pyiceberg"] {
        let mut got: Vec<(i64, String)> = read[&metadata][reader]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_string()))
            .collect();
        got.sort();
        assert_eq!(got, want, "{reader}");
    }
}

/// A reader (pyiceberg, a JdbcCatalog, the sqlite3 shell) in the middle of a
/// read transaction on catalog.db: floe's commits go through at once. In
/// rollback-journal mode they waited for the 30 s busy timeout and failed
/// with "database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_holding_a_read_transaction_never_blocks_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = LocalWarehouse::open(dir.path()).unwrap();
    let ident = table(&warehouse).await;
    let catalog = open(&warehouse, Faults::none());

    let reader = rusqlite::Connection::open(warehouse.catalog_db()).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let seen: i64 = reader
        .query_row("SELECT count(*) FROM iceberg_tables", [], |r| r.get(0))
        .unwrap();
    assert_eq!(seen, 1);

    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    for (i, v) in [(1, "a"), (2, "b")] {
        let r = requests::write_request(catalog.as_ref(), &ident, &[(i, v)]).await;
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            engine.append(&ident, vec![r]),
        )
        .await
        .expect("a reader's transaction held the commit up")
        .unwrap();
        assert_eq!(out.records, 1);
    }
    // The reader's snapshot is the one its transaction began with.
    let before: String = reader
        .query_row("SELECT metadata_location FROM iceberg_tables", [], |r| {
            r.get(0)
        })
        .unwrap();
    reader.execute_batch("COMMIT").unwrap();
    let after: String = reader
        .query_row("SELECT metadata_location FROM iceberg_tables", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_ne!(before, after);
    assert_eq!(
        after,
        catalog.load_table(&ident).await.unwrap().metadata_location
    );
    assert_table(dir.path(), catalog.as_ref(), &ident, &[(1, "a"), (2, "b")]).await;
}

/// A's swap applies but its answer is lost (the catalog_ambiguous fault);
/// before A reloads, B commits on top. A counts its batch as committed,
/// keeps its files, and redeliveries of both change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_then_overtaken_keeps_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = LocalWarehouse::open(dir.path()).unwrap();
    let ident = table(&warehouse).await;
    let plain = open(&warehouse, Faults::none());
    let a_req = requests::write_request(plain.as_ref(), &ident, &[(1, "a"), (2, "b")]).await;
    let b_req = requests::write_request(plain.as_ref(), &ident, &[(3, "c")]).await;

    let lossy = open(
        &warehouse,
        Faults::at(FaultPoint::CatalogAmbiguous, FaultMode::Error, 1),
    );
    let overtaking = Arc::new(Overtaking::new(
        lossy,
        open(&warehouse, Faults::none()),
        b_req.clone(),
    ));
    let a = CommitEngine::new(overtaking.clone(), RetryPolicy::default())
        .append(&ident, vec![a_req.clone()])
        .await
        .unwrap();
    assert!(
        overtaking
            .answer()
            .is_some_and(|a| a.contains("unknown outcome")),
        "{:?}",
        overtaking.answer()
    );
    assert_eq!(a.committed, vec![a_req.batch_id.clone()]);
    assert_eq!(a.records, 2);

    let again = CommitEngine::new(plain.clone(), RetryPolicy::default())
        .append(&ident, vec![a_req, b_req])
        .await
        .unwrap();
    assert!(again.committed.is_empty(), "{again:?}");
    assert_eq!(again.duplicates.len(), 2);
    assert_table(
        dir.path(),
        plain.as_ref(),
        &ident,
        &[(1, "a"), (2, "b"), (3, "c")],
    )
    .await;
}
