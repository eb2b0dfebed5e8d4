//! Helpers for driving the real `floe` binary and reading its tables back with
//! pyiceberg, an independent Iceberg implementation.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The exit code `floe ingest` and `dlq replay` owe a report (README, "Exit
/// codes"): 0 when nothing was rejected, 4 when everything was, else 3.
pub fn exit_code(report: &Value) -> i32 {
    let rejected = report["rejected"].as_u64().unwrap_or(0);
    match rejected {
        0 => 0,
        n if n >= report["records_in"].as_u64().unwrap_or(0) => 4,
        _ => 3,
    }
}

/// A fresh warehouse directory with helpers around it.
pub struct Warehouse {
    dir: tempfile::TempDir,
}

impl Warehouse {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `floe` with this warehouse and `env`.
    pub fn floe_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
        cmd.args(args)
            .env("FLOE_WAREHOUSE", self.path())
            .env_remove("FLOE_FAULT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run floe")
    }

    /// Runs `floe`, asserting success; returns stdout.
    pub fn floe(&self, args: &[&str]) -> String {
        let out = self.floe_env(args, &[]);
        assert!(
            out.status.success(),
            "floe {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `floe ingest ... --json`, asserting it finished with the exit
    /// code its report calls for; returns the report.
    pub fn ingest(&self, table: &str, files: &[&Path], extra: &[&str]) -> Value {
        let mut args = vec!["ingest", table, "--json"];
        let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        args.extend(files.iter().map(String::as_str));
        args.extend(extra);
        self.report(&args)
    }

    /// Runs an ingest or replay with `--json`; asserts its exit code is the
    /// one its report calls for ([`exit_code`]) and returns the report.
    pub fn report(&self, args: &[&str]) -> Value {
        let out = self.floe_env(args, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "floe {args:?}: no JSON report ({e}): {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let want = if args.contains(&"--allow-partial") && exit_code(&report) == 3 {
            0
        } else {
            exit_code(&report)
        };
        assert_eq!(out.status.code(), Some(want), "floe {args:?}: {report}");
        report
    }

    /// Writes a file in the warehouse's parent temp dir area.
    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let dir = self.path().join("_inputs");
        std::fs::create_dir_all(&dir).expect("inputs dir");
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).expect("create input");
        f.write_all(content.as_bytes()).expect("write input");
        path
    }

    /// Creates a table from a schema JSON string.
    pub fn create_table(&self, table: &str, schema: &str, extra: &[&str]) {
        let schema_path = self.file(&format!("{table}.schema.json"), schema);
        let path = schema_path.display().to_string();
        let mut args = vec!["table", "create", table, "--schema", path.as_str()];
        args.extend(extra);
        self.floe(&args);
    }

    /// Reads the table with pyiceberg.
    pub fn read(&self, table: &str, sort: Option<&str>) -> Value {
        self.read_with(table, sort, &[])
    }

    /// Reads the table with pyiceberg, and its data files with pyarrow (`raw_rows`).
    pub fn read_raw(&self, table: &str, sort: Option<&str>) -> Value {
        self.read_with(table, sort, &["--raw"])
    }

    /// Reads the rows pyiceberg's scan with `COL=VALUE` as its row filter returns,
    /// and (`files`) the data files it planned after partition pruning.
    pub fn read_filtered(&self, table: &str, filter: &str) -> Value {
        self.read_with(table, None, &["--filter", filter])
    }

    fn read_with(&self, table: &str, sort: Option<&str>, extra: &[&str]) -> Value {
        let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/read_table.py");
        let mut cmd = Command::new(&python);
        cmd.arg(&script).arg(self.path()).arg(table);
        if let Some(col) = sort {
            cmd.args(["--sort", col]);
        }
        cmd.args(extra);
        let out = cmd.output().unwrap_or_else(|e| {
            panic!("running {python}: {e}; run ./local-dev/test.sh, which installs pyiceberg")
        });
        assert!(
            out.status.success(),
            "pyiceberg read failed (run ./local-dev/test.sh, which installs pyiceberg): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("reader JSON")
    }
}

/// The conninfo of local-dev/pg.sh's Postgres (wal_level=logical, every
/// local connection trusted), started when not running; `None` with
/// FLOE_PG_SKIP=1.
pub fn pg_cluster() -> Option<String> {
    if std::env::var("FLOE_PG_SKIP").as_deref() == Ok("1") {
        eprintln!("!!! FLOE_PG_SKIP=1: SKIPPING the Postgres end-to-end test !!!");
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/pg.sh");
    let out = Command::new("bash")
        .arg(script)
        .output()
        .expect("run pg.sh");
    assert!(
        out.status.success(),
        "local-dev/pg.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 conninfo");
    Some(text.lines().last().expect("a conninfo").to_string())
}

/// Runs SQL through psql, returning its unaligned output.
pub fn psql(conninfo: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([conninfo, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The 6-field benchmark event schema, with a required id.
pub const EVENT_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"user_id","required":false,"type":"long"},
  {"id":3,"name":"event_type","required":false,"type":"string"},
  {"id":4,"name":"value","required":false,"type":"long"},
  {"id":5,"name":"info","required":false,"type":"string"},
  {"id":6,"name":"ts","required":false,"type":"timestamptz"}]}"#;

/// NDJSON events with ids in `ids`.
pub fn events(ids: std::ops::Range<u64>) -> String {
    let types = ["click", "view", "purchase", "scroll", "hover"];
    ids.map(|i| {
        format!(
            "{{\"id\":{i},\"user_id\":{},\"event_type\":\"{}\",\"value\":{},\"info\":\"event info for record {i}\",\"ts\":\"2026-11-30T10:00:00Z\"}}\n",
            i % 100,
            types[(i % 5) as usize],
            i * 7 % 1000
        )
    })
    .collect()
}

/// The ids column of a read table, sorted.
pub fn ids(table: &Value) -> Vec<u64> {
    let mut ids: Vec<u64> = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_u64().expect("id"))
        .collect();
    ids.sort_unstable();
    ids
}

/// xorshift, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
