//! The initial copy into an empty table appends its chunks: no key
//! lookups, no deletes, no key files, and no compaction after it when its
//! chunks are bounded by bytes. A stream change that adds a row ends
//! appending, and changes made during the copy still win over the rows
//! the copy reads. Each through `sync` into an embedded warehouse, the
//! table read back by iceberg-rust's scan.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floe_core::commit::live::LiveFiles;
use floe_core::embedded::Embedded;
use floe_postgres::sync::{SyncOptions, SyncReport, open, sync};
use floe_postgres::{PgConfig, setup};

use super::pitfalls::{Rows, iceberg_rows, options, warehouse};
use super::{client, config, fresh_db};

/// The summary key of a snapshot that looked keys up (position deletes).
const KEYED: &str = "floe.pos.requests";

/// A fresh database `name` with `ddl` run and its slot set up for `t`,
/// copied in chunks of about 64 KiB; `None` when Postgres tests are skipped.
async fn small_chunks(name: &str, ddl: &str) -> Option<(String, PgConfig)> {
    let conninfo = fresh_db(name).await?;
    client(&conninfo).await.batch_execute(ddl).await.unwrap();
    let mut cfg = config(&conninfo, name, &["public.t"]);
    cfg.chunk_bytes = 64 << 10;
    setup(&cfg).await.unwrap();
    Some((conninfo, cfg))
}

async fn run_with(floe: &Embedded, cfg: &PgConfig, opts: &SyncOptions) -> SyncReport {
    let mut source = open(floe, cfg, &opts.namespace).await.unwrap();
    sync(floe, &mut source, cfg, opts).await.unwrap()
}

/// Each snapshot of `raw.t`, oldest first: its operation and whether it
/// looked keys up.
async fn snapshots(floe: &Embedded) -> Vec<(String, bool)> {
    let ident = floe_core::ident::parse_table("raw.t").unwrap();
    let loaded = floe.catalog().load_table(&ident).await.unwrap();
    let mut snapshots: Vec<_> = loaded.metadata.snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots
        .iter()
        .map(|s| {
            let summary = s.summary();
            (
                summary.operation.as_str().to_string(),
                summary.additional_properties.contains_key(KEYED),
            )
        })
        .collect()
}

async fn live(floe: &Embedded) -> LiveFiles {
    let ident = floe_core::ident::parse_table("raw.t").unwrap();
    let loaded = floe.catalog().load_table(&ident).await.unwrap();
    LiveFiles::load(floe.catalog().file_io(), &loaded.metadata)
        .await
        .unwrap()
}

/// Key files the writer wrote beside the table's ledger.
fn key_files(dir: &std::path::Path) -> usize {
    let mut found = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.parent().is_some_and(|p| p.ends_with("keys")) {
                found += 1;
            }
        }
    }
    found
}

