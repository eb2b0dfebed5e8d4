//! The embedded pipeline through the real `floe` binary, read back by pyiceberg.

mod common;

use common::{EVENT_SCHEMA, Warehouse, events, ids};

#[test]
fn eight_files_by_four_writers_coalesce_into_fewer_snapshots() {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let files: Vec<_> = (0..8)
        .map(|i| {
            wh.file(
                &format!("part-{i}.ndjson"),
                &events(i * 1000..(i + 1) * 1000),
            )
        })
        .collect();
    let paths: Vec<_> = files.iter().map(|p| p.as_path()).collect();
    let report = wh.ingest("bronze.events", &paths, &["--writers", "4"]);

    assert_eq!(report["records_committed"], 8000);
    assert_eq!(report["requests"], 8);
    let commits = report["commits"].as_u64().unwrap();
    assert!(
        (1..8).contains(&commits),
        "8 requests took {commits} commits"
    );
    assert_eq!(report["records_per_commit"], 8000 / commits);

    let table = wh.read("bronze.events", None);
    assert_eq!(table["count"], 8000);
    assert_eq!(ids(&table), (0..8000).collect::<Vec<_>>());
    assert_eq!(table["snapshots"].as_u64().unwrap(), commits);
    let requests: u64 = table["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["floe.requests"].as_str().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(requests, 8, "every request recorded in a snapshot summary");
}

#[test]
fn rerunning_the_same_input_commits_nothing_twice() {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let f = wh.file("a.ndjson", &events(0..2500));
    let first = wh.ingest("bronze.events", &[&f], &["--batch-size", "1000"]);
    assert_eq!(first["records_committed"], 2500);
    let again = wh.ingest("bronze.events", &[&f], &["--batch-size", "1000"]);
    assert_eq!(again["records_committed"], 0);
    assert_eq!(again["duplicates"], 3);
    assert_eq!(again["commits"], 0);
    let table = wh.read("bronze.events", None);
    assert_eq!(ids(&table), (0..2500).collect::<Vec<_>>());
}

#[test]
fn bad_records_are_reported_and_dead_lettered_while_good_ones_commit() {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let mut lines: Vec<String> = events(0..10).lines().map(str::to_owned).collect();
    lines[2] = r#"{"id":"two","info":"id is a string"}"#.into();
    lines[5] = r#"{"user_id":5}"#.into();
    lines[7] = r#"{"id":7,"ts":"yesterday"}"#.into();
    lines.insert(8, "not json at all".into());
    let f = wh.file("mixed.ndjson", &(lines.join("\n") + "\n"));
    // With evolution off, a record missing a required field is rejected rather
    // than the column relaxed.
    let fixed = wh.file("fixed.toml", "[defaults]\nevolution = false\n");
    let report = wh.ingest(
        "bronze.events",
        &[&f],
        &["--config", fixed.to_str().unwrap()],
    );

    assert_eq!(report["records_committed"], 7);
    assert_eq!(report["rejected"], 4);
    let rejected = report["rejected_records"].as_array().unwrap();
    let summary: Vec<(String, String)> = rejected
        .iter()
        .map(|r| {
            (
                r["position"].as_str().unwrap().to_string(),
                r["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("line 3".to_string(), "id".to_string()),
            ("line 6".to_string(), "id".to_string()),
            ("line 8".to_string(), "ts".to_string()),
            ("line 9".to_string(), String::new()),
        ]
    );
    for r in rejected {
        assert_eq!(r["table"], "bronze.events");
        assert!(!r["reason"].as_str().unwrap().is_empty());
    }

    // The dead letters are durable NDJSON with the same facts and the raw record.
    let locations = report["dead_letter_locations"].as_array().unwrap();
    assert_eq!(locations.len(), 1);
    let path = locations[0].as_str().unwrap().trim_start_matches("file://");
    let dead: Vec<serde_json::Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(dead.len(), 4);
    assert_eq!(dead[3]["record"], "not json at all");

    let table = wh.read("bronze.events", None);
    assert_eq!(ids(&table), vec![0, 1, 3, 4, 6, 8, 9]);
}

#[test]
fn table_show_reports_schema_snapshots_and_records_per_commit() {
    let wh = Warehouse::new();
    wh.create_table(
        "bronze.events",
        EVENT_SCHEMA,
        &["--property", "commit.retry.num-retries=7"],
    );
    let f = wh.file("a.ndjson", &events(0..300));
    wh.ingest("bronze.events", &[&f], &["--batch-size", "100"]);
    let shown: serde_json::Value =
        serde_json::from_str(&wh.floe(&["table", "show", "bronze.events", "--json"])).unwrap();
    assert_eq!(shown["records"], 300);
    assert_eq!(
        shown["properties"]["write.parquet.compression-codec"],
        "zstd"
    );
    assert_eq!(shown["properties"]["commit.retry.num-retries"], "7");
    assert_eq!(shown["schema"]["fields"].as_array().unwrap().len(), 6);
    let snaps = shown["snapshots"].as_array().unwrap();
    assert!(!snaps.is_empty());
    let requests: u64 = snaps
        .iter()
        .map(|s| {
            s["summary"]["floe.requests"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(requests, 3);
    let text = wh.floe(&["table", "show", "bronze.events"]);
    assert!(text.contains("contents  300 rows"), "{text}");
}

#[test]
fn missing_table_and_bad_names_fail_with_the_fix() {
    let wh = Warehouse::new();
    let f = wh.file("a.ndjson", &events(0..1));
    let out = wh.floe_env(&["ingest", "bronze.nope", f.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bronze.nope does not exist"), "{err}");
    assert!(err.contains("floe table create"), "{err}");
    let out = wh.floe_env(&["ingest", "../x", f.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid table name"));
}

#[test]
fn every_type_round_trips_exactly_through_pyiceberg() {
    let wh = Warehouse::new();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let schema = std::fs::read_to_string(data.join("all_types.schema.json")).unwrap();
    wh.create_table("silver.all_types", &schema, &[]);
    // Evolution off: the unknown `extra` field of record 4 is ignored, not added.
    let fixed = wh.file("fixed.toml", "[defaults]\nevolution = false\n");
    let report = wh.ingest(
        "silver.all_types",
        &[&data.join("all_types.ndjson")],
        &["--config", fixed.to_str().unwrap()],
    );
    assert_eq!(report["rejected"], 0, "{report}");
    assert_eq!(report["records_committed"], 4);

    let table = wh.read_raw("silver.all_types", Some("id"));
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("all_types.expected.json")).unwrap(),
    )
    .unwrap();
    let rows = table["rows"].as_array().unwrap();
    let expected = expected.as_array().unwrap();
    assert_eq!(rows.len(), expected.len());
    let raw = table["raw_rows"].as_array().unwrap();
    for ((got, raw), want) in rows.iter().zip(raw).zip(expected) {
        for (col, value) in want.as_object().unwrap() {
            // pyiceberg 0.12 reads a null list<struct> back as [] (its projection
            // rebuilds struct lists from offsets alone); pyarrow reading the
            // data file itself shows what floe wrote.
            let got = if col == "points" { raw } else { got };
            assert_eq!(&got[col], value, "row id {} column {col}", want["id"]);
        }
    }
}

#[test]
fn partitioned_tables_get_one_file_per_partition_under_its_path() {
    let wh = Warehouse::new();
    wh.create_table(
        "silver.events",
        EVENT_SCHEMA,
        &["--partition", "day(ts)", "--partition", "bucket(4, id)"],
    );
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"event_type\":\"e{}\",\"ts\":\"2026-11-{:02}T12:00:00Z\"}}\n",
                i % 3,
                1 + i % 3
            )
        })
        .collect();
    let f = wh.file("p.ndjson", &lines);
    let report = wh.ingest("silver.events", &[&f], &["--batch-size", "1000"]);
    assert_eq!(report["records_committed"], 400);

    let table = wh.read("silver.events", None);
    assert_eq!(ids(&table), (0..400).collect::<Vec<_>>());
    let files: Vec<&str> = table["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    // 3 days x 4 buckets, each its own file under ts_day=.../id_bucket_4=...
    assert_eq!(files.len(), 12, "{files:?}");
    for day in ["2026-11-01", "2026-11-02", "2026-11-03"] {
        let n = files
            .iter()
            .filter(|f| f.contains(&format!("/data/ts_day={day}/id_bucket_4=")))
            .count();
        assert_eq!(n, 4, "files for {day}: {files:?}");
    }
    assert_eq!(
        table["file_records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .sum::<u64>(),
        400
    );
}

#[test]
fn target_file_size_rolls_files_and_codec_property_is_honoured() {
    let wh = Warehouse::new();
    wh.create_table(
        "bronze.events",
        EVENT_SCHEMA,
        &[
            "--property",
            "write.target-file-size-bytes=65536",
            "--property",
            "write.parquet.compression-codec=snappy",
        ],
    );
    let f = wh.file("a.ndjson", &events(0..100_000));
    let report = wh.ingest("bronze.events", &[&f], &["--batch-size", "100000"]);
    assert_eq!(report["requests"], 1);
    let files = report["data_files"].as_u64().unwrap();
    assert!(
        files > 1,
        "a 100k-record batch over a 64 KiB target wrote {files} file(s)"
    );
    let table = wh.read("bronze.events", None);
    assert_eq!(table["count"], 100_000);
    for path in table["files"].as_array().unwrap() {
        let path = path.as_str().unwrap().trim_start_matches("file://");
        let codecs = parquet_codecs(path);
        assert!(codecs.iter().all(|c| c == "SNAPPY"), "{path}: {codecs:?}");
    }
}

/// Column-chunk codecs of a Parquet file, read by pyarrow.
fn parquet_codecs(path: &str) -> Vec<String> {
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys,pyarrow.parquet as pq\nm=pq.ParquetFile(sys.argv[1]).metadata\nprint('\\n'.join(m.row_group(r).column(c).compression for r in range(m.num_row_groups) for c in range(m.num_columns)))",
            path,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
