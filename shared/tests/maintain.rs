//! Table maintenance on real tables: 500 small commits compacted, merged and
//! expired until the table is back to its live size with the same rows; a
//! keyed table's deletes applied so pyiceberg reads it; a writer committing
//! during compaction losing nothing; orphans removed only past their window.

use std::io::Cursor;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use floe_core::catalog::CatalogRef;
use floe_core::clock::now_ms;
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::maintain::{MaintainOptions, maintain};
use floe_core::source::SourceKind;
use floe_core::tabledef;
use floe_test_support::{racing, requests, scan};
use serde_json::Value;

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;
const KEYED: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

fn options() -> IngestOptions {
    IngestOptions {
        writers: 1,
        commit_window: Duration::from_millis(0),
        ..IngestOptions::default()
    }
}

async fn create(dir: &Path, schema: &str) -> (Embedded, TableIdent) {
    let floe = Embedded::open(dir, Faults::none()).unwrap();
    let ident = parse_table("silver.t").unwrap();
    floe.create_table(
        &ident,
        tabledef::creation(
            "t",
            tabledef::parse_schema(schema).unwrap(),
            Default::default(),
            Default::default(),
        ),
    )
    .await
    .unwrap();
    (floe, ident)
}

/// One commit of `text` as its own source (a file of that name).
async fn commit(floe: &Embedded, ident: &TableIdent, name: &str, text: String) {
    let input = Input {
        source: format!("file:/{name}"),
        kind: SourceKind::Kafka,
        reader: Box::new(Cursor::new(text.into_bytes())),
        path: None,
    };
    let r = floe
        .ingest(Some(ident), vec![input], &options())
        .await
        .unwrap();
    assert!(r.rejected.is_empty());
}

/// (id, v) of every row, by iceberg-rust's scan, sorted.
async fn rows(catalog: &CatalogRef, ident: &TableIdent) -> Vec<(i64, Option<String>)> {
    let batches: Vec<RecordBatch> = scan(catalog.as_ref(), ident).await;
    let mut out = Vec::new();
    for b in &batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let v = b.column_by_name("v").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((id.value(i), v.is_valid(i).then(|| v.value(i).to_string())));
        }
    }
    out.sort();
    out
}

/// The table read by pyiceberg, which applies no equality deletes.
fn pyiceberg(dir: &Path, table: &str) -> Value {
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../local-dev/tests/read_table.py"
    );
    let out = Command::new(&python)
        .arg(script)
        .arg(dir)
        .arg(table)
        .args(["--sort", "id"])
        .output()
        .expect("run pyiceberg (./local-dev/test.sh installs it)");
    assert!(
        out.status.success(),
        "pyiceberg: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Files under `dir` with their sizes, for failure messages.
fn listing(dir: &Path, out: &mut Vec<(u64, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_dir() {
            listing(&e.path(), out);
        } else {
            out.push((m.len(), e.path().display().to_string()));
        }
    }
}

fn du(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        total += if m.is_dir() { du(&e.path()) } else { m.len() };
    }
    total
}

