//! Schema evolution, auto-create, routing and dead-letter replay through the
//! real `floe` binary, read back with pyiceberg.

mod common;

use common::{Warehouse, ids};
use serde_json::Value;

/// Ten files whose shape changes over time, as a stream does over months.
fn stream_files(wh: &Warehouse) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for f in 0..10u64 {
        let mut lines = String::new();
        for i in f * 10..f * 10 + 10 {
            let mut rec =
                serde_json::json!({"id": i, "n": i, "code": i * 2, "ts": "2026-11-30T10:00:00Z"});
            if f >= 2 {
                rec["region"] = "eu".into(); // new top-level column
            }
            if f >= 3 {
                rec["device"] = serde_json::json!({"os": "linux"}); // new struct column
            }
            if f >= 5 {
                rec["device"]["version"] = (i as i64).into(); // new nested field
            }
            if f >= 6 {
                rec["n"] = (3_000_000_000u64 + i).into(); // beyond int: int -> long
            }
            if f == 8 && i % 2 == 0 {
                rec["code"] = format!("C{i}").into(); // number turns into text: incompatible
            }
            lines.push_str(&rec.to_string());
            lines.push('\n');
        }
        files.push(wh.file(&format!("stream-{f}.ndjson"), &lines));
    }
    files
}

const STREAM_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"n","required":false,"type":"int"},
  {"id":3,"name":"code","required":false,"type":"long"},
  {"id":4,"name":"ts","required":false,"type":"timestamptz"}]}"#;

fn field_type(show: &Value, name: &str) -> Value {
    show["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", show["schema"]))["type"]
        .clone()
}

#[test]
fn a_changing_stream_evolves_one_table_and_dead_letters_only_the_incompatible() {
    let wh = Warehouse::new();
    wh.create_table("bronze.stream", STREAM_SCHEMA, &[]);
    for f in stream_files(&wh) {
        wh.ingest("bronze.stream", &[&f], &[]);
    }
    let show: Value =
        serde_json::from_str(&wh.floe(&["table", "show", "bronze.stream", "--json"])).unwrap();
    assert_eq!(field_type(&show, "n"), "long", "int widened to long");
    assert_eq!(field_type(&show, "code"), "long", "never changed to string");
    assert_eq!(field_type(&show, "region"), "string");
    let device = field_type(&show, "device");
    let nested: Vec<&str> = device["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(nested, ["os", "version"]);

    let table = wh.read("bronze.stream", Some("id"));
    let rows = table["rows"].as_array().unwrap();
    let expected_ids: Vec<u64> = (0..100)
        .filter(|i| !(80..90).contains(i) || i % 2 == 1)
        .collect();
    assert_eq!(ids(&table), expected_ids);
    let row = |id: u64| rows.iter().find(|r| r["id"] == id).unwrap();
    assert_eq!(
        row(0)["region"],
        Value::Null,
        "old rows read the new column as null"
    );
    assert_eq!(row(25)["region"], "eu");
    assert_eq!(row(35)["device"]["version"], Value::Null);
    assert_eq!(row(55)["device"]["version"], 55);
    assert_eq!(row(5)["n"], 5);
    assert_eq!(row(65)["n"], 3_000_000_065u64);

    // The number-turned-text records wait in the dead-letter location, with why.
    let listed: Value = serde_json::from_str(&wh.floe(&["dlq", "list", "--json"])).unwrap();
    let entries: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["records"].as_array().unwrap())
        .collect();
    assert_eq!(entries.len(), 5);
    for e in &entries {
        assert_eq!(e["table"], "bronze.stream");
        assert_eq!(e["field"], "code");
        assert!(e["reason"].as_str().unwrap().contains("string"), "{e}");
    }
    // Replaying without a fix puts nothing in and loses nothing: every
    // record is rejected again, exit 4.
    let replay = wh.report(&["dlq", "replay", "--json"]);
    assert_eq!(replay["records_committed"], 0, "{replay}");
    assert_eq!(wh.read("bronze.stream", None)["count"], 95);
    let again: Value = serde_json::from_str(&wh.floe(&["dlq", "list", "--json"])).unwrap();
    let still: usize = again
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["records"].as_array().unwrap().len())
        .sum();
    assert_eq!(still, 5);
}

#[test]
fn records_that_need_a_wider_type_replay_exactly_once_after_widening() {
    let wh = Warehouse::new();
    let config = wh.file(
        "floe.toml",
        "[tables.\"bronze.stream\"]\nwiden_types = false\n",
    );
    let cfg = config.to_str().unwrap();
    let schema = wh.file("s.json", STREAM_SCHEMA);
    wh.floe(&[
        "--config",
        cfg,
        "table",
        "create",
        "bronze.stream",
        "--schema",
        schema.to_str().unwrap(),
    ]);
    let lines: String = (0..20u64)
        .map(|i| {
            let n = if i % 4 == 0 { 3_000_000_000 + i } else { i };
            format!("{{\"id\":{i},\"n\":{n}}}\n")
        })
        .collect();
    let f = wh.file("big.ndjson", &lines);
    let report = wh.report(&[
        "--config",
        cfg,
        "ingest",
        "bronze.stream",
        f.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["records_committed"], 15);
    assert_eq!(report["rejected"], 5);
    assert!(
        report["evolved"].as_array().unwrap().is_empty(),
        "types stay fixed"
    );

    wh.floe(&["table", "alter", "bronze.stream", "--widen", "n=long"]);
    let replay: Value = serde_json::from_str(
        wh.floe(&["dlq", "replay", "--table", "bronze.stream", "--json"])
            .trim(),
    )
    .unwrap();
    assert_eq!(replay["records_committed"], 5);
    assert_eq!(replay["rejected"], 0);
    // A second replay finds nothing left to do.
    let replay: Value = serde_json::from_str(wh.floe(&["dlq", "replay", "--json"]).trim()).unwrap();
    assert_eq!(replay["records_committed"], 0);

    let table = wh.read("bronze.stream", Some("id"));
    assert_eq!(ids(&table), (0..20).collect::<Vec<_>>());
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows[4]["n"], 3_000_000_004u64);
    assert_eq!(rows[5]["n"], 5);
}

