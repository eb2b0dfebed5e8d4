//! Exactly once through the real `floe` binary, on the paths a user takes:
//! the same input again with other batch boundaries, again after snapshot
//! expiry and compaction, a keyed update with one bad value, one key spelt
//! two ways. Tables are read back by pyiceberg and DuckDB.

mod common;

use std::path::Path;

use common::{EVENT_SCHEMA, Warehouse, events, ids};
use serde_json::Value;

const KV_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"},
  {"id":3,"name":"n","required":false,"type":"long"}]}"#;

const SKV_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"string"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

/// The table's rows as DuckDB (equality deletes applied) and pyiceberg (when
/// the table has none) read them from its current metadata file.
fn independent(wh: &Warehouse, table: &str) -> Value {
    let (ns, name) = table.split_once('.').unwrap();
    let dir = wh.path().join(ns).join(name).join("metadata");
    let mut versions: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .collect();
    versions.sort();
    let metadata = versions
        .last()
        .expect("a metadata file")
        .display()
        .to_string();
    let list = wh.file("tables.json", &serde_json::to_string(&[&metadata]).unwrap());
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tests/read_tables.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&list)
        .output()
        .expect("run the readers (./local-dev/test.sh installs them)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all[metadata.as_str()].clone()
}

/// `[[id, v], …]` sorted.
fn sorted(rows: &Value) -> Vec<(Value, Value)> {
    let mut out: Vec<(Value, Value)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    out.sort_by_key(|(a, b)| format!("{a}{b}"));
    out
}

#[test]
fn the_same_file_with_other_batch_boundaries_commits_each_line_once() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    let f = wh.file("four.ndjson", &events(0..4));
    let first = wh.ingest("t.a", &[&f], &["--batch-size", "2"]);
    assert_eq!(first["records_committed"], 4);
    let again = wh.ingest("t.a", &[&f], &["--batch-size", "4"]);
    assert_eq!(again["records_committed"], 0, "{again}");
    let odd = wh.ingest("t.a", &[&f], &["--batch-size", "3"]);
    assert_eq!(odd["records_committed"], 0, "{odd}");
    let table = wh.read("t.a", None);
    assert_eq!(ids(&table), (0..4).collect::<Vec<_>>());
}

#[test]
fn a_file_that_grew_at_its_end_commits_only_its_new_lines() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    // A file is named by its path and first 64 KiB, so a log that grows keeps
    // its name; one replaced by other content is another source.
    let log = wh.file("app.log", &events(0..1000));
    wh.ingest("t.a", &[&log], &["--batch-size", "300"]);
    let log = wh.file("app.log", &events(0..1200));
    let more = wh.ingest("t.a", &[&log], &["--batch-size", "500"]);
    assert_eq!(more["records_committed"], 200, "{more}");
    let replaced = wh.file("app.log", &events(5000..5003));
    let other = wh.ingest("t.a", &[&replaced], &[]);
    assert_eq!(other["records_committed"], 3, "{other}");
    let table = wh.read("t.a", None);
    let mut want: Vec<u64> = (0..1200).collect();
    want.extend(5000..5003);
    assert_eq!(ids(&table), want);
}

#[test]
fn a_rerun_after_expiry_and_compaction_commits_nothing_twice() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    let a = wh.file("a.ndjson", &events(0..3));
    let b = wh.file("b.ndjson", &events(3..5));
    wh.ingest("t.a", &[&a], &[]);
    wh.ingest("t.a", &[&b], &[]);
    assert_eq!(wh.ingest("t.a", &[&a], &[])["records_committed"], 0);
    wh.floe(&["maintain", "t.a", "--max-snapshot-age-ms", "0"]);
    let table = wh.read("t.a", None);
    assert_eq!(table["snapshots"], 1, "expiry left one snapshot");
    let again = wh.ingest("t.a", &[&a], &["--batch-size", "2"]);
    assert_eq!(again["records_committed"], 0, "{again}");
    let table = wh.read("t.a", None);
    assert_eq!(ids(&table), (0..5).collect::<Vec<_>>());
    let both = independent(&wh, "t.a");
    assert_eq!(both["duckdb"].as_array().unwrap().len(), 5, "{both}");
}

#[test]
fn an_update_with_a_bad_value_keeps_the_last_good_row() {
    let wh = Warehouse::new();
    wh.create_table("t.kv", KV_SCHEMA, &[]);
    let first = wh.file(
        "first.ndjson",
        "{\"id\":1,\"v\":\"a1\",\"n\":1}\n{\"id\":2,\"v\":\"b1\",\"n\":2}\n",
    );
    wh.ingest("t.kv", &[&first], &[]);
    // One bad update, alone; then one batch where a good update of id 2
    // comes before a bad one.
    let bad = wh.file(
        "bad.ndjson",
        "{\"_op\":\"u\",\"id\":1,\"v\":\"a2\",\"n\":\"oops\"}\n",
    );
    let r = wh.ingest("t.kv", &[&bad], &[]);
    assert_eq!(r["rejected"], 1, "{r}");
    let mixed = wh.file(
        "mixed.ndjson",
        "{\"_op\":\"u\",\"id\":2,\"v\":\"b2\",\"n\":3}\n{\"_op\":\"u\",\"id\":2,\"v\":\"b3\",\"n\":\"oops\"}\n",
    );
    let r = wh.ingest("t.kv", &[&mixed], &[]);
    assert_eq!(r["rejected"], 1, "{r}");
    let rejected = &r["rejected_records"][0];
    assert_eq!(rejected["field"], "n", "{rejected}");
    let rows = independent(&wh, "t.kv");
    assert_eq!(
        sorted(&rows["duckdb"]),
        vec![
            (Value::from(1), Value::from("a1")),
            (Value::from(2), Value::from("b2"))
        ],
        "{rows}"
    );
}

#[test]
fn one_key_spelt_two_ways_is_one_row() {
    let wh = Warehouse::new();
    wh.create_table(
        "t.s",
        SKV_SCHEMA,
        &["--property", "write.update.mode=copy-on-write"],
    );
    let f = wh.file(
        "keys.ndjson",
        "{\"id\":\"A\",\"v\":\"first\"}\n{\"id\":\"\\u0041\",\"v\":\"second\"}\n",
    );
    wh.ingest("t.s", &[&f], &[]);
    wh.create_table("t.n", KV_SCHEMA, &[]);
    let f = wh.file(
        "zeros.ndjson",
        "{\"id\":0,\"v\":\"plus\"}\n{\"id\":-0,\"v\":\"minus\"}\n",
    );
    wh.ingest("t.n", &[&f], &[]);
    wh.floe(&["maintain", "t.n", "--max-snapshot-age-ms", "0"]);
    let strings = independent(&wh, "t.s");
    assert_eq!(
        sorted(&strings["pyiceberg"]),
        vec![(Value::from("A"), Value::from("second"))],
        "{strings}"
    );
    let longs = independent(&wh, "t.n");
    assert_eq!(
        sorted(&longs["pyiceberg"]),
        vec![(Value::from(0), Value::from("minus"))],
        "compaction keeps one row: {longs}"
    );
}
