//! `floe maintain` beside another engine, through the real binary, with
//! pyiceberg on the same SQLite catalog: a tag and a write-audit-publish
//! branch on a floe table keep their snapshots, rows and files through
//! compaction, expiry at age 0 and orphan cleanup; a table pyiceberg created
//! is left alone unless named.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{EVENT_SCHEMA, Warehouse, events, ids};
use serde_json::Value;

/// Runs `refs.py` (pyiceberg) on `table`.
fn pyiceberg(wh: &Warehouse, table: &str, mode: &str) -> Value {
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/refs.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(wh.path())
        .args([table, mode])
        .output()
        .unwrap_or_else(|e| {
            panic!("running {python}: {e}; ./local-dev/test.sh installs pyiceberg")
        });
    assert!(
        out.status.success(),
        "refs.py {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("refs.py JSON")
}

/// Makes every file under `dir` look `age` old, so orphan cleanup with its
/// default window would take any file it does not know to be referenced.
fn age_files(dir: &Path, age: Duration) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            age_files(&path, age);
        } else {
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
        }
    }
}

/// `floe maintain … --json`: one report per maintained table.
fn maintain(wh: &Warehouse, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["maintain", "--json"];
    all.extend(args);
    wh.floe(&all)
        .lines()
        .map(|l| serde_json::from_str(l).expect("maintain report JSON"))
        .collect()
}

