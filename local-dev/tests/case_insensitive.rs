//! `--case-insensitive` through the real `floe` binary: record fields match
//! columns ignoring ASCII case on keyed tables as on append ones, key
//! columns included. Tables are read back by pyiceberg.

mod common;

use common::Warehouse;
use serde_json::{Value, json};

const KV_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

const APPEND_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

fn rows(wh: &Warehouse, table: &str) -> Vec<Value> {
    wh.read(table, Some("id"))["rows"]
        .as_array()
        .expect("rows")
        .clone()
}

#[test]
fn keyed_tables_match_key_columns_ignoring_case() {
    let wh = Warehouse::new();
    wh.create_table("t.kv", KV_SCHEMA, &[]);
    wh.create_table("t.log", APPEND_SCHEMA, &[]);
    let f = wh.file(
        "upper.ndjson",
        "{\"ID\":5,\"V\":\"x\"}\n{\"Id\":6,\"v\":\"y\"}\n{\"id\":5,\"V\":\"z\"}\n",
    );
    for table in ["t.kv", "t.log"] {
        let r = wh.ingest(table, &[&f], &["--case-insensitive"]);
        assert_eq!(r["rejected"], 0, "{table}: {r}");
    }
    assert_eq!(
        rows(&wh, "t.kv"),
        vec![json!({"id": 5, "v": "z"}), json!({"id": 6, "v": "y"})]
    );
    assert_eq!(rows(&wh, "t.log").len(), 3);
    // Without the flag the key is missing, as it is for the append table's column.
    let g = wh.file("other.ndjson", "{\"ID\":7,\"V\":\"w\"}\n");
    let r = wh.ingest("t.kv", &[&g], &[]);
    assert_eq!(r["rejected"], 1, "{r}");
}
