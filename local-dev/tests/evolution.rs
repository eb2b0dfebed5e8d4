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

const NESTED_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"http","required":false,"type":{"type":"struct","fields":[
    {"id":3,"name":"method","required":false,"type":"string"}]}}]}"#;

/// A key with a dot in its name (`"http.method"`, as OpenTelemetry- and
/// Elastic-shaped logs send) beside the nested field of that full name:
/// no Iceberg schema holds both. The record is dead-lettered naming the
/// field; the batch's other records still evolve the table and keep every
/// value, where before the whole evolution was silently skipped and their
/// new fields dropped.
#[test]
fn a_dotted_key_that_collides_is_dead_lettered_and_the_rest_evolve() {
    let wh = Warehouse::new();
    wh.create_table("bronze.logs", NESTED_SCHEMA, &[]);
    let f = wh.file(
        "logs.ndjson",
        concat!(
            "{\"id\":1,\"http\":{\"method\":\"GET\"},\"msg\":\"a\"}\n",
            "{\"id\":2,\"http.method\":\"POST\",\"msg\":\"b\",\"host\":\"h2\"}\n",
            "{\"id\":3,\"host\":\"h3\",\"http\":{\"method\":\"PUT\",\"status\":201}}\n",
        ),
    );
    let report = wh.ingest("bronze.logs", &[&f], &[]);
    assert_eq!(report["records_committed"], 2, "{report}");
    assert_eq!(report["rejected"], 1, "{report}");
    let listed = wh.floe(&["dlq", "list", "--table", "bronze.logs"]);
    assert!(
        listed.contains("http.method") && listed.contains("rename the key"),
        "{listed}"
    );
    let table = wh.read("bronze.logs", Some("id"));
    assert_eq!(
        table["rows"],
        serde_json::json!([
            {"id":1,"http":{"method":"GET","status":null},"msg":"a","host":null},
            {"id":3,"http":{"method":"PUT","status":201},"msg":null,"host":"h3"},
        ])
    );
    // A table created on first write, from a batch with a record that
    // collides with itself.
    let config = wh.file(
        "fresh.toml",
        "[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"bronze.{value}\"\n",
    );
    let g = wh.file(
        "self.ndjson",
        "{\"t\":\"fresh\",\"a.b\":1,\"a\":{\"b\":2}}\n{\"t\":\"fresh\",\"c\":3}\n",
    );
    let report = wh.report(&[
        "--config",
        config.to_str().unwrap(),
        "ingest",
        "--routed",
        "--json",
        g.to_str().unwrap(),
    ]);
    assert_eq!(report["records_committed"], 1, "{report}");
    assert_eq!(report["rejected"], 1, "{report}");
    assert_eq!(wh.read("bronze.fresh", None)["rows"][0]["c"], 3);
}

/// On a keyed table, a key's last change in a batch that is dead-lettered
/// leaves the change before it: that one's new nested field must evolve
/// the table too, not be dropped (the product harness found `m.k.w`
/// written without its value this way).
#[test]
fn a_keys_earlier_change_kept_after_its_last_is_refused_keeps_its_new_fields() {
    let wh = Warehouse::new();
    let keyed = NESTED_SCHEMA.replacen(
        r#""schema-id":0,"#,
        r#""schema-id":0,"identifier-field-ids":[1],"#,
        1,
    );
    wh.create_table("bronze.kv", &keyed, &[]);
    let f = wh.file(
        "kv.ndjson",
        concat!(
            "{\"id\":1,\"http\":{\"method\":\"GET\"}}\n",
            "{\"id\":2,\"http\":{\"method\":\"PUT\",\"status\":201},\"host\":\"h2\"}\n",
            "{\"id\":2,\"http.method\":\"POST\"}\n",
        ),
    );
    let report = wh.ingest("bronze.kv", &[&f], &[]);
    assert_eq!(report["rejected"], 1, "{report}");
    let table = wh.read("bronze.kv", Some("id"));
    assert_eq!(
        table["rows"],
        serde_json::json!([
            {"id":1,"http":{"method":"GET","status":null},"host":null},
            {"id":2,"http":{"method":"PUT","status":201},"host":"h2"},
        ])
    );
}

