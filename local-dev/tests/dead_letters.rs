//! Dead letters through the real `floe` binary: they keep each record's
//! exact bytes, and a replay into a keyed table is applied in the records'
//! original source order, exactly once. Tables are read back by pyiceberg.

mod common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::Warehouse;
use serde_json::{Value, json};

const KV_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"n","required":false,"type":"int"}]}"#;

const TEXT_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"s","required":false,"type":"string"}]}"#;

/// Every dead-letter file under the warehouse's dead-letter location.
fn dead_letter_files(wh: &Warehouse) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "ndjson") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&wh.path().join("_floe/dlq"), &mut out);
    out.sort();
    out
}

fn rows(wh: &Warehouse, table: &str) -> Vec<Value> {
    wh.read(table, Some("id"))["rows"]
        .as_array()
        .expect("rows")
        .clone()
}

fn json_out(wh: &Warehouse, args: &[&str]) -> Value {
    wh.report(args)
}

#[test]
fn a_keyed_replay_keeps_the_newer_changes_of_its_source_and_commits_once() {
    let wh = Warehouse::new();
    let config = wh.file("floe.toml", "[tables.\"t.kv\"]\nwiden_types = false\n");
    let cfg = config.to_str().unwrap();
    wh.create_table(
        "t.kv",
        KV_SCHEMA,
        &["--property", "floe.ledger.seal-entries=4"],
    );
    // One change per batch: line 1 does not fit the int column and is
    // dead-lettered; line 2, a later change of the same key, commits; key
    // 2's only change is dead-lettered.
    let f = wh.file(
        "changes.ndjson",
        "{\"id\":1,\"n\":3000000000}\n{\"id\":1,\"n\":7}\n{\"id\":2,\"n\":4000000000}\n",
    );
    let f = f.to_str().unwrap();
    let r = json_out(
        &wh,
        &[
            "--config",
            cfg,
            "ingest",
            "t.kv",
            f,
            "--batch-size",
            "1",
            "--json",
        ],
    );
    assert_eq!(r["rejected"], 2, "{r}");
    assert_eq!(rows(&wh, "t.kv"), vec![json!({"id": 1, "n": 7})]);

    // Other changes meanwhile, so the ledger seals what the replay needs.
    let other: String = (10..16)
        .map(|i| format!("{{\"id\":{i},\"n\":{i}}}\n"))
        .collect();
    let other = wh.file("other.ndjson", &other);
    let other = other.to_str().unwrap();
    wh.floe(&["ingest", "t.kv", other, "--batch-size", "1"]);
    wh.floe(&["table", "alter", "t.kv", "--widen", "n=long"]);
    let saved: Vec<(PathBuf, Vec<u8>)> = dead_letter_files(&wh)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert_eq!(saved.len(), 2);
    // The replay runs three hours later, far past any look-back window.
    let later = [("FLOE_CLOCK_SHIFT_MS", "10800000")];
    let replay = wh.floe_env(&["dlq", "replay", "--table", "t.kv", "--json"], &later);
    assert!(replay.status.success(), "{replay:?}");
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["rejected"], 0, "{replay}");
    let mut want = vec![
        json!({"id": 1, "n": 7}),
        json!({"id": 2, "n": 4000000000u64}),
    ];
    want.extend((10..16).map(|i| json!({"id": i, "n": i})));
    assert_eq!(rows(&wh, "t.kv"), want, "line 2 is newer than line 1");

    // A replay that crashed before removing its files runs again: nothing twice.
    for (p, bytes) in &saved {
        std::fs::write(p, bytes).unwrap();
    }
    let again = wh.floe_env(&["dlq", "replay", "--json"], &later);
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["records_committed"], 0, "{again}");
    assert_eq!(rows(&wh, "t.kv"), want);
}

