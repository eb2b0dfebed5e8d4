//! Keyed tables: thousands of random upserts and deletes over a few hundred
//! keys, written by several writers, committed with faults and redelivery,
//! read through iceberg-rust's scan (which applies equality deletes) and
//! compared with a model of the source.

use std::collections::BTreeMap;
use std::io::Cursor;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::ident::parse_table;
use floe_core::source::SourceKind;
use floe_core::tabledef;
use floe_test_support::{scan, services};
use iceberg::spec::FormatVersion;

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"},
  {"id":3,"name":"n","required":false,"type":"long"}]}"#;

type Model = BTreeMap<i64, (String, i64)>;

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Events for `partitions` ordered sources; key k always lives in partition k % partitions.
fn events(seed: u64, n: usize, keys: i64, partitions: usize) -> (Vec<String>, Model) {
    let mut rng = Rng(seed);
    let mut model = Model::new();
    let mut lines = vec![String::new(); partitions];
    for i in 0..n {
        let id = (rng.next() % keys as u64) as i64;
        let line = if rng.next().is_multiple_of(4) {
            model.remove(&id);
            format!("{{\"_op\":\"d\",\"id\":{id}}}\n")
        } else {
            let v = format!("v{i}");
            let num = (rng.next() % 1000) as i64;
            model.insert(id, (v.clone(), num));
            let op = if rng.next().is_multiple_of(2) {
                "c"
            } else {
                "u"
            };
            format!("{{\"_op\":\"{op}\",\"id\":{id},\"v\":\"{v}\",\"n\":{num}}}\n")
        };
        lines[(id as usize) % partitions].push_str(&line);
    }
    (lines, model)
}

fn inputs(lines: &[String]) -> Vec<Input> {
    lines
        .iter()
        .enumerate()
        .map(|(p, text)| Input {
            source: format!("kafka:cdc/{p}"),
            kind: SourceKind::Kafka,
            reader: Box::new(Cursor::new(text.clone().into_bytes())),
            path: None,
        })
        .collect()
}

async fn create(dir: &std::path::Path) {
    create_with(dir, Default::default()).await;
}

async fn create_with(dir: &std::path::Path, properties: std::collections::HashMap<String, String>) {
    let floe = Embedded::open(dir, Faults::none()).unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    floe.create_table(
        &parse_table("silver.kv").unwrap(),
        tabledef::creation("kv", schema, Default::default(), properties),
    )
    .await
    .unwrap();
}

fn copy_on_write() -> std::collections::HashMap<String, String> {
    [("write.update.mode".to_string(), "copy-on-write".to_string())].into()
}

/// The current snapshot's summary.
async fn summary(floe: &Embedded) -> std::collections::HashMap<String, String> {
    let t = floe
        .catalog()
        .load_table(&parse_table("silver.kv").unwrap())
        .await
        .unwrap();
    t.metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties
        .clone()
}

async fn table_state(floe: &Embedded) -> Model {
    let batches = scan(floe.catalog().as_ref(), &parse_table("silver.kv").unwrap()).await;
    let mut state = Model::new();
    for b in batches {
        let id = b
            .column_by_name("id")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        let v = b.column_by_name("v").unwrap().as_string::<i32>().clone();
        let n = b
            .column_by_name("n")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            let prev = state.insert(id.value(i), (v.value(i).to_string(), n.value(i)));
            assert!(prev.is_none(), "key {} appears twice", id.value(i));
            assert!(v.is_valid(i) && n.is_valid(i));
        }
    }
    state
}