#[test]
fn widening_refuses_what_iceberg_does_not_allow() {
    let wh = Warehouse::new();
    wh.create_table("bronze.stream", STREAM_SCHEMA, &[]);
    let out = wh.floe_env(
        &["table", "alter", "bronze.stream", "--widen", "code=string"],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot change `code` from long to string")
    );
}

#[test]
fn records_routed_by_field_create_three_partitioned_tables() {
    let wh = Warehouse::new();
    let config = wh.file(
        "floe.toml",
        r#"
[routing]
mode = "field"
field = "kind"
template = "raw.{value}"
allow = ["raw.click", "raw.view", "raw.b*"]

[tables."raw.click"]
partition = ["day(ts)"]

[tables."raw.view"]
partition = ["bucket(4, id)"]

[tables."raw.buy"]
partition = ["country"]
"#,
    );
    let kinds = ["click", "view", "buy"];
    let countries = ["de", "fr", "us"];
    let lines: String = (0..300u64)
        .map(|i| {
            format!(
                "{{\"kind\":\"{}\",\"id\":{i},\"country\":\"{}\",\"ts\":\"2026-11-{:02}T08:00:00Z\"}}\n",
                kinds[(i % 3) as usize],
                countries[(i / 3 % 3) as usize],
                1 + i % 4
            )
        })
        .collect::<String>()
        + "{\"kind\":\"secret\",\"id\":999}\n";
    // `raw.secret` matches no allow pattern.
    let f = wh.file("mixed.ndjson", &lines);
    let report = wh.report(&[
        "--config",
        config.to_str().unwrap(),
        "ingest",
        "--routed",
        f.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["records_committed"], 300);
    let mut created: Vec<&str> = report["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    created.sort();
    assert_eq!(created, ["raw.buy", "raw.click", "raw.view"]);
    // `raw.secret` is not on the allow-list: dead-lettered, not created.
    assert_eq!(report["rejected"], 1);
    assert!(
        report["rejected_records"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("raw.secret")
    );

    let spec_of = |t: &str| -> Value {
        serde_json::from_str::<Value>(&wh.floe(&["table", "show", t, "--json"])).unwrap()["partition_spec"]["fields"][0].clone()
    };
    assert_eq!(spec_of("raw.click")["transform"], "day");
    assert_eq!(spec_of("raw.view")["transform"], "bucket[4]");
    assert_eq!(spec_of("raw.buy")["transform"], "identity");

    let click = wh.read("raw.click", None);
    assert_eq!(click["count"], 100);
    for f in click["files"].as_array().unwrap() {
        assert!(
            f.as_str().unwrap().contains("/data/ts_day=2026-11-0"),
            "{f}"
        );
    }
    let buy = wh.read("raw.buy", None);
    assert_eq!(buy["count"], 100);
    assert_eq!(
        buy["files"].as_array().unwrap().len(),
        3,
        "one file per country"
    );
    // Partition pruning: a filter on the partition column plans one file, with the right rows.
    let pruned = wh.read_filtered("raw.buy", "country=fr");
    assert_eq!(pruned["files"].as_array().unwrap().len(), 1);
    let rows = pruned["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r["country"] == "fr" && r["kind"] == "buy")
    );
    let expected = (0..300u64).filter(|i| i % 3 == 2 && i / 3 % 3 == 1).count();
    assert_eq!(rows.len(), expected);
}

#[test]
fn bad_table_names_are_refused_everywhere() {
    let wh = Warehouse::new();
    let schema = wh.file("s.json", STREAM_SCHEMA);
    let long = format!("ns.{}", "x".repeat(300));
    for name in ["../x", "a..b", "", ".t", long.as_str()] {
        let out = wh.floe_env(
            &[
                "table",
                "create",
                name,
                "--schema",
                schema.to_str().unwrap(),
            ],
            &[],
        );
        assert!(!out.status.success(), "{name:?} accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid table name"),
            "{name:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bad = wh.file(
        "bad.toml",
        "[routing]\nmode = \"fixed\"\ntable = \"a..b\"\n",
    );
    let f = wh.file("x.ndjson", "{}\n");
    let out = wh.floe_env(
        &[
            "--config",
            bad.to_str().unwrap(),
            "ingest",
            "--routed",
            f.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("routing.table"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
