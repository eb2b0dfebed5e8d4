//! The commit engine against the SQLite catalog: idempotency, several snapshots
//! in one catalog commit, and a real lost race retried.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use async_trait::async_trait;
use floe_core::catalog::{Catalog, SqliteCatalog};
use floe_core::commit::snapshot::SnapshotPlan;
use floe_core::commit::{Action, CommitEngine, CommitError, PlanContext, RetryPolicy, room};
use floe_core::error::Classify;
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::io::FileIO;
use floe_core::iceberg::spec::Operation;
use floe_core::ident::parse_table;
use floe_core::request::{CommitRequest, VERSION};
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::write::TableWriter;
use floe_core::{ledger, tabledef};
use floe_test_support::{racing::Racing, scan};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"}]}"#;

/// The warehouse's catalog, as each process opens it.
fn open(dir: &std::path::Path) -> SqliteCatalog {
    SqliteCatalog::open(
        "floe",
        &dir.join("catalog.db"),
        &format!("file://{}", dir.display()),
        FileIO::new_with_fs(),
        Faults::none(),
    )
    .unwrap()
}

async fn setup(dir: &std::path::Path) -> (Arc<SqliteCatalog>, TableIdent) {
    let catalog = open(dir);
    let ident = parse_table("bronze.t").unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    catalog
        .create_table(
            &ident,
            tabledef::creation("t", schema, Default::default(), Default::default()),
        )
        .await
        .unwrap();
    (Arc::new(catalog), ident)
}

/// A new table `bronze.{name}` whose property `key` is `value`.
async fn table_with(catalog: &SqliteCatalog, name: &str, key: &str, value: &str) -> TableIdent {
    let ident = parse_table(&format!("bronze.{name}")).unwrap();
    let properties = [(key.to_string(), value.to_string())];
    catalog
        .create_table(
            &ident,
            tabledef::creation(
                name,
                tabledef::parse_schema(SCHEMA).unwrap(),
                Default::default(),
                properties.into_iter().collect(),
            ),
        )
        .await
        .unwrap();
    ident
}

/// Writes ids `range` as real Parquet and returns the commit request for them.
async fn request(catalog: &SqliteCatalog, ident: &TableIdent, first: i64, n: i64) -> CommitRequest {
    let loaded = catalog.load_table(ident).await.unwrap();
    let writer = TableWriter::new(ident, &loaded.metadata, catalog.file_io().clone()).unwrap();
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(first..first + n));
    let schema = Arc::new(
        floe_core::iceberg::arrow::schema_to_arrow_schema(loaded.metadata.current_schema())
            .unwrap(),
    );
    let batch = RecordBatch::try_new(schema, vec![ids]).unwrap();
    let spans = vec![SourceSpan {
        source: "kafka:t/0".into(),
        positions: Positions::Range {
            first: (first as u64).into(),
            last: ((first + n - 1) as u64).into(),
        },
        stream: true,
    }];
    let id = batch_id(&spans, None);
    let files = writer.write(&batch, &id).await.unwrap();
    CommitRequest {
        version: VERSION,
        table_uuid: None,
        table: ident.clone(),
        batch_id: id.clone(),
        sources: spans,
        schema_id: writer.schema_id(),
        spec_id: writer.spec_id(),
        data_files: CommitRequest::encode_files(
            &loaded.metadata,
            writer.spec_id(),
            files,
            (ident, &id),
        )
        .unwrap(),
        delete_files: vec![],
        keyed: false,
        truncate: false,
        truncate_at: None,
        state: Default::default(),
        record_count: n as u64,
        rejected_count: 0,
        created_at_ms: 0,
        oldest_record_ms: None,
        key_file: None,
        order: Vec::new(),
    }
}

async fn ids(catalog: &SqliteCatalog, ident: &TableIdent) -> Vec<i64> {
    let batches = scan(catalog, ident).await;
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    out.sort_unstable();
    out
}

/// One snapshot per request, in order: the shape keyed commits will take.
#[derive(Debug)]
struct OnePerRequest;