fn expire_everything() -> MaintainOptions {
    MaintainOptions {
        max_snapshot_age_ms: Some(0),
        now_ms: now_ms() + 1,
        ..MaintainOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_small_commits_shrink_to_the_live_data_with_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), SCHEMA).await;
    for c in 0..500 {
        // (each its own commit)
        let text: String = (0..20)
            .map(|i| format!("{{\"id\":{},\"v\":\"row {c} {i}\"}}\n", c * 20 + i))
            .collect();
        commit(&floe, &ident, &format!("b{c}"), text).await;
    }
    let catalog = floe.catalog();
    let before = rows(&catalog, &ident).await;
    assert_eq!(before.len(), 10_000);
    let table_dir = dir.path().join("silver").join("t");
    let du_before = du(&table_dir);

    let report = maintain(&catalog, &ident, &expire_everything())
        .await
        .unwrap();
    assert_eq!(report.before.data_files, 500);
    assert!(report.before.snapshots >= 500);
    assert!(
        report.after.data_files * 10 <= report.before.data_files,
        "{report:?}"
    );
    assert!(
        report.after.snapshots <= 2,
        "retention keeps one: {:?}",
        report.after
    );
    assert!(report.after.manifests <= 2, "{:?}", report.after);
    assert_eq!(report.after.delete_files, 0);
    assert!(report.expired_snapshots >= 499);

    assert_eq!(
        rows(&catalog, &ident).await,
        before,
        "iceberg-rust reads the same rows"
    );
    let py = pyiceberg(dir.path(), "silver.t");
    assert_eq!(py["count"], 10_000);
    assert_eq!(py["rows"][1234]["v"], before[1234].1.clone().unwrap());

    let du_first = du(&table_dir);
    assert!(
        du_first * 20 < du_before,
        "{du_first} bytes left of {du_before}"
    );
    // A second run finds nothing to do and changes nothing.
    let again = maintain(&catalog, &ident, &expire_everything())
        .await
        .unwrap();
    assert_eq!(again.compacted_files, 0);
    assert_eq!(rows(&catalog, &ident).await, before);

    // After it, the disk holds the live data plus one metadata version's files
    // (the first run's manifest of the 500 replaced files has expired too).
    let loaded = catalog.load_table(&ident).await.unwrap();
    let live: u64 = loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties["total-files-size"]
        .parse()
        .unwrap();
    let du_after = du(&table_dir);
    let mut files = Vec::new();
    listing(&table_dir, &mut files);
    files.sort();
    assert!(
        du_after < live + 64 * 1024,
        "table dir {du_after} bytes (was {du_before}) for {live} bytes of live data: {} files ({} data), largest {:?}",
        files.len(),
        files.iter().filter(|(_, p)| p.contains("/data/")).count(),
        &files[files.len().saturating_sub(5)..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_table_compacts_to_no_delete_files_and_pyiceberg_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), KEYED).await;
    let mut model = std::collections::BTreeMap::new();
    let mut seed = 42u64;
    for c in 0..30 {
        let mut text = String::new();
        for i in 0..40 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let id = (seed % 100) as i64;
            if seed.is_multiple_of(4) {
                model.remove(&id);
                text.push_str(&format!("{{\"_op\":\"d\",\"id\":{id}}}\n"));
            } else {
                model.insert(id, format!("v{c}-{i}"));
                text.push_str(&format!(
                    "{{\"_op\":\"u\",\"id\":{id},\"v\":\"v{c}-{i}\"}}\n"
                ));
            }
        }
        // Each batch commits before the next is read: source order holds.
        commit(&floe, &ident, &format!("k{c}"), text).await;
    }
    let catalog = floe.catalog();
    let expected: Vec<(i64, Option<String>)> =
        model.iter().map(|(k, v)| (*k, Some(v.clone()))).collect();
    assert_eq!(rows(&catalog, &ident).await, expected);
    let report = maintain(&catalog, &ident, &expire_everything())
        .await
        .unwrap();
    assert!(report.before.delete_files > 0);
    assert_eq!(report.after.delete_files, 0, "{report:?}");
    assert_eq!(rows(&catalog, &ident).await, expected);
    let py = pyiceberg(dir.path(), "silver.t");
    assert_eq!(py["delete_files"], 0);
    let py_rows: Vec<(i64, Option<String>)> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["v"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(py_rows, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_committing_during_compaction_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), SCHEMA).await;
    for c in 0..40 {
        let text: String = (0..10)
            .map(|i| format!("{{\"id\":{},\"v\":\"a\"}}\n", c * 10 + i))
            .collect();
        commit(&floe, &ident, &format!("pre{c}"), text).await;
    }
    let writer = {
        let (floe, ident) = (floe.clone(), ident.clone());
        tokio::spawn(async move {
            for c in 40..120 {
                let text: String = (0..10)
                    .map(|i| format!("{{\"id\":{},\"v\":\"b\"}}\n", c * 10 + i))
                    .collect();
                commit(&floe, &ident, &format!("w{c}"), text).await;
            }
        })
    };
    let catalog = floe.catalog();
    let mut runs = 0;
    while !writer.is_finished() {
        // A run may give up when its inputs changed; it must never lose rows.
        let _ = maintain(&catalog, &ident, &MaintainOptions::default()).await;
        runs += 1;
    }
    writer.await.unwrap();
    maintain(&catalog, &ident, &MaintainOptions::default())
        .await
        .unwrap();
    let ids: Vec<i64> = rows(&catalog, &ident)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ids,
        (0..1200).collect::<Vec<_>>(),
        "after {runs} concurrent runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_table_changed_during_compaction_keeps_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), KEYED).await;
    let mut model = std::collections::BTreeMap::new();
    for c in 0..20 {
        let mut text = String::new();
        for i in 0..10 {
            let id = c * 10 + i;
            model.insert(id, format!("a{c}"));
            text.push_str(&format!("{{\"id\":{id},\"v\":\"a{c}\"}}\n"));
        }
        commit(&floe, &ident, &format!("pre{c}"), text).await;
    }
    // Updates of rows in the files compaction is rewriting, committed while
    // it runs: their position deletes name the old files.
    let mut seed = 7u64;
    let mut rounds = Vec::new();
    for round in 0..60 {
        let mut text = String::new();
        for i in 0..10 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let id = (seed % 200) as i64;
            let v = format!("r{round}-{i}");
            model.insert(id, v.clone());
            text.push_str(&format!("{{\"_op\":\"u\",\"id\":{id},\"v\":\"{v}\"}}\n"));
        }
        rounds.push(text);
    }
    let writer = {
        let (floe, ident) = (floe.clone(), ident.clone());
        tokio::spawn(async move {
            for (round, text) in rounds.into_iter().enumerate() {
                commit(&floe, &ident, &format!("u{round}"), text).await;
            }
        })
    };
    let catalog = floe.catalog();
    let mut runs = 0;
    while !writer.is_finished() {
        let _ = maintain(&catalog, &ident, &MaintainOptions::default()).await;
        runs += 1;
    }
    writer.await.unwrap();
    let report = maintain(&catalog, &ident, &expire_everything())
        .await
        .unwrap();
    let expected: Vec<(i64, Option<String>)> =
        model.iter().map(|(k, v)| (*k, Some(v.clone()))).collect();
    assert_eq!(rows(&catalog, &ident).await, expected, "after {runs} runs");
    assert_eq!(report.after.delete_files, 0, "{report:?}");
    let py = pyiceberg(dir.path(), "silver.t");
    let py_rows: Vec<(i64, Option<String>)> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["v"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(py_rows, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_go_only_past_their_window() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), SCHEMA).await;
    for c in 0..3 {
        commit(
            &floe,
            &ident,
            &format!("o{c}"),
            format!("{{\"id\":{c},\"v\":\"x\"}}\n"),
        )
        .await;
    }
    let data = dir.path().join("silver/t/data");
    let old = data.join("crashed-writer-00000.parquet");
    let fresh = data.join("in-flight-00000.parquet");
    std::fs::write(&old, b"PAR1 not committed").unwrap();
    std::fs::write(&fresh, b"PAR1 being committed").unwrap();
    // Older than the default window (16 days: the commit queue's and DLQ's retention).
    let old_enough = std::time::SystemTime::now() - Duration::from_secs(17 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(old_enough)
        .unwrap();
    let catalog = floe.catalog();
    let before = rows(&catalog, &ident).await;
    let report = maintain(&catalog, &ident, &MaintainOptions::default())
        .await
        .unwrap();
    assert_eq!(report.orphans.len(), 1, "{:?}", report.orphans);
    assert!(report.orphans[0].ends_with("crashed-writer-00000.parquet"));
    assert!(!old.exists());
    assert!(fresh.exists(), "a file younger than the window stays");
    assert_eq!(rows(&catalog, &ident).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_retried_after_a_concurrent_commit_keeps_the_newer_source_state() {
    use floe_core::commit::{CommitEngine, RetryPolicy};
    use floe_core::ledger::{Ledger, LedgerStore};
    const PROGRESS: &str = "pg.snapshot.public.t";
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), SCHEMA).await;
    let catalog = floe.catalog();
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    // Three small commits, each recording a Postgres snapshot's progress.
    for i in 0..3 {
        let mut r = requests::write_request(catalog.as_ref(), &ident, &[(i, "a")]).await;
        r.state.insert(PROGRESS.into(), format!("chunk {i}"));
        engine.append(&ident, vec![r]).await.unwrap();
    }
    // The committer lands chunk 9 while the compaction step is in flight,
    // so the compaction's first commit loses the race and is planned again.
    let mut rival = requests::write_request(catalog.as_ref(), &ident, &[(9, "b")]).await;
    rival.state.insert(PROGRESS.into(), "chunk 9".into());
    let racing = racing::Racing::new(catalog.clone(), rival);
    let racing_ref: CatalogRef = racing.clone();
    let report = maintain(&racing_ref, &ident, &expire_everything())
        .await
        .unwrap();
    assert!(racing.raced());
    assert_eq!(racing.conflicts(), 1, "the compaction's first commit lost");
    assert_eq!(report.compaction_steps, 1, "{report:?}");
    assert_eq!(report.compacted_files, 3, "{report:?}");

    let loaded = catalog.load_table(&ident).await.unwrap();
    let store = std::sync::Arc::new(LedgerStore::new(catalog.file_io().clone()));
    let ledger = Ledger::open(store, &loaded.metadata).await.unwrap();
    assert_eq!(
        ledger.state(PROGRESS),
        Some("chunk 9"),
        "the retried compaction restated nothing it read before the rival"
    );
    assert_eq!(
        ledger
            .high_water_mark("kafka:events/0")
            .await
            .unwrap()
            .map(|p| p.to_string()),
        Some("9".to_string())
    );
    let ids: Vec<i64> = rows(&catalog, &ident)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, [0, 1, 2, 9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_count_limit_expires_young_snapshots_and_keeps_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (floe, ident) = create(dir.path(), SCHEMA).await;
    for c in 0..5 {
        commit(
            &floe,
            &ident,
            &format!("n{c}"),
            format!("{{\"id\":{c},\"v\":\"x\"}}\n"),
        )
        .await;
    }
    let catalog = floe.catalog();
    let before = rows(&catalog, &ident).await;
    // Every snapshot is minutes old: the 24 h age keeps them all, the count does not.
    let report = maintain(
        &catalog,
        &ident,
        &MaintainOptions {
            max_snapshots: Some(2),
            ..MaintainOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.after.snapshots, 2, "{report:?}");
    // Five commits and the compaction's snapshot, less the two kept.
    assert_eq!(report.expired_snapshots, 4, "{report:?}");
    let lists = report
        .deleted_files
        .iter()
        .filter(|f| f.contains("/metadata/snap-"))
        .count();
    assert_eq!(
        lists, 4,
        "the expired snapshots' manifest lists: {:?}",
        report.deleted_files
    );
    // The last commit's snapshot, kept as the compaction's parent, still
    // names the five small files, so none of them goes yet.
    assert!(
        !report.deleted_files.iter().any(|f| f.ends_with(".parquet")),
        "{:?}",
        report.deleted_files
    );
    assert_eq!(rows(&catalog, &ident).await, before);
    assert_eq!(pyiceberg(dir.path(), "silver.t")["count"], 5);
}