/// Files written before a struct, a list's struct or a map's struct gained
/// a field are read onto the current schema by field id at every depth:
/// compaction and keyed updates of rows written before the evolution both
/// work, where iceberg-rust's reader failed on every run ("Incorrect number
/// of arrays for StructArray fields").
#[test]
fn nested_fields_added_by_evolution_leave_the_table_maintainable_and_updatable() {
    let wh = Warehouse::new();
    let schema = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
      {"id":1,"name":"id","required":true,"type":"long"},
      {"id":2,"name":"http","required":false,"type":{"type":"struct","fields":[
        {"id":3,"name":"method","required":false,"type":"string"}]}},
      {"id":4,"name":"tags","required":false,"type":{"type":"list","element-id":5,
        "element-required":false,"element":{"type":"struct","fields":[
          {"id":6,"name":"k","required":false,"type":"string"}]}}},
      {"id":7,"name":"attrs","required":false,"type":{"type":"map","key-id":8,"key":"string",
        "value-id":9,"value-required":false,"value":{"type":"struct","fields":[
          {"id":10,"name":"x","required":false,"type":"long"}]}}}]}"#;
    for (table, keyed) in [("silver.kv", true), ("silver.log", false)] {
        let schema = if keyed {
            schema.to_string()
        } else {
            schema.replace(r#""identifier-field-ids":[1],"#, "")
        };
        wh.create_table(table, &schema, &[]);
        let old = wh.file(
            &format!("{table}.old.ndjson"),
            concat!(
                "{\"id\":1,\"http\":{\"method\":\"GET\"},\"tags\":[{\"k\":\"a\"}],\"attrs\":{\"p\":{\"x\":1}}}\n",
                "{\"id\":2,\"http\":{\"method\":\"HEAD\"}}\n",
            ),
        );
        wh.ingest(table, &[&old], &[]);
        let new = wh.file(
            &format!("{table}.new.ndjson"),
            concat!(
                "{\"id\":1,\"http\":{\"method\":\"PUT\",\"status\":200},\"tags\":[{\"k\":\"b\",\"v\":2}],\"attrs\":{\"q\":{\"x\":2,\"y\":\"z\"}}}\n",
                "{\"id\":3,\"http\":{\"method\":\"GET\",\"status\":404}}\n",
            ),
        );
        let report = wh.ingest(table, &[&new], &[]);
        assert_eq!(report["records_committed"], 2, "{table}: {report}");
        let reports: Vec<Value> = wh
            .floe(&["maintain", "--json", table])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            reports[0]["compacted_files"].as_u64() >= Some(1),
            "{table}: {}",
            reports[0]
        );
        // pyarrow on the files pyiceberg plans (maintenance left no delete
        // files): pyiceberg's own rows read a null list of structs as [].
        let read = wh.read_raw(table, Some("id"));
        assert_eq!(
            read["rows"].as_array().map(Vec::len),
            Some(if keyed { 3 } else { 4 })
        );
        let rows = read["raw_rows"].clone();
        let updated = serde_json::json!({"id":1,"http":{"method":"PUT","status":200},
            "tags":[{"k":"b","v":2}],"attrs":[["q",{"x":2,"y":"z"}]]});
        let first = serde_json::json!({"id":1,"http":{"method":"GET","status":null},
            "tags":[{"k":"a","v":null}],"attrs":[["p",{"x":1,"y":null}]]});
        let two = serde_json::json!({"id":2,"http":{"method":"HEAD","status":null},"tags":null,"attrs":null});
        let three = serde_json::json!({"id":3,"http":{"method":"GET","status":404},"tags":null,"attrs":null});
        if keyed {
            assert_eq!(rows, serde_json::json!([updated, two, three]), "{table}");
        } else {
            let mut got = rows.as_array().unwrap().clone();
            got.sort_by_key(|r| r.to_string());
            let mut want = vec![first, updated, two, three];
            want.sort_by_key(|r| r.to_string());
            assert_eq!(got, want, "{table}");
        }
    }
}

const DECLARED: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"repo","required":true,"type":{"type":"struct","fields":[
    {"id":3,"name":"id","required":true,"type":"long"}]}},
  {"id":4,"name":"note","required":false,"type":"string"},
  {"id":5,"name":"at","required":false,"type":"timestamptz"}]}"#;