#[async_trait]
impl Action for OnePerRequest {
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        requests: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        let metadata = ctx.metadata();
        requests
            .iter()
            .map(|r| {
                Ok(SnapshotPlan {
                    operation: Operation::Append,
                    added_data: r
                        .data_files(metadata)?
                        .into_iter()
                        .map(|f| (r.spec_id, f))
                        .collect(),
                    properties: ledger::summary_entries([r]),
                    ..Default::default()
                })
            })
            .collect()
    }
}

#[tokio::test]
async fn appends_coalesce_into_one_snapshot_and_never_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident) = setup(dir.path()).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let a = request(&catalog, &ident, 0, 10).await;
    let b = request(&catalog, &ident, 10, 5).await;

    let out = engine
        .append(&ident, vec![a.clone(), b.clone(), a.clone()])
        .await
        .unwrap();
    assert_eq!(
        out.committed.len(),
        2,
        "the duplicate delivery of a is dropped"
    );
    assert_eq!(out.snapshot_ids.len(), 1);
    assert_eq!(out.records, 15);

    let again = engine
        .append(&ident, vec![b.clone(), a.clone()])
        .await
        .unwrap();
    assert!(again.committed.is_empty());
    assert_eq!(again.duplicates.len(), 2);
    assert_eq!(ids(&catalog, &ident).await, (0..15).collect::<Vec<_>>());

    let loaded = catalog.load_table(&ident).await.unwrap();
    let snap = loaded.metadata.current_snapshot().unwrap();
    let summary = &snap.summary().additional_properties;
    assert_eq!(summary["added-records"], "15");
    assert_eq!(summary["total-records"], "15");
    assert_eq!(summary[ledger::REQUESTS], "2");
    assert_eq!(summary["floe.hwm.kafka:t/0"], "14");
}

#[tokio::test]
async fn several_snapshots_chain_in_one_catalog_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident) = setup(dir.path()).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let first = request(&catalog, &ident, 0, 3).await;
    engine.append(&ident, vec![first]).await.unwrap();
    let before = catalog.load_table(&ident).await.unwrap();

    let reqs = vec![
        request(&catalog, &ident, 3, 3).await,
        request(&catalog, &ident, 6, 3).await,
        request(&catalog, &ident, 9, 3).await,
    ];
    let out = engine.commit(&ident, reqs, &OnePerRequest).await.unwrap();
    assert_eq!(out.snapshot_ids.len(), 3);

    let after = catalog.load_table(&ident).await.unwrap();
    assert_eq!(after.metadata.snapshots().len(), 4);
    // One metadata version for the three snapshots.
    assert_eq!(
        after.metadata.metadata_log().len(),
        before.metadata.metadata_log().len() + 1
    );
    let mut parent = before.metadata.current_snapshot_id();
    let first_seq = before.metadata.last_sequence_number() + 1;
    for (seq, id) in (first_seq..).zip(&out.snapshot_ids) {
        let s = after.metadata.snapshot_by_id(*id).unwrap();
        assert_eq!(s.parent_snapshot_id(), parent);
        assert_eq!(s.sequence_number(), seq);
        parent = Some(*id);
    }
    assert_eq!(after.metadata.current_snapshot_id(), parent);
    assert_eq!(
        after
            .metadata
            .current_snapshot()
            .unwrap()
            .summary()
            .additional_properties["total-records"],
        "12"
    );
    assert_eq!(ids(&catalog, &ident).await, (0..12).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_lost_race_is_retried_on_the_new_table_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident) = setup(dir.path()).await;
    let rival = request(&catalog, &ident, 100, 4).await;
    let racing = Racing::new(catalog.clone(), rival);
    let engine = CommitEngine::new(racing.clone(), RetryPolicy::default());
    let mine = request(&catalog, &ident, 0, 6).await;
    let out = engine.append(&ident, vec![mine]).await.unwrap();
    assert!(racing.raced());
    assert_eq!(racing.conflicts(), 1);
    assert_eq!(
        out.attempts, 2,
        "the first attempt lost the compare-and-swap"
    );
    assert_eq!(out.committed.len(), 1);
    let mut want: Vec<i64> = (0..6).collect();
    want.extend(100..104);
    assert_eq!(ids(&catalog, &ident).await, want);
    let loaded = catalog.load_table(&ident).await.unwrap();
    assert_eq!(loaded.metadata.snapshots().len(), 2);
}