/// `t`'s rows in Postgres, as `iceberg_rows` shows them: id → v.
async fn postgres_rows(conninfo: &str) -> BTreeMap<String, String> {
    client(conninfo)
        .await
        .query("SELECT id::text, v FROM t", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn values(rows: &Rows, key: &str) -> BTreeMap<String, String> {
    rows.values()
        .map(|r| (r[key].clone(), r["v"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_into_an_empty_table_appends_its_chunks_and_streaming_replaces_their_rows() {
    let Some((conninfo, cfg)) = small_chunks(
        "floe_app_copy",
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 30000) g;",
    )
    .await
    else {
        return;
    };
    let (dir, floe) = warehouse();
    let report = run_with(&floe, &cfg, &options()).await;
    assert!(report.snapshot_done, "{report:?}");
    assert_eq!(
        values(&iceberg_rows(&floe, "raw.t").await, "id"),
        postgres_rows(&conninfo).await
    );
    // Every chunk a plain append: nothing looked up, nothing deleted, no
    // key file; and the copy's files left as they are, one per chunk.
    let copied = snapshots(&floe).await;
    assert!(copied.len() > 3, "{copied:?}");
    assert!(
        copied.iter().all(|(op, keyed)| op == "append" && !keyed),
        "{copied:?}"
    );
    let files = live(&floe).await;
    assert!(files.deletes.is_empty());
    assert_eq!(files.data.len(), copied.len(), "not compacted");
    assert_eq!(key_files(dir.path()), 0);

    // The stream replaces and deletes rows of the appended chunks.
    client(&conninfo)
        .await
        .batch_execute(
            "UPDATE t SET v = 'changed' WHERE id IN (1, 15000, 30000);
             DELETE FROM t WHERE id = 2;
             INSERT INTO t VALUES (40000, 'new');",
        )
        .await
        .unwrap();
    run_with(&floe, &cfg, &options()).await;
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 30000);
    assert_eq!(values(&rows, "id"), postgres_rows(&conninfo).await);
    assert!(!live(&floe).await.deletes.is_empty(), "position deletes");
    assert!(
        snapshots(&floe)
            .await
            .last()
            .is_some_and(|(_, keyed)| *keyed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_change_ahead_of_the_copy_ends_appending_and_its_chunk_replaces_the_row() {
    let Some((conninfo, cfg)) = small_chunks(
        "floe_app_ahead",
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 30000) g;",
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    // The first chunk (10,000 rows) and one more.
    let mut opts = options();
    opts.max_batches = Some(2);
    let report = run_with(&floe, &cfg, &opts).await;
    assert!(!report.snapshot_done, "{report:?}");
    // Rows ahead of the cursor and behind it change before the copy goes
    // on: the stream writes id 25000's new row, which the chunk that reads
    // 25000 later must replace, not add to.
    client(&conninfo)
        .await
        .batch_execute(
            "UPDATE t SET v = 'ahead' WHERE id = 25000;
             UPDATE t SET v = 'behind' WHERE id = 5;
             DELETE FROM t WHERE id = 26000;
             INSERT INTO t VALUES (99999, 'new');",
        )
        .await
        .unwrap();
    let report = run_with(&floe, &cfg, &options()).await;
    assert!(report.snapshot_done, "{report:?}");
    // A key twice would fail here (iceberg_rows refuses it).
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(values(&rows, "id"), postgres_rows(&conninfo).await);
    assert_eq!(rows["25000"]["v"], "ahead");
    let all = snapshots(&floe).await;
    assert!(all[..2].iter().all(|(_, keyed)| !keyed), "{all:?}");
    // From the stream's change on, chunks look keys up.
    let first_keyed = all.iter().position(|(_, keyed)| *keyed).unwrap();
    assert!(
        all[first_keyed..].iter().all(|(_, keyed)| *keyed),
        "{all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_keys_changed_while_the_copy_runs_end_equal_to_postgres() {
    let Some((conninfo, cfg)) = small_chunks(
        "floe_app_text",
        "CREATE TABLE t (k text PRIMARY KEY, v text);
         INSERT INTO t SELECT 'k' || lpad(g::text, 6, '0'), 'v' || g
           FROM generate_series(1, 20000) g;",
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    // A writer beside the copy: changes inside chunks' windows are matched
    // to the chunk's rows by the key's text, read from the rows themselves.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, db) = (stop.clone(), client(&conninfo).await);
        tokio::spawn(async move {
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            let mut ops = 0;
            while !stop.load(Ordering::Relaxed) || ops < 200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = format!("k{:06}", x % 22_000 + 1);
                let sql = match x % 3 {
                    0 => format!("DELETE FROM t WHERE k = '{key}'"),
                    _ => format!(
                        "INSERT INTO t VALUES ('{key}', 'w{ops}')
                         ON CONFLICT (k) DO UPDATE SET v = excluded.v"
                    ),
                };
                db.batch_execute(&sql).await.unwrap();
                ops += 1;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
    };
    let report = run_with(&floe, &cfg, &options()).await;
    assert!(report.snapshot_done, "{report:?}");
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    run_with(&floe, &cfg, &options()).await;
    let rows = iceberg_rows_by(&floe, "k").await;
    let want: BTreeMap<String, String> = client(&conninfo)
        .await
        .query("SELECT k, v FROM t", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, want);
}

/// `raw.t`'s rows by the text key `key`: key → v; a key twice fails.
async fn iceberg_rows_by(floe: &Embedded, key: &str) -> BTreeMap<String, String> {
    let ident = floe_core::ident::parse_table("raw.t").unwrap();
    let mut rows = BTreeMap::new();
    for batch in floe_test_support::scan(floe.catalog().as_ref(), &ident).await {
        let keys = batch.column_by_name(key).unwrap();
        let keys = arrow_array::cast::AsArray::as_string::<i32>(keys);
        let v = batch.column_by_name("v").unwrap();
        let v = arrow_array::cast::AsArray::as_string::<i32>(v);
        for i in 0..batch.num_rows() {
            let k = keys.value(i).to_string();
            assert!(
                rows.insert(k.clone(), v.value(i).to_string()).is_none(),
                "{k} twice"
            );
        }
    }
    rows
}