/// A declared `required` column stays required: a record without it is
/// dead-lettered naming the field, unless the table opts into relaxing or
/// the column is made optional by hand. Numeric strings and values for a
/// string column are taken only where the table opts in.
#[test]
fn required_columns_hold_and_coercions_are_opt_in() {
    let wh = Warehouse::new();
    let config = wh.file(
        "floe.toml",
        "[tables.\"bronze.loose\"]\nrelax_required = true\ncoerce = [\"numeric_strings\", \"to_string\"]\n",
    );
    let cfg = config.to_str().unwrap();
    let schema = wh.file("declared.json", DECLARED);
    let lines = [
        r#"{"id":1,"repo":{"id":10},"note":"a"}"#,
        r#"{"id":2,"repo":{"id":"1009635"},"note":7,"at":"1700000000000"}"#,
        r#"{"id":3,"repo":{},"note":"no repo id"}"#,
        r#"{"id":4,"note":{"why":"no repo"}}"#,
    ]
    .join("\n")
        + "\n";
    let input = wh.file("declared.ndjson", &lines);
    let ingest = |table: &str| {
        wh.floe(&[
            "--config",
            cfg,
            "table",
            "create",
            table,
            "--schema",
            schema.to_str().unwrap(),
        ]);
        wh.report(&[
            "--config",
            cfg,
            "ingest",
            table,
            input.to_str().unwrap(),
            "--json",
        ])
    };
    let required = |table: &str, column: &str| {
        let show: Value =
            serde_json::from_str(&wh.floe(&["table", "show", table, "--json"])).unwrap();
        let fields = show["schema"]["fields"].as_array().unwrap().clone();
        let repo = fields.iter().find(|f| f["name"] == "repo").unwrap().clone();
        match column {
            "repo" => repo["required"] == true,
            _ => repo["type"]["fields"][0]["required"] == true,
        }
    };

    // The default: every misfit is dead-lettered, the table keeps its schema.
    let strict = ingest("bronze.strict");
    assert_eq!(strict["records_committed"], 1, "{strict}");
    assert_eq!(strict["rejected"], 3, "{strict}");
    assert!(strict["evolved"].as_array().unwrap().is_empty(), "{strict}");
    assert!(required("bronze.strict", "repo") && required("bronze.strict", "repo.id"));
    let listed: Value = serde_json::from_str(&wh.floe(&["dlq", "list", "--json"])).unwrap();
    let mut fields: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["records"].as_array().unwrap().clone())
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    fields.sort();
    let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names, ["note", "repo.id", "repo.id"], "{fields:?}");
    assert!(
        fields[1].1.contains("got the string \"1009635\""),
        "{fields:?}"
    );
    assert!(
        fields[2].1.contains("required field is missing"),
        "{fields:?}"
    );

    // Opted in: converted, relaxed, and the report says so.
    let loose = ingest("bronze.loose");
    assert_eq!(loose["records_committed"], 4, "{loose}");
    assert_eq!(loose["rejected"], 0, "{loose}");
    let evolved = loose["evolved"].to_string();
    assert!(
        evolved.contains("made repo optional") && evolved.contains("made repo.id optional"),
        "{evolved}"
    );
    let table = wh.read("bronze.loose", Some("id"));
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows[1]["repo"]["id"], 1009635, "{table}");
    assert_eq!(rows[1]["note"], "7", "{table}");
    assert!(
        rows[1]["at"]
            .as_str()
            .unwrap()
            .starts_with("2023-11-14T22:13:20"),
        "{table}"
    );
    assert_eq!(rows[3]["note"], r#"{"why":"no repo"}"#, "{table}");
    assert_eq!(rows[3]["repo"], Value::Null, "{table}");

    // By hand: `table alter --optional`, then the dead letters replay.
    wh.floe(&[
        "table",
        "alter",
        "bronze.strict",
        "--optional",
        "repo",
        "--optional",
        "repo.id",
    ]);
    assert!(!required("bronze.strict", "repo") && !required("bronze.strict", "repo.id"));
    let replay = wh.report(&["dlq", "replay", "--table", "bronze.strict", "--json"]);
    // Line 3 only lacked `repo.id`; the others still need a conversion.
    assert_eq!(replay["records_committed"], 1, "{replay}");
    assert_eq!(ids(&wh.read("bronze.strict", Some("id"))), [1, 3]);
}

/// `table create --infer FILE` gives the table the schema a first write of
/// those records would, with `--key` making it keyed; the file then goes in.
#[test]
fn a_table_is_created_from_a_sample_of_its_records() {
    let wh = Warehouse::new();
    let sample = wh.file(
        "sample.ndjson",
        "{\"id\":1,\"repo\":{\"name\":\"a\",\"stars\":3},\"at\":\"2026-11-30T10:00:00Z\",\"tags\":[\"x\"]}\n\
         {\"id\":2,\"repo\":{\"name\":\"b\",\"stars\":null},\"at\":\"2026-11-30T11:00:00Z\",\"score\":1.5}\n",
    );
    let path = sample.to_str().unwrap();
    let out = wh.floe_env(
        &[
            "table",
            "create",
            "bronze.gh",
            "--infer",
            path,
            "--schema",
            path,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "--infer and --schema conflict");
    wh.floe(&[
        "table",
        "create",
        "bronze.gh",
        "--infer",
        path,
        "--key",
        "id",
    ]);
    let show: Value =
        serde_json::from_str(&wh.floe(&["table", "show", "bronze.gh", "--json"])).unwrap();
    let schema = &show["schema"];
    assert_eq!(
        schema["identifier-field-ids"],
        serde_json::json!([1]),
        "{schema}"
    );
    assert_eq!(field_type(&show, "id"), "long");
    assert_eq!(field_type(&show, "at"), "timestamptz");
    assert_eq!(field_type(&show, "score"), "double");
    assert_eq!(
        field_type(&show, "repo")["fields"][1]["type"],
        "long",
        "{schema}"
    );
    assert_eq!(field_type(&show, "tags")["element"], "string", "{schema}");
    let report = wh.ingest("bronze.gh", &[&sample], &[]);
    assert_eq!(report["records_committed"], 2, "{report}");
    assert!(report["evolved"].as_array().unwrap().is_empty(), "{report}");
    assert_eq!(ids(&wh.read("bronze.gh", Some("id"))), [1, 2]);
    let empty = wh.file("empty.ndjson", "{\"a\":null}\n");
    let out = wh.floe_env(
        &[
            "table",
            "create",
            "bronze.none",
            "--infer",
            empty.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no field has a type yet"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
