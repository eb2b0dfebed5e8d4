//! Commit outcomes after answers that are not a clean success, on a Glue that
//! enforces `VersionId` (moto run by `local-dev/moto_glue.py`, with faults
//! injected per table): a commit whose `UpdateTable` applied is kept however
//! its answer went wrong, also when another writer committed on top of it
//! before its retry (landed, then overtaken); one that provably did not
//! apply is retried. Each schedule checks the table with pyiceberg and DuckDB,
//! every acknowledged record exactly once, and every file the metadata or its
//! log names present.
#![cfg(feature = "aws")]

use std::sync::Arc;

use arrow_array::{Int64Array, StringArray};
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::catalog::{Catalog, CatalogRef, GlueCatalog};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::storage::s3::S3StorageFactory;
use floe_core::tabledef;
use floe_test_support::glue::GlueFaults;
use floe_test_support::whole::missing_files;
use floe_test_support::{requests, scan, services};
use serde_json::{Value, json};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

async fn clients() -> AwsClients {
    AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// A Glue catalog as one process holds it (its own metadata cache).
fn glue(clients: &AwsClients, bucket: &str) -> CatalogRef {
    Arc::new(GlueCatalog::new(
        clients,
        None,
        &format!("s3://{bucket}/warehouse"),
        S3StorageFactory::file_io(clients),
        Faults::none(),
    ))
}

/// A new table in a new bucket and database; the catalog made it.
async fn glue_table() -> (AwsClients, String, TableIdent) {
    let clients = clients().await;
    let bucket = unique("floe").replace('_', "-");
    clients
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let ident = parse_table(&format!("{}.events", unique("outcomes"))).unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    glue(&clients, &bucket)
        .create_table(
            &ident,
            tabledef::creation("events", schema, Default::default(), Default::default()),
        )
        .await
        .unwrap();
    (clients, bucket, ident)
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
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..batch.num_rows())
                .map(|i| (ids.value(i), names.value(i).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

fn owned(rows: &[(i64, &str)]) -> Vec<(i64, String)> {
    rows.iter().map(|(i, n)| (*i, n.to_string())).collect()
}

/// The table holds exactly `want`, as iceberg-rust, pyiceberg and DuckDB
/// read it, and no file its metadata or log names is missing.
async fn assert_table(catalog: &dyn Catalog, ident: &TableIdent, want: &[(i64, &str)]) {
    let missing = missing_files(catalog, ident).await;
    assert!(
        missing.is_empty(),
        "files the table names are gone: {missing:?}"
    );
    let want = owned(want);
    assert_eq!(rows(catalog, ident).await, want, "iceberg-rust");
    let loaded = catalog.load_table(ident).await.unwrap();
    let v = services::python_json(
        "shared/tests/read_s3.py",
        &[services::moto(), &loaded.metadata_location],
    );
    let read = |v: &Value| -> Vec<(i64, String)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(read(&v["pyiceberg"]), want, "pyiceberg");
    assert_eq!(read(&v["duckdb"]), want, "DuckDB");
}

/// How the rival commit B goes in a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rival {
    /// No rival.
    None,
    /// B commits while A's UpdateTable (or its retry) is held.
    WhileHeld,
}

/// Committer A's request meets `rules` (moto_glue.py's UpdateTable rules);
/// with a rival, B commits while one of A's UpdateTables is held. Then both
/// requests are redelivered: the table must hold each record once, whole.
async fn schedule(rules: Value, rival: Rival) -> (u64, GlueFaults) {
    let (clients, bucket, ident) = glue_table().await;
    let a_catalog = glue(&clients, &bucket);
    let a_req =
        requests::write_request(a_catalog.as_ref(), &ident, &[(1, "ada"), (2, "grace")]).await;
    let b_req = requests::write_request(a_catalog.as_ref(), &ident, &[(3, "edsger")]).await;
    let faults = GlueFaults::new(&ident);
    faults.set(rules, 0);

    let a_engine = CommitEngine::new(a_catalog.clone(), RetryPolicy::default());
    let (a_ident, a_sent) = (ident.clone(), a_req.clone());
    let a = tokio::spawn(async move { a_engine.append(&a_ident, vec![a_sent]).await });
    if rival == Rival::WhileHeld {
        faults.wait_held(1).await;
        // Another process: its own catalog, its own engine.
        let b_engine = CommitEngine::new(glue(&clients, &bucket), RetryPolicy::default());
        let b = b_engine.append(&ident, vec![b_req.clone()]).await.unwrap();
        assert_eq!(b.committed, vec![b_req.batch_id.clone()]);
        faults.release();
    }
    let a = a.await.unwrap().unwrap();
    assert!(a.refused.is_empty(), "{a:?}");

    // Redeliveries of both: nothing is committed twice.
    let again = CommitEngine::new(glue(&clients, &bucket), RetryPolicy::default());
    let mut all = vec![a_req.clone()];
    if rival == Rival::None {
        all.push(b_req.clone());
    }
    let out = again.append(&ident, all).await.unwrap();
    let redone = again.append(&ident, vec![a_req, b_req]).await.unwrap();
    assert!(redone.committed.is_empty(), "{redone:?}");
    assert_eq!(redone.duplicates.len(), 2, "{redone:?}");
    assert_table(
        a_catalog.as_ref(),
        &ident,
        &[(1, "ada"), (2, "grace"), (3, "edsger")],
    )
    .await;
    (a.records + out.records, faults)
}

/// The schedule of issue 31: A's UpdateTable lands but the connection drops;
/// while the SDK waits to retry, B commits on top of A's metadata; A's retry
/// is refused as stale. A landed: its files stay, and it reports so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_then_overtaken_after_a_dropped_connection() {
    let (records, faults) =
        schedule(json!([{"then": "drop"}, {"hold": true}]), Rival::WhileHeld).await;
    assert_eq!(records, 2, "A's two records, committed by A's own call");
    let seen = faults.seen();
    assert_eq!(seen.stale, 1, "A's retry was refused as stale: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_then_overtaken_after_a_500() {
    let (records, faults) =
        schedule(json!([{"then": "500"}, {"hold": true}]), Rival::WhileHeld).await;
    assert_eq!(records, 2);
    assert_eq!(faults.seen().stale, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_then_overtaken_after_throttling() {
    let (records, faults) = schedule(
        json!([{"then": "throttle"}, {"hold": true}]),
        Rival::WhileHeld,
    )
    .await;
    assert_eq!(records, 2);
    assert_eq!(faults.seen().stale, 1);
}

/// Glue applies A's update, then answers ConcurrentModificationException,
/// late, after B committed on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_then_overtaken_then_answered_conflict() {
    let (records, _) = schedule(
        json!([{"then": "conflict", "hold_after": true}]),
        Rival::WhileHeld,
    )
    .await;
    assert_eq!(records, 2);
}

/// A's answer (a success) arrives after B committed on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_and_answered_late_after_another_commit() {
    let (records, _) = schedule(json!([{"hold_after": true}]), Rival::WhileHeld).await;
    assert_eq!(records, 2);
}

/// Applied, then each kind of failed answer, no rival: the SDK's retry is
/// refused as stale, and the table shows A's commit landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_then_failed_answers_count_as_landed() {
    for then in ["drop", "500", "conflict", "throttle"] {
        let (records, faults) = schedule(json!([{ "then": then }]), Rival::None).await;
        assert_eq!(records, 3, "{then}: every record once");
        assert_eq!(
            faults.seen().applied,
            2,
            "{then}: A's update and B's redelivery"
        );
        assert_eq!(faults.seen().archived, 0, "{then}: no archived versions");
    }
}

/// Refused without applying, and B commits before A's retry: the retry is
/// stale, A's commit provably did not land, and the engine commits it again
/// on top of B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_then_overtaken_is_retried_on_the_new_table() {
    let (records, faults) = schedule(
        json!([{"apply": false, "status": 500}, {"hold": true}]),
        Rival::WhileHeld,
    )
    .await;
    assert_eq!(records, 2);
    let seen = faults.seen();
    assert_eq!((seen.refused, seen.stale), (1, 1), "{seen:?}");
}