fn local(uri: &str) -> &Path {
    Path::new(uri.strip_prefix("file://").unwrap_or(uri))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_tag_and_a_branch_keep_their_snapshots_and_files_through_maintenance() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    wh.ingest("t.a", &[&wh.file("a.ndjson", &events(0..3))], &[]);
    wh.ingest("t.a", &[&wh.file("b.ndjson", &events(3..5))], &[]);
    let marked = pyiceberg(&wh, "t.a", "mark");
    wh.ingest("t.a", &[&wh.file("c.ndjson", &events(5..8))], &[]);
    let before = pyiceberg(&wh, "t.a", "read");
    assert_eq!(
        before["wap"]["ids"],
        serde_json::json!([0, 1, 2, 3, 4, 100, 101])
    );
    let branch_files = strings(&before["wap"]["files"]);
    let tag_files = strings(&before["tag"]["files"]);
    age_files(wh.path(), Duration::from_secs(20 * 24 * 3600));

    // No table named: every table floe writes, this one included.
    let reports = maintain(&wh, &["--max-snapshot-age-ms", "0"]);
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r["table"], "t.a");
    assert!(r["compacted_files"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["expired_snapshots"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["expired_refs"], serde_json::json!([]), "{r}");
    assert_eq!(
        r["orphans"],
        serde_json::json!([]),
        "nothing a ref reaches is an orphan: {r}"
    );
    let deleted = strings(&r["deleted_files"]);
    for f in branch_files.iter().chain(&tag_files) {
        assert!(!deleted.contains(f), "{f} deleted: {deleted:?}");
        assert!(local(f).exists(), "{f} is gone");
    }

    let after = pyiceberg(&wh, "t.a", "read");
    let refs = &after["refs"];
    assert_eq!(refs["audit-2024"]["snapshot"], marked["tag"], "{after}");
    assert_eq!(refs["audit-2024"]["type"], "tag");
    assert_eq!(refs["wap"]["snapshot"], marked["wap"], "{after}");
    assert_eq!(refs["wap"]["type"], "branch");
    assert_eq!(
        after["wap"]["ids"],
        serde_json::json!([0, 1, 2, 3, 4, 100, 101])
    );
    assert_eq!(after["tag"]["ids"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(
        after["main"]["ids"],
        serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7])
    );
    // main, the tag's and the branch's: the rest expired.
    assert_eq!(after["snapshots"], 3, "{after}");
    assert_eq!(ids(&wh.read("t.a", None)), (0..8).collect::<Vec<_>>());
}

#[test]
fn a_table_another_engine_created_is_maintained_only_when_named() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    wh.ingest("t.a", &[&wh.file("a.ndjson", &events(0..3))], &[]);
    wh.ingest("t.a", &[&wh.file("b.ndjson", &events(3..5))], &[]);
    let foreign = pyiceberg(&wh, "other.p", "foreign");
    assert_eq!(foreign["snapshots"], 3, "{foreign}");
    let files = strings(&foreign["files"]);
    age_files(wh.path(), Duration::from_secs(20 * 24 * 3600));

    let out = wh.floe_env(&["maintain", "--json", "--max-snapshot-age-ms", "0"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tables: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["table"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(tables, ["t.a"], "only floe's table: {stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("other.p: written by another engine; skipped"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let untouched = pyiceberg(&wh, "other.p", "read_foreign");
    assert_eq!(untouched["snapshots"], 3, "{untouched}");
    assert_eq!(strings(&untouched["files"]), files);
    assert!(files.iter().all(|f| local(f).exists()));

    // Named, it is maintained like any other.
    let reports = maintain(&wh, &["other.p", "--max-snapshot-age-ms", "0"]);
    assert_eq!(reports[0]["table"], "other.p");
    // Its three snapshots; the compaction's is the one left.
    assert_eq!(reports[0]["expired_snapshots"], 3, "{:?}", reports[0]);
    let maintained = pyiceberg(&wh, "other.p", "read_foreign");
    assert_eq!(maintained["snapshots"], 1, "{maintained}");
    assert_eq!(maintained["ids"], serde_json::json!([0, 1, 2]));
}

#[test]
fn a_local_orphan_window_is_the_users_and_the_default_keeps_16_days() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    wh.ingest("t.a", &[&wh.file("a.ndjson", &events(0..3))], &[]);
    let data = wh.path().join("t/a/data");
    let stray = data.join("crashed-writer-00000.parquet");
    std::fs::write(&stray, b"PAR1 not committed").unwrap();
    age_files(wh.path(), Duration::from_secs(4 * 24 * 3600));
    // The default window keeps a 4-day-old stray file.
    let reports = maintain(&wh, &["t.a"]);
    assert_eq!(
        reports[0]["orphans"],
        serde_json::json!([]),
        "{:?}",
        reports[0]
    );
    assert!(stray.exists());
    // No commit queue here, so no queue retention bounds the window (with
    // one, tests/deploy.rs): 3 days removes it.
    let r = &maintain(&wh, &["t.a", "--orphan-window-ms", "259200000"])[0];
    assert_eq!(strings(&r["orphans"]).len(), 1, "{r}");
    assert!(!stray.exists());
    assert_eq!(wh.read("t.a", Some("id"))["count"], 3);
}

#[test]
fn a_tag_past_its_max_ref_age_is_removed_and_main_is_not() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    wh.ingest("t.a", &[&wh.file("a.ndjson", &events(0..3))], &[]);
    let marked = pyiceberg(&wh, "t.a", "mark_short");
    wh.ingest("t.a", &[&wh.file("b.ndjson", &events(3..5))], &[]);
    std::thread::sleep(Duration::from_millis(10));
    let r = &maintain(&wh, &["t.a", "--max-snapshot-age-ms", "0"])[0];
    assert_eq!(r["expired_refs"], serde_json::json!(["short-lived"]), "{r}");
    let after = pyiceberg(&wh, "t.a", "read");
    let mut refs: Vec<&String> = after["refs"].as_object().unwrap().keys().collect();
    // serde_json keeps the reader's key order when a dependency asks it to.
    refs.sort();
    assert_eq!(refs, ["kept", "main"], "{after}");
    assert_eq!(after["refs"]["kept"]["snapshot"], marked["tag"]);
    assert_eq!(after["main"]["ids"], serde_json::json!([0, 1, 2, 3, 4]));
}

/// iceberg-rust's reader cannot fill a list or map column that a file
/// predates with nulls, and compaction read old files through it: a table
/// that floe's own evolution gave a list column (and a struct holding a
/// map's worth of keys) was never compacted again. Every row reads back.
#[test]
fn a_table_that_gained_a_list_column_is_compacted_with_every_row() {
    let wh = Warehouse::new();
    let schema = r#"{"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"id","required":true,"type":"long"}]}"#;
    wh.create_table("raw.tags", schema, &[]);
    let old = wh.file("old.ndjson", "{\"id\":1}\n{\"id\":2}\n");
    wh.ingest("raw.tags", &[&old], &[]);
    let new = wh.file(
        "new.ndjson",
        "{\"id\":3,\"tags\":[7,8],\"who\":{\"names\":[\"a\"]}}\n{\"id\":4,\"tags\":[]}\n",
    );
    wh.ingest("raw.tags", &[&new], &[]);

    let reports = maintain(&wh, &["raw.tags"]);
    let r = &reports[0];
    assert_eq!(r["compacted_files"].as_u64(), Some(2), "{r}");
    assert_eq!(r["after"]["data_files"].as_u64(), Some(1), "{r}");

    let table = wh.read("raw.tags", Some("id"));
    let rows = table["rows"].as_array().unwrap();
    let got: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        got,
        [
            r#"{"id":1,"tags":null,"who":null}"#,
            r#"{"id":2,"tags":null,"who":null}"#,
            r#"{"id":3,"tags":[7,8],"who":{"names":["a"]}}"#,
            r#"{"id":4,"tags":[],"who":null}"#,
        ]
    );
}