/// The table as DuckDB and pyiceberg (independent readers; pyiceberg reads
/// only tables without equality deletes) read it: both must hold the model's
/// `id → v` exactly.
fn readers_see(dir: &std::path::Path, table: &str, model: &Model) {
    let (ns, name) = table.split_once('.').unwrap();
    let meta = dir.join(ns).join(name).join("metadata");
    let mut versions: Vec<_> = std::fs::read_dir(&meta)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .collect();
    versions.sort();
    let metadata = versions.last().unwrap().display().to_string();
    let list = dir.join("readers.json");
    std::fs::write(&list, serde_json::to_vec(&[&metadata]).unwrap()).unwrap();
    let read = services::python_json("shared/tests/read_tables.py", &[list.to_str().unwrap()]);
    let want: Vec<(i64, String)> = model.iter().map(|(k, (v, _))| (*k, v.clone())).collect();
    for reader in ["duckdb", "pyiceberg"] {
        let rows = &read[metadata.as_str()][reader];
        assert!(!rows.is_null(), "{reader} could not read the table");
        let mut got: Vec<(i64, String)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_string()))
            .collect();
        got.sort();
        assert_eq!(got, want, "{reader}");
    }
}

fn options(batch: u64) -> IngestOptions {
    IngestOptions {
        writers: 4,
        batch_records: batch,
        commit_window: std::time::Duration::from_millis(20),
        ..IngestOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_changes_by_several_writers_equal_the_model() {
    let dir = tempfile::tempdir().unwrap();
    create(dir.path()).await;
    let (lines, model) = events(7, 4000, 300, 4);
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    let t = parse_table("silver.kv").unwrap();
    let r = floe
        .ingest(Some(&t), inputs(&lines), &options(100))
        .await
        .unwrap();
    assert!(
        r.rejected.is_empty(),
        "{:?}",
        &r.rejected[..r.rejected.len().min(3)]
    );
    assert!(r.requests >= 40);
    assert_eq!(table_state(&floe).await, model);
    // Position deletes: pyiceberg reads the table as well as DuckDB.
    readers_see(dir.path(), "silver.kv", &model);
    let s = summary(&floe).await;
    assert_eq!(s["total-equality-deletes"], "0", "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_at_every_step_with_redelivery_still_equal_the_model() {
    for point in FaultPoint::ALL {
        let dir = tempfile::tempdir().unwrap();
        create(dir.path()).await;
        let (lines, model) = events(11, 1500, 150, 3);
        let t = parse_table("silver.kv").unwrap();
        let nth = match point {
            FaultPoint::AfterUpload | FaultPoint::AfterEnqueue => 4,
            _ => 2,
        };
        let faulty = Embedded::open(dir.path(), Faults::at(point, FaultMode::Error, nth)).unwrap();
        let _ = faulty.ingest(Some(&t), inputs(&lines), &options(50)).await;
        // The source redelivers everything; what landed is recognised.
        let clean = Embedded::open(dir.path(), Faults::none()).unwrap();
        clean
            .ingest(Some(&t), inputs(&lines), &options(50))
            .await
            .unwrap();
        assert_eq!(table_state(&clean).await, model, "after a fault at {point}");
        readers_see(dir.path(), "silver.kv", &model);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_touching_one_key_in_one_commit_keep_the_later_value() {
    // Position deletes: every request of the commit in ONE snapshot;
    // equality deletes: one snapshot per request, in order.
    for (properties, snapshots) in [
        (std::collections::HashMap::new(), 1),
        (
            [("floe.keyed.deletes".to_string(), "equality".to_string())].into(),
            4,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        create_with(dir.path(), properties).await;
        let t = parse_table("silver.kv").unwrap();
        let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
        let text = "{\"id\":1,\"v\":\"old\",\"n\":1}\n{\"id\":2,\"v\":\"keep\",\"n\":2}\n{\"id\":1,\"v\":\"new\",\"n\":3}\n{\"_op\":\"d\",\"id\":2}\n";
        let input = Input {
            source: "kafka:cdc/0".into(),
            kind: SourceKind::Kafka,
            reader: Box::new(Cursor::new(text.as_bytes().to_vec())),
            path: None,
        };
        // One record per batch, all gathered into one commit by the window.
        let opts = IngestOptions {
            writers: 1,
            batch_records: 1,
            commit_window: std::time::Duration::from_secs(2),
            ..IngestOptions::default()
        };
        let r = floe.ingest(Some(&t), vec![input], &opts).await.unwrap();
        assert_eq!(r.requests, 4);
        assert_eq!(r.commits, 1, "one catalog commit");
        assert_eq!(r.snapshots, snapshots, "{r:?}");
        let state = table_state(&floe).await;
        assert_eq!(state, Model::from([(1, ("new".to_string(), 3))]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_changes_partition_moves() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    let schema = tabledef::parse_schema(
        r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
          {"id":1,"name":"id","required":true,"type":"long"},
          {"id":2,"name":"v","required":false,"type":"string"},
          {"id":3,"name":"region","required":false,"type":"string"},
          {"id":4,"name":"n","required":false,"type":"long"}]}"#,
    )
    .unwrap();
    let t = parse_table("silver.kv").unwrap();
    let spec =
        tabledef::parse_partition(&schema, &["region".into(), "bucket(4, id)".into()]).unwrap();
    floe.create_table(
        &t,
        tabledef::creation("kv", schema, spec, Default::default()),
    )
    .await
    .unwrap();
    let run = |text: &'static str| Input {
        source: "kafka:cdc/0".into(),
        kind: SourceKind::Kafka,
        reader: Box::new(Cursor::new(text.as_bytes().to_vec())),
        path: None,
    };
    floe.ingest(
        Some(&t),
        vec![run("{\"id\":1,\"v\":\"a\",\"region\":\"eu\",\"n\":1}\n{\"id\":2,\"v\":\"b\",\"region\":\"us\",\"n\":2}\n")],
        &options(10),
    )
    .await
    .unwrap();
    // Lines 3 and 4 of the same stream: id 1 moves to us, id 2 to ap.
    floe.ingest(
        Some(&t),
        vec![run("{\"id\":1,\"v\":\"a\",\"region\":\"eu\",\"n\":1}\n{\"id\":2,\"v\":\"b\",\"region\":\"us\",\"n\":2}\n{\"_op\":\"u\",\"id\":1,\"v\":\"a2\",\"region\":\"us\",\"n\":3}\n{\"_op\":\"u\",\"id\":2,\"v\":\"b2\",\"region\":\"ap\",\"n\":4}\n")],
        &options(10),
    )
    .await
    .unwrap();
    let model = Model::from([(1, ("a2".to_string(), 3)), (2, ("b2".to_string(), 4))]);
    assert_eq!(table_state(&floe).await, model);
    readers_see(dir.path(), "silver.kv", &model);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_runs_are_sources_of_their_own_but_a_stream_position_commits_once() {
    let dir = tempfile::tempdir().unwrap();
    create(dir.path()).await;
    let t = parse_table("silver.kv").unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    let input = |kind: SourceKind, source: &str, text: &str| Input {
        source: source.into(),
        kind,
        reader: Box::new(Cursor::new(text.as_bytes().to_vec())),
        path: None,
    };
    let opts = options(10);
    // Two runs of stdin: line numbers restart, and the second run still applies.
    let first = "{\"id\":2,\"v\":\"x\",\"n\":0}\n";
    floe.ingest(
        Some(&t),
        vec![input(SourceKind::File, "stdin", first)],
        &opts,
    )
    .await
    .unwrap();
    let second = "{\"id\":1,\"v\":\"a\",\"n\":1}\n{\"_op\":\"u\",\"id\":1,\"v\":\"b\",\"n\":2}\n{\"_op\":\"d\",\"id\":2}\n";
    let r = floe
        .ingest(
            Some(&t),
            vec![input(SourceKind::File, "stdin", second)],
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(r.commits, 1);
    assert_eq!(
        table_state(&floe).await,
        Model::from([(1, ("b".to_string(), 2))])
    );

    // A stream's batch whose positions the table already holds commits nothing.
    let later = "{\"id\":5,\"v\":\"new\",\"n\":5}\n{\"id\":5,\"v\":\"newer\",\"n\":6}\n";
    floe.ingest(
        Some(&t),
        vec![input(SourceKind::Kafka, "kafka:cdc/0", later)],
        &opts,
    )
    .await
    .unwrap();
    let stale = "{\"id\":5,\"v\":\"old\",\"n\":4}\n";
    let r = floe
        .ingest(
            Some(&t),
            vec![input(SourceKind::Kafka, "kafka:cdc/0", stale)],
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(
        r.commits, 0,
        "positions already committed are not committed again"
    );
    assert_eq!(r.duplicates, 1);
    assert_eq!(
        table_state(&floe).await,
        Model::from([(1, ("b".to_string(), 2)), (5, ("newer".to_string(), 6))])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_on_write_tables_equal_the_model_with_no_delete_files() {
    let dir = tempfile::tempdir().unwrap();
    create_with(dir.path(), copy_on_write()).await;
    let (lines, model) = events(5, 3000, 200, 3);
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    let t = parse_table("silver.kv").unwrap();
    let r = floe
        .ingest(Some(&t), inputs(&lines), &options(100))
        .await
        .unwrap();
    assert!(r.rejected.is_empty());
    assert_eq!(table_state(&floe).await, model);
    let s = summary(&floe).await;
    assert_eq!(s["total-delete-files"], "0");
    assert_eq!(s["total-records"], model.len().to_string());
    let rewritten: u64 = s["floe.cow.rows-rewritten"].parse().unwrap();
    let changed: u64 = s["floe.cow.rows-changed"].parse().unwrap();
    assert!(changed > 0 && rewritten > 0, "{s:?}");
    assert!(s.contains_key("floe.cow.write-amplification"));
    // Rewritten files replace their originals: the live files hold exactly the rows.
    let files: u64 = s["total-data-files"].parse().unwrap();
    assert!(files >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_on_write_with_faults_and_redelivery_equals_the_model() {
    for point in FaultPoint::ALL {
        let dir = tempfile::tempdir().unwrap();
        create_with(dir.path(), copy_on_write()).await;
        let (lines, model) = events(13, 900, 90, 3);
        let t = parse_table("silver.kv").unwrap();
        let faulty = Embedded::open(dir.path(), Faults::at(point, FaultMode::Error, 2)).unwrap();
        let _ = faulty.ingest(Some(&t), inputs(&lines), &options(50)).await;
        let clean = Embedded::open(dir.path(), Faults::none()).unwrap();
        clean
            .ingest(Some(&t), inputs(&lines), &options(50))
            .await
            .unwrap();
        assert_eq!(table_state(&clean).await, model, "after a fault at {point}");
        assert_eq!(summary(&clean).await["total-delete-files"], "0");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_empties_the_table_in_order_for_both_strategies() {
    for cow in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        create_with(
            dir.path(),
            if cow {
                copy_on_write()
            } else {
                Default::default()
            },
        )
        .await;
        let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
        let t = parse_table("silver.kv").unwrap();
        let input = |text: &str| Input {
            source: "kafka:cdc/0".into(),
            kind: SourceKind::Kafka,
            reader: Box::new(Cursor::new(text.as_bytes().to_vec())),
            path: None,
        };
        // Two batches of one stream: rows, then a truncate and a row after it.
        let text = "{\"id\":1,\"v\":\"a\",\"n\":1}\n{\"id\":2,\"v\":\"b\",\"n\":2}\n\
                    {\"_op\":\"truncate\"}\n{\"id\":3,\"v\":\"c\",\"n\":3}\n";
        let opts = IngestOptions {
            writers: 1,
            ..options(2)
        };
        let r = floe
            .ingest(Some(&t), vec![input(text)], &opts)
            .await
            .unwrap();
        assert_eq!(r.requests, 2);
        assert_eq!(
            table_state(&floe).await,
            Model::from([(3, ("c".to_string(), 3))]),
            "copy-on-write: {cow}"
        );
        let s = summary(&floe).await;
        assert_eq!(s["total-records"], "1", "copy-on-write: {cow}: {s:?}");
        // Copy-on-write leaves no delete files; with position deletes the
        // truncate removes every earlier file, so none is needed either.
        assert_eq!(s["total-delete-files"], "0", "copy-on-write: {cow}: {s:?}");
    }
}

/// Upserts of `keys`, each with the value `v`, from a source of its own
/// (so none is a redelivery of another).
fn changes(v: &str, keys: std::ops::Range<i64>) -> Vec<Input> {
    let text: String = keys
        .map(|id| format!("{{\"id\":{id},\"v\":\"{v}\",\"n\":{id}}}\n"))
        .collect();
    vec![Input {
        source: format!("kafka:cdc/{v}"),
        kind: SourceKind::Kafka,
        reader: Box::new(Cursor::new(text.into_bytes())),
        path: None,
    }]
}

/// A commit deletes each row its changes replace once, never a row an
/// earlier commit deleted: the suite runs this again with
/// `FLOE_KEY_CACHE_MB=0`, where a committer keeps no file's rows between
/// commits and reads the deletes again for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_deletes_only_live_rows_whatever_the_committer_keeps() {
    let dir = tempfile::tempdir().unwrap();
    create(dir.path()).await;
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    let t = parse_table("silver.kv").unwrap();
    let opts = IngestOptions {
        writers: 1,
        ..options(5000)
    };
    for (v, keys) in [("a", 0..2000), ("b", 0..1500), ("d", 1999..2000)] {
        floe.ingest(Some(&t), changes(v, keys), &opts)
            .await
            .unwrap();
    }
    // 2000 live rows in three files, 1501 dead ones among them.
    floe.ingest(Some(&t), changes("c", 0..2000), &opts)
        .await
        .unwrap();
    let s = summary(&floe).await;
    assert_eq!(s["floe.pos.rows-deleted"], "2000", "{s:?}");
    let want: Model = (0..2000).map(|id| (id, ("c".to_string(), id))).collect();
    assert_eq!(table_state(&floe).await, want);
}

/// A committer remembers which rows the table's deletes removed, and keeps
/// only live rows' keys; another engine's rollback takes deletes back, and
/// the rows they removed are live again: the next change to those keys must
/// find them, on v2 (position-delete files) and v3 (deletion vectors), as
/// DuckDB and pyiceberg read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_committer_finds_rows_a_rollback_made_live_again() {
    for version in [FormatVersion::V2, FormatVersion::V3] {
        let dir = tempfile::tempdir().unwrap();
        let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
        let t = parse_table("silver.kv").unwrap();
        let schema = tabledef::parse_schema(SCHEMA).unwrap();
        let mut creation = tabledef::creation("kv", schema, Default::default(), Default::default());
        creation.format_version = version;
        floe.create_table(&t, creation).await.unwrap();
        let opts = IngestOptions {
            writers: 1,
            ..options(5000)
        };
        floe.ingest(Some(&t), changes("a", 0..2000), &opts)
            .await
            .unwrap();
        let catalog = floe.catalog();
        let first = catalog.load_table(&t).await.unwrap();
        let first = first.metadata.current_snapshot_id().unwrap();
        // Three quarters of the first file's rows die; the next commit reads
        // that delete and keeps only the live rows' keys.
        floe.ingest(Some(&t), changes("b", 0..1500), &opts)
            .await
            .unwrap();
        floe.ingest(Some(&t), changes("d", 1999..2000), &opts)
            .await
            .unwrap();
        floe_test_support::harness::roll_back(catalog.as_ref(), &t, first).await;
        floe.ingest(Some(&t), changes("c", 0..2000), &opts)
            .await
            .unwrap();
        // A row the rollback made live again and the change did not find
        // reads as its key held twice.
        let want: Model = (0..2000).map(|id| (id, ("c".to_string(), id))).collect();
        readers_see(dir.path(), "silver.kv", &want);
    }
}