#[tokio::test]
async fn a_request_whose_files_are_gone_or_foreign_is_refused_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident) = setup(dir.path()).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());

    // Its data file was cleaned as an orphan while the request waited.
    let gone = request(&catalog, &ident, 0, 3).await;
    let path = gone.data_files[0]["file_path"]
        .as_str()
        .unwrap()
        .to_string();
    catalog.file_io().delete(&path).await.unwrap();
    // It names a file of another table's location.
    let mut foreign = request(&catalog, &ident, 10, 3).await;
    let outside = format!("file://{}/other/t/data/x.parquet", dir.path().display());
    foreign.data_files[0]["file_path"] = serde_json::json!(outside);
    foreign.batch_id = "foreign".into();
    // It claims another size than its file has.
    let mut resized = request(&catalog, &ident, 30, 3).await;
    let size = resized.data_files[0]["file_size_in_bytes"]
        .as_u64()
        .unwrap();
    resized.data_files[0]["file_size_in_bytes"] = serde_json::json!(size + 1);
    let good = request(&catalog, &ident, 20, 2).await;

    let outcome = engine
        .append(
            &ident,
            vec![gone.clone(), foreign, resized.clone(), good.clone()],
        )
        .await
        .unwrap();
    assert_eq!(outcome.committed, vec![good.batch_id.clone()]);
    let refused: std::collections::HashMap<_, _> = outcome.refused.into_iter().collect();
    assert!(refused[&gone.batch_id].contains("is gone"), "{refused:?}");
    assert!(
        refused[&resized.batch_id].contains(&format!("bytes, the request says {}", size + 1)),
        "{refused:?}"
    );
    assert!(
        refused["foreign"].contains("not under the table's location"),
        "{refused:?}"
    );
    let loaded = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        loaded
            .metadata
            .current_snapshot()
            .unwrap()
            .summary()
            .additional_properties["total-records"],
        "2"
    );
}

#[tokio::test]
async fn the_metadata_log_keeps_previous_versions_max_and_deletes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = setup(dir.path()).await;
    let ident = table_with(
        &catalog,
        "short",
        "write.metadata.previous-versions-max",
        "3",
    )
    .await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    for i in 0..8 {
        let r = request(&catalog, &ident, i * 10, 2).await;
        engine.append(&ident, vec![r]).await.unwrap();
    }
    let loaded = catalog.load_table(&ident).await.unwrap();
    let logged: Vec<_> = loaded
        .metadata
        .metadata_log()
        .iter()
        .map(|l| l.metadata_file.clone())
        .collect();
    assert_eq!(logged.len(), 3, "{logged:?}");
    // On disk: the logged versions and the current one, nothing older.
    let mut on_disk: Vec<String> = std::fs::read_dir(dir.path().join("bronze/short/metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".metadata.json"))
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = logged
        .iter()
        .chain([&loaded.metadata_location])
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    expected.sort();
    assert_eq!(on_disk, expected);
    assert_eq!(ids(&catalog, &ident).await.len(), 16);
}

#[tokio::test]
async fn a_load_after_another_process_committed_reads_its_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident) = setup(dir.path()).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    engine
        .append(&ident, vec![request(&catalog, &ident, 0, 3).await])
        .await
        .unwrap();
    let seen = catalog.load_table(&ident).await.unwrap();
    // A second process: its own catalog handle on the same database.
    let other = Arc::new(open(dir.path()));
    CommitEngine::new(other.clone(), RetryPolicy::default())
        .append(&ident, vec![request(&other, &ident, 3, 4).await])
        .await
        .unwrap();
    // The first handle's remembered metadata is not the table's any more.
    let now = catalog.load_table(&ident).await.unwrap();
    assert_ne!(now.metadata_location, seen.metadata_location);
    assert_eq!(ids(&catalog, &ident).await, (0..7).collect::<Vec<i64>>());
    engine
        .append(&ident, vec![request(&catalog, &ident, 7, 1).await])
        .await
        .unwrap();
    assert_eq!(ids(&other, &ident).await, (0..8).collect::<Vec<i64>>());
}