#[test]
fn dead_letters_keep_the_records_exact_bytes_and_replay_them() {
    let wh = Warehouse::new();
    wh.create_table("t.text", TEXT_SCHEMA, &[]);
    let bad: &[u8] = b"{\"id\":1,\"s\":\"caf\xe9\"}";
    let mut input = bad.to_vec();
    input.extend_from_slice(b"\n{\"id\":2,\"s\":\"ok\"}\n");
    let dir = wh.path().join("_inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("latin1.ndjson");
    std::fs::write(&path, &input).unwrap();
    let r = wh.ingest("t.text", &[&path], &[]);
    assert_eq!(r["rejected"], 1, "{r}");

    let stored = |wh: &Warehouse| -> Vec<Vec<u8>> {
        dead_letter_files(wh)
            .iter()
            .flat_map(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .collect::<Vec<_>>()
            })
            .map(|e| match e["record_base64"].as_str() {
                Some(b) => base64::engine::general_purpose::STANDARD.decode(b).unwrap(),
                None => e["record"].as_str().unwrap().as_bytes().to_vec(),
            })
            .collect()
    };
    assert_eq!(stored(&wh), vec![bad.to_vec()]);

    // The replay sends the same bytes, which are still not UTF-8: rejected
    // again, with the bytes kept; nothing mangled reaches the table.
    let replay = json_out(&wh, &["dlq", "replay", "--json"]);
    assert_eq!(replay["records_committed"], 0, "{replay}");
    assert_eq!(replay["rejected"], 1, "{replay}");
    assert_eq!(stored(&wh), vec![bad.to_vec()]);
    let listed = json_out(&wh, &["dlq", "list", "--json"]);
    let again = &listed[0]["records"][0];
    assert_eq!(
        again["position"], "line 1",
        "the first position stays: {again}"
    );
    assert!(
        again["source"].as_str().unwrap().starts_with("file:"),
        "{again}"
    );
    assert_eq!(again["replays"], 1, "{again}");
    assert_eq!(rows(&wh, "t.text"), vec![json!({"id": 2, "s": "ok"})]);

    // A dead-letter file written before bytes were kept is still replayed.
    for p in dead_letter_files(&wh) {
        std::fs::remove_file(p).unwrap();
    }
    let old = json!({
        "table": "t.text", "batch_id": "0123456789abcdef0123456789abcdef",
        "source": "file:/old.ndjson@00000000000000aa", "position": "line 3",
        "field": "s", "reason": "was rejected", "record": "{\"id\":3,\"s\":\"d\u{e9}j\u{e0}\"}"
    });
    let old_dir = wh.path().join("_floe/dlq/t/text");
    std::fs::create_dir_all(&old_dir).unwrap();
    std::fs::write(old_dir.join("old.ndjson"), format!("{old}\n")).unwrap();
    let replay = json_out(&wh, &["dlq", "replay", "--json"]);
    assert_eq!(replay["records_committed"], 1, "{replay}");
    assert_eq!(
        rows(&wh, "t.text"),
        vec![json!({"id": 2, "s": "ok"}), json!({"id": 3, "s": "déjà"})]
    );
}

/// A mistyped `--table` fails naming the table it probably meant, where it
/// replayed and purged nothing and succeeded; `table show` says the same.
#[test]
fn a_mistyped_table_is_refused_with_the_nearest_name() {
    let wh = Warehouse::new();
    wh.create_table("t.text", TEXT_SCHEMA, &[]);
    let bad = wh.file("bad.ndjson", "{\"id\":\"x\"}\n{\"id\":2,\"s\":\"ok\"}\n");
    assert_eq!(wh.ingest("t.text", &[&bad], &[])["rejected"], 1);
    for args in [
        &["dlq", "replay", "--table", "t.txet"][..],
        &["dlq", "purge", "--table", "t.txet"],
        &["dlq", "list", "--table", "t.txet"],
        &["table", "show", "t.txet"],
    ] {
        let out = wh.floe_env(args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "floe {args:?}: {err}");
        assert!(
            err.contains("table t.txet does not exist (did you mean t.text?)"),
            "floe {args:?}: {err}"
        );
    }
    // Nothing was replayed or purged: the dead letter is still there.
    let listed = json_out(&wh, &["dlq", "list", "--table", "t.text", "--json"]);
    assert_eq!(
        listed[0]["records"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
}

const GH_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"repo","required":false,"type":{"type":"struct","fields":[
    {"id":3,"name":"id","required":false,"type":"long"}]}},
  {"id":4,"name":"n","required":false,"type":"int"}]}"#;

