//! Change records through the `floe` CLI into a copy-on-write keyed table with
//! a changelog beside it, read back by pyiceberg, which applies no equality
//! deletes: what it reads must be the model state exactly.

mod common;

use std::collections::BTreeMap;

use common::{Rng, Warehouse};
use serde_json::{Value, json};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"},
  {"id":3,"name":"amount","required":false,"type":"decimal(38, 9)"}]}"#;

/// Changes over `keys` keys split into `files` inputs (a key always in the
/// same one, so its order holds), the model state, and the ops in order.
fn changes(n: usize, keys: u64, files: usize) -> (Vec<String>, BTreeMap<u64, Value>, Vec<String>) {
    let mut rng = Rng(0x5eed);
    let mut model = BTreeMap::new();
    let mut texts = vec![String::new(); files];
    let mut ops = Vec::new();
    for i in 0..n {
        let id = rng.next() % keys;
        let line = if rng.next().is_multiple_of(5) {
            model.remove(&id);
            ops.push("delete".to_string());
            format!("{{\"_op\":\"d\",\"id\":{id}}}\n")
        } else {
            // More digits than an f64 holds: only an exact path keeps them.
            let amount = format!("{}{:09}.{:09}", id + 1, i, rng.next() % 1_000_000_000);
            model.insert(
                id,
                json!({"id": id, "v": format!("v{i}"), "amount": amount}),
            );
            ops.push("update".to_string());
            format!("{{\"_op\":\"u\",\"id\":{id},\"v\":\"v{i}\",\"amount\":{amount}}}\n")
        };
        texts[(id as usize) % files].push_str(&line);
    }
    (texts, model, ops)
}

#[test]
fn copy_on_write_table_reads_as_the_model_in_pyiceberg_with_its_changelog_beside() {
    let wh = Warehouse::new();
    wh.file("kv.json", SCHEMA);
    let config = wh.file(
        "floe.toml",
        "[tables.\"silver.kv\"]\nschema = \"kv.json\"\nmerge_strategy = \"copy-on-write\"\nchangelog = \"beside\"\n",
    );
    let cfg = config.to_str().unwrap();
    let (texts, model, ops) = changes(2400, 150, 3);
    let files: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| wh.file(&format!("part{i}.ndjson"), t).display().to_string())
        .collect();
    let mut args = vec!["--config", cfg, "ingest", "silver.kv", "--json"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--batch-size", "100", "--writers", "3"]);
    let report: Value = serde_json::from_str(wh.floe(&args).trim()).unwrap();
    assert_eq!(report["rejected"], 0, "{report}");
    assert!(report["requests"].as_u64().unwrap() >= 24, "{report}");

    let table = wh.read("silver.kv", Some("id"));
    let expected: Vec<Value> = model
        .values()
        .map(|r| {
            // pyiceberg prints decimals at the column's scale.
            let mut r = r.clone();
            let a = r["amount"].as_str().unwrap().to_string();
            r["amount"] = json!(a);
            r
        })
        .collect();
    assert_eq!(table["rows"].as_array().unwrap(), &expected);
    assert_eq!(
        table["delete_files"], 0,
        "copy-on-write leaves no delete files"
    );
    let summaries = table["summaries"].as_array().unwrap();
    let last = summaries.last().unwrap();
    assert_eq!(last["total-delete-files"], "0");
    assert!(last["floe.cow.rows-changed"].as_str().is_some(), "{last}");
    let rewritten: u64 = summaries
        .iter()
        .filter_map(|s| s["floe.cow.rows-rewritten"].as_str()?.parse::<u64>().ok())
        .sum();
    assert!(rewritten > 0, "updates of committed keys rewrote files");

    // Every change, unfolded, with its op and position.
    let log = wh.read("silver.kv_changelog", None);
    assert_eq!(log["count"], ops.len());
    let rows = log["rows"].as_array().unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        *seen
            .entry(r["_op"].as_str().unwrap().to_string())
            .or_default() += 1;
        assert!(r["_position"].as_str().is_some_and(|p| !p.is_empty()));
    }
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    for op in &ops {
        *want.entry(op.clone()).or_default() += 1;
    }
    assert_eq!(seen, want);
}

/// Debezium changes of one database (increasing `source.lsn`) spread over
/// five objects, each its own source, ingested out of order (0, 2, 1, 4, 3,
/// then 2 again): with `order_changes_by = "position"` every key ends at its
/// last change by LSN, whichever object came last, deletes included, and a
/// rerun changes nothing; without it the objects' commit order wins and
/// the table is wrong (the case this setting exists for).
#[test]
fn changes_spread_over_sources_apply_in_their_lsn_order() {
    let mut rng = Rng(0x0_1d3a);
    let mut model: BTreeMap<u64, String> = BTreeMap::new();
    let mut parts = vec![String::new(); 5];
    for i in 0..2_000u64 {
        let id = rng.next() % 120;
        let lsn = 1_000 + i * 10;
        let delete = rng.next().is_multiple_of(6);
        let (op, before, after) = if delete {
            model.remove(&id);
            ("d", json!({"id": id}), Value::Null)
        } else {
            let v = format!("v{i}");
            model.insert(id, v.clone());
            ("u", Value::Null, json!({"id": id, "v": v}))
        };
        let event = json!({"before": before, "after": after, "op": op,
            "source": {"connector": "postgresql", "lsn": lsn, "ts_ms": 1_767_225_600_000u64 + i},
            "ts_ms": 1_767_225_600_000u64 + i});
        // Consecutive runs of the stream go to consecutive objects.
        parts[(i / 400) as usize].push_str(&(event.to_string() + "\n"));
    }
    // `together`: one ingest of every object, newest first, three writers,
    // so requests of several sources meet in one commit.
    let run = |ordered: bool, together: bool| {
        let wh = Warehouse::new();
        wh.file(
            "kv.json",
            r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
          {"id":1,"name":"id","required":true,"type":"long"},
          {"id":2,"name":"v","required":false,"type":"string"}]}"#,
        );
        let order = if ordered {
            "order_changes_by = \"position\"\n"
        } else {
            ""
        };
        let config = wh.file(
            "floe.toml",
            &format!("[tables.\"silver.kv\"]\nschema = \"kv.json\"\n{order}"),
        );
        let cfg = config.to_str().unwrap();
        let files: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, t)| wh.file(&format!("part{i}.ndjson"), t))
            .collect();
        let runs: Vec<Vec<usize>> = if together {
            vec![vec![4, 3, 2, 1, 0]]
        } else {
            [0, 2, 1, 4, 3, 2].iter().map(|i| vec![*i]).collect()
        };
        for run in runs {
            let mut args = vec!["--config", cfg, "ingest", "silver.kv", "--json"];
            args.extend(run.iter().map(|i| files[*i].to_str().unwrap()));
            args.extend(["--batch-size", "150", "--writers", "3"]);
            let report = wh.report(&args);
            assert_eq!(report["rejected"], 0, "{report}");
        }
        let table = wh.read("silver.kv", Some("id"));
        table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_u64().unwrap(),
                    r["v"].as_str().unwrap().to_string(),
                )
            })
            .collect::<BTreeMap<u64, String>>()
    };
    assert_eq!(
        run(true, false),
        model,
        "in LSN order, one object at a time"
    );
    assert_eq!(run(true, true), model, "in LSN order, every object at once");
    assert_ne!(
        run(false, false),
        model,
        "without the order field, the later commit wins"
    );
}