/// Two committers (as two `floe ingest` processes) and a maintenance process
/// (compaction, expiry of every snapshot but the current) on one Glue table
/// whose GetTable answers arrive 200 ms late, describing the table as it was
/// when read: every process keeps acting on tables the others have moved
/// past and reading files their commits replaced (ledger heads, manifests
/// of expired snapshots). No job fails; every record is in the table once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ingests_and_maintenance_never_fail_because_the_table_moved() {
    use floe_core::maintain::{MaintainOptions, maintain, orphans::Lister};

    let (clients, bucket, ident) = glue_table().await;
    let writer = glue(&clients, &bucket);
    let mut requests = Vec::new();
    let mut want = Vec::new();
    for i in 0..12i64 {
        let name = format!("row {i}");
        requests.push(requests::write_request(writer.as_ref(), &ident, &[(i, &name)]).await);
        want.push((i, name));
    }
    GlueFaults::new(&ident).set(json!([]), 200);

    let mut jobs = Vec::new();
    for mine in [requests[..6].to_vec(), requests[6..].to_vec()] {
        let engine = CommitEngine::new(glue(&clients, &bucket), RetryPolicy::default());
        let ident = ident.clone();
        jobs.push(tokio::spawn(async move {
            for r in mine {
                let id = r.batch_id.clone();
                let out = engine.append(&ident, vec![r]).await;
                let out = out.unwrap_or_else(|e| panic!("ingest of {id} failed: {e}"));
                assert_eq!(out.committed, vec![id]);
            }
        }));
    }
    // Maintenance runs here, beside the spawned committers (its future is
    // not `Send`: iceberg-rust's snapshot iterators).
    let maintainer = glue(&clients, &bucket);
    for run in 0..3 {
        let opts = MaintainOptions {
            max_snapshot_age_ms: Some(0),
            now_ms: floe_core::clock::now_ms() + 1,
            lister: Lister::S3(clients.s3.clone()),
            ..MaintainOptions::default()
        };
        maintain(&maintainer, &ident, &opts)
            .await
            .unwrap_or_else(|e| panic!("maintenance run {run} failed: {e}"));
    }
    for job in jobs {
        job.await.unwrap();
    }
    GlueFaults::new(&ident).set(json!([]), 0);

    let again = CommitEngine::new(glue(&clients, &bucket), RetryPolicy::default())
        .append(&ident, requests)
        .await
        .unwrap();
    assert!(again.committed.is_empty(), "{again:?}");
    assert_eq!(again.duplicates.len(), 12);
    let want: Vec<(i64, &str)> = want.iter().map(|(i, n)| (*i, n.as_str())).collect();
    assert_table(writer.as_ref(), &ident, &want).await;
}