#[tokio::test]
async fn the_tables_commit_retry_properties_bound_the_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = setup(dir.path()).await;
    let ident = table_with(&catalog, "once", floe_core::commit::retry::NUM_RETRIES, "0").await;
    let rival = request(&catalog, &ident, 100, 4).await;
    let racing = Racing::new(catalog.clone(), rival);
    let engine = CommitEngine::new(racing.clone(), RetryPolicy::default());
    let mine = request(&catalog, &ident, 0, 6).await;
    let err = engine.append(&ident, vec![mine]).await.unwrap_err();
    assert!(
        matches!(err, CommitError::Exhausted { attempts: 1, .. }),
        "no retry after the lost race: {err}"
    );
    assert!(err.is_transient(), "the requests stay queued");
    assert_eq!(ids(&catalog, &ident).await, (100..104).collect::<Vec<_>>());
}

/// The timestamps of the table's snapshots, oldest first.
async fn snapshot_times(catalog: &SqliteCatalog, ident: &TableIdent) -> Vec<i64> {
    let loaded = catalog.load_table(ident).await.unwrap();
    let mut times: Vec<i64> = loaded
        .metadata
        .snapshots()
        .map(|s| s.timestamp_ms())
        .collect();
    times.sort_unstable();
    times
}

#[tokio::test]
async fn a_minimum_interval_spaces_floes_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = setup(dir.path()).await;
    let ident = table_with(&catalog, "spaced", room::MIN_INTERVAL, "600").await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    for first in [0, 10, 20] {
        let r = request(&catalog, &ident, first, 2).await;
        engine.append(&ident, vec![r]).await.unwrap();
    }
    let times = snapshot_times(&catalog, &ident).await;
    assert_eq!(times.len(), 3);
    assert!(
        times.windows(2).all(|w| w[1] - w[0] >= 600),
        "commits 600 ms apart at least: {times:?}"
    );
    assert_eq!(ids(&catalog, &ident).await, vec![0, 1, 10, 11, 20, 21]);
}

#[tokio::test]
async fn a_pause_holds_commits_until_it_ends_and_a_long_one_keeps_them_queued() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = setup(dir.path()).await;
    let until = floe_core::clock::wall_ms() + 800;
    let ident = table_with(&catalog, "paused", room::PAUSED_UNTIL, &until.to_string()).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let r = request(&catalog, &ident, 0, 3).await;
    engine.append(&ident, vec![r]).await.unwrap();
    let times = snapshot_times(&catalog, &ident).await;
    assert!(
        times[0] >= until,
        "committed after the pause: {times:?} < {until}"
    );

    // A pause past what a commit waits fails it, transiently: the request
    // stays queued and nothing is committed.
    let far = table_with(&catalog, "held", room::PAUSED_UNTIL, "2999-01-01T00:00:00Z").await;
    let r = request(&catalog, &far, 0, 3).await;
    let err = engine.append(&far, vec![r]).await.unwrap_err();
    assert!(matches!(err, CommitError::Paused { .. }), "{err}");
    assert!(err.is_transient(), "{err}");
    assert!(
        err.to_string().contains("floe.commit.paused-until"),
        "{err}"
    );
    assert!(ids(&catalog, &far).await.is_empty());

    let bad = table_with(&catalog, "bad", room::PAUSED_UNTIL, "soon").await;
    let r = request(&catalog, &bad, 0, 3).await;
    let err = engine.append(&bad, vec![r]).await.unwrap_err();
    assert!(!err.is_transient(), "{err}");
    assert!(
        err.to_string().contains("floe.commit.paused-until"),
        "{err}"
    );
}