/// A thousand rejections of one problem are one line of `dlq list`, and a
/// filtered replay with a fix takes exactly the records it selects: the
/// numeric strings become numbers, the rest stay dead-lettered (with why),
/// other fields' dead letters are untouched, and a second replay commits
/// nothing. Purge and export take the same filters.
#[test]
fn dead_letters_group_by_problem_and_a_filtered_replay_fixes_them() {
    let wh = Warehouse::new();
    wh.create_table("gh.events", GH_SCHEMA, &[]);
    let lines: String = (0..1000u64)
        .map(|i| match i % 10 {
            0 => format!("{{\"id\":{i},\"repo\":{{\"id\":\"oops{i}\"}}}}\n"),
            1 => format!("{{\"id\":{i},\"repo\":{{\"id\":7}},\"n\":true}}\n"),
            2..=7 => format!("{{\"id\":{i},\"repo\":{{\"id\":\"{}\"}}}}\n", 1_000_000 + i),
            _ => format!("{{\"id\":{i},\"repo\":{{\"id\":{i}}}}}\n"),
        })
        .collect();
    let input = wh.file("gh.ndjson", &lines);
    let first = wh.ingest("gh.events", &[&input], &[]);
    assert_eq!(first["records_committed"], 200, "{}", first["rejected"]);

    let listed = wh.floe(&["dlq", "list"]);
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [
            "gh.events: 800 records",
            "     100  n: expected a JSON integer (int), got true",
            "     700  repo.id: expected a JSON integer (long), got the string <value>",
        ],
        "{listed}"
    );
    let some: Value = serde_json::from_str(&wh.floe(&[
        "dlq",
        "list",
        "--json",
        "--reason",
        "oops",
        "--newer-than",
        "1h",
    ]))
    .unwrap();
    assert_eq!(some[0]["records"].as_array().unwrap().len(), 100, "{some}");
    let none = wh.floe(&["dlq", "list", "--field", "repo.id", "--older-than", "1d"]);
    assert!(none.contains("no dead letters match (800 others"), "{none}");
    let exported = wh.floe(&["dlq", "export", "--field", "repo.id", "--records"]);
    assert_eq!(exported.lines().count(), 700);
    assert!(
        exported.lines().all(|l| l.contains("\"repo\":{\"id\":\"")),
        "{exported}"
    );

    // The replay's fix converts the numeric strings; "oops…" cannot be, and is rejected again.
    let replay = [
        "dlq",
        "replay",
        "--table",
        "gh.events",
        "--field",
        "repo.id",
        "--fix",
        "repo.id=number",
    ];
    let out = wh.floe_env(&replay, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("fixed 600 records"), "{text}");
    assert!(
        text.contains("not fixed: ") && text.contains("and 90 more not fixed"),
        "{text}"
    );
    let table = wh.read("gh.events", Some("id"));
    assert_eq!(table["count"], 800, "{table}");
    let rows = table["rows"].as_array().unwrap();
    let row2 = rows.iter().find(|r| r["id"] == 2).unwrap();
    assert_eq!(row2["repo"]["id"], 1_000_002, "{row2}");
    let listed = wh.floe(&["dlq", "list"]);
    assert!(listed.starts_with("gh.events: 200 records"), "{listed}");
    assert!(listed.contains("     100  n: "), "{listed}");

    // Exactly once: the same replay again commits nothing new.
    let again = wh.report(&[&replay[..], &["--json"]].concat());
    assert_eq!(again["records_committed"], 0, "{again}");
    assert_eq!(wh.read("gh.events", None)["count"], 800);

    // A purge without a table or --all is refused; with a filter it takes only those.
    assert!(
        !wh.floe_env(&["dlq", "purge", "--reason", "oops"], &[])
            .status
            .success()
    );
    let purged = wh.floe(&["dlq", "purge", "--table", "gh.events", "--field", "repo.id"]);
    assert!(
        purged.contains("purged 100 dead-lettered records"),
        "{purged}"
    );
    let left: Vec<Value> = wh
        .floe(&["dlq", "export"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(left.len(), 100);
    assert!(left.iter().all(|e| e["field"] == "n"), "{left:?}");
}
