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
