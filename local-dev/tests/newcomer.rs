//! What a newcomer's first hour runs into (issue 30), each against the real
//! binary: exit codes a script can trust, counts that mean rows, the
//! commands people reach for, and the paper cuts (a closed pipe, a typo in
//! a schema, a JSON array given to `ingest`, local orphan cleanup).

mod common;

use std::io::Read;
use std::process::{Command, Output, Stdio};

use common::Warehouse;
use serde_json::{Value, json};

const KV: &str = r#"{"type":"struct","identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_of(wh: &Warehouse, args: &[&str]) -> Value {
    serde_json::from_str(wh.floe(args).trim()).expect("JSON")
}

#[test]
fn exit_codes_say_whether_every_record_is_in_the_table() {
    let wh = Warehouse::new();
    wh.create_table("silver.kv", KV, &[]);
    let good = wh.file("good.ndjson", "{\"id\":1,\"v\":\"a\"}\n");
    let mixed = wh.file("mixed.ndjson", "{\"id\":2,\"v\":\"b\"}\n{\"id\":\"x\"}\n");
    let bad = wh.file("bad.ndjson", "{\"id\":\"y\"}\n{\"id\":\"z\"}\n");
    let run = |file: &std::path::Path, extra: &[&str]| {
        let path = file.display().to_string();
        let mut args = vec!["ingest", "silver.kv", path.as_str()];
        args.extend(extra);
        wh.floe_env(&args, &[])
    };

    let out = run(&good, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // A rerun commits nothing new, and that is success.
    let out = run(&good, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let out = run(&mixed, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("1 of 2 records rejected, the rest committed (exit 3"),
        "{}",
        text(&out)
    );
    let mixed2 = wh.file("mixed2.ndjson", "{\"id\":3,\"v\":\"c\"}\n{\"id\":\"x\"}\n");
    let out = run(&mixed2, &["--allow-partial"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let out = run(&bad, &["--allow-partial"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(text(&out).contains("nothing committed: all 2 records were rejected"));

    // A replay that rejects everything again says so too.
    let out = wh.floe_env(&["dlq", "replay", "--table", "silver.kv"], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));

    // A JSON array is refused before anything is read, with the fix.
    let array = wh.file("array.json", "[\n  {\"id\": 9}\n]\n");
    let out = run(&array, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("holds a JSON array") && text(&out).contains("jq -c '.[]'"),
        "{}",
        text(&out)
    );
    let table = wh.read("silver.kv", Some("id"));
    assert_eq!(
        table["rows"],
        json!([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}])
    );
}

#[test]
fn counts_are_rows_in_the_table_and_compaction_is_not_ingest() {
    let wh = Warehouse::new();
    wh.create_table("silver.kv", KV, &[]);
    for v in ["a", "b", "c"] {
        let f = wh.file(
            &format!("{v}.ndjson"),
            &format!("{{\"id\":1,\"v\":\"{v}\"}}\n{{\"id\":2,\"v\":\"{v}\"}}\n"),
        );
        wh.ingest("silver.kv", &[&f], &[]);
    }
    let show = json_of(&wh, &["table", "show", "silver.kv", "--json"]);
    assert_eq!(show["rows"], 2, "{show}");
    assert_eq!(show["records"], 6, "{show}");
    assert_eq!(show["deleted_rows"], 4, "{show}");
    assert!(
        wh.floe(&["table", "show", "silver.kv"])
            .contains("contents  2 rows (6 written, 4 deleted)")
    );
    let list = json_of(&wh, &["table", "list", "--json"]);
    assert_eq!(list[0]["table"], "silver.kv", "{list}");
    assert_eq!(list[0]["rows"], 2, "{list}");

    // The dry run reads the deletes the run reads: the same numbers.
    let dry = json_of(&wh, &["maintain", "silver.kv", "--dry-run", "--json"]);
    let run = json_of(&wh, &["maintain", "silver.kv", "--json"]);
    for key in [
        "compacted_files",
        "compacted_rows",
        "compacted_deleted_rows",
    ] {
        assert_eq!(dry[key], run[key], "{key}: {dry} vs {run}");
    }
    assert_eq!(run["compacted_deleted_rows"], 4, "{run}");

    let status = json_of(&wh, &["status", "--json"]);
    let line = &status["tables"][0];
    assert_eq!(line["rows"]["written"], 2, "{status}");
    assert_eq!(line["records"], 6, "ingested, compaction apart: {status}");
    assert_eq!(line["compactions"], 1, "{status}");
    assert_eq!(
        wh.read("silver.kv", Some("id"))["rows"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn table_list_drop_and_dlq_purge() {
    let wh = Warehouse::new();
    wh.create_table("raw.a", KV, &[]);
    wh.create_table("raw.b", KV, &[]);
    let bad = wh.file("bad.ndjson", "{\"id\":1}\n{\"id\":\"x\"}\n");
    wh.floe(&[
        "ingest",
        "raw.a",
        &bad.display().to_string(),
        "--allow-partial",
    ]);

    // A filter that matches nothing does not claim the location is empty.
    let out = wh.floe(&["dlq", "list", "--table", "raw.b"]);
    assert!(
        out.contains("no dead letters of raw.b (1 of other tables"),
        "{out}"
    );
    let out = wh.floe(&["status", "--table", "raw.b"]);
    assert!(
        out.contains("no dead letters of raw.b (1 of other tables"),
        "{out}"
    );

    let out = wh.floe(&["dlq", "purge", "--table", "raw.a"]);
    assert!(
        out.contains("purged 1 dead-lettered records in 1 files"),
        "{out}"
    );
    assert!(wh.floe(&["dlq", "list"]).contains("no dead letters under"));

    let location = json_of(&wh, &["table", "show", "raw.b", "--json"])["location"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    wh.floe(&["table", "drop", "raw.b"]);
    assert!(
        std::path::Path::new(&location).join("metadata").exists(),
        "files stay"
    );
    let list = json_of(&wh, &["table", "list", "--json"]);
    assert_eq!(list, json!([list[0].clone()]), "{list}");
    assert_eq!(list[0]["table"], "raw.a");

    let location = json_of(&wh, &["table", "show", "raw.a", "--json"])["location"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    wh.floe(&["table", "drop", "raw.a", "--purge"]);
    assert!(!std::path::Path::new(&location).exists(), "purged");
    assert!(wh.floe(&["table", "list"]).contains("no tables"));
    let out = wh.floe_env(&["table", "show", "raw.a"], &[]);
    assert!(!out.status.success());
}

#[test]
fn help_version_completions_and_a_closed_pipe() {
    let wh = Warehouse::new();
    let help = wh.floe(&["ingest", "--help"]);
    assert!(
        help.contains("Usage: floe ingest [OPTIONS] <NS.TABLE> [FILE]..."),
        "{help}"
    );
    let help = wh.floe(&["--help"]);
    assert!(
        help.contains("Exit codes:") && help.contains("--allow-partial"),
        "{help}"
    );
    let version = wh.floe(&["--version"]);
    assert!(
        version.starts_with("floe ") && version.contains("commit "),
        "{version}"
    );
    let bash = wh.floe(&["completions", "bash"]);
    assert!(
        bash.contains("_floe()") && bash.contains("ingest"),
        "{}",
        &bash[..200]
    );

    // `floe … | head` where head has already gone: a quiet exit, no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["completions", "zsh"])
        .env("FLOE_WAREHOUSE", wh.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_mistyped_schema_type_names_its_field_and_the_likely_type() {
    let wh = Warehouse::new();
    let schema = wh.file(
        "t.schema.json",
        r#"{"type":"struct","fields":[{"id":1,"name":"ts","required":false,"type":"timestamtz"}]}"#,
    );
    let out = wh.floe_env(
        &[
            "table",
            "create",
            "raw.t",
            "--schema",
            &schema.display().to_string(),
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = text(&out);
    assert!(
        err.contains("field `ts`: unknown type `timestamtz` (did you mean `timestamptz`?)"),
        "{err}"
    );
    assert!(!err.contains("untagged enum"), "{err}");
}

/// A local warehouse has no commit queue: any orphan window goes, unless
/// `floe serve`'s spool holds accepted requests (their files are in no table).
#[test]
fn local_orphan_cleanup_needs_no_queue_retention() {
    let wh = Warehouse::new();
    wh.create_table("silver.kv", KV, &[]);
    let feed = |wh: &Warehouse| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["ingest", "silver.kv", "-", "--json"])
            .env("FLOE_WAREHOUSE", wh.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"{\"id\":1,\"v\":\"a\"}\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    feed(&wh);
    // The same stdin again: its batch is already in the table, but its
    // Parquet file was written before the committer dropped it.
    let again = feed(&wh);
    assert_eq!(again["duplicates"], 1, "{again}");

    let spool = wh.path().join("_floe/commit-queue");
    std::fs::create_dir_all(&spool).unwrap();
    std::fs::write(spool.join("0001.json"), "{}").unwrap();
    let out = wh.floe_env(&["maintain", "silver.kv", "--orphan-window-ms", "0"], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("wait in") && text(&out).contains("floe serve"),
        "{}",
        text(&out)
    );
    assert!(
        !text(&out).contains("dlq_retention_seconds"),
        "{}",
        text(&out)
    );
    std::fs::remove_file(spool.join("0001.json")).unwrap();

    let r = json_of(
        &wh,
        &["maintain", "silver.kv", "--orphan-window-ms", "0", "--json"],
    );
    assert_eq!(r["orphans"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(
        wh.read("silver.kv", Some("id"))["rows"],
        json!([{"id": 1, "v": "a"}])
    );
}

/// Runs `floe args` on `warehouse` as a user that may only read it: as root,
/// through `setpriv` as nobody (root reads and writes anything), with a
/// copy of the binary nobody can run.
fn floe_as_reader(bin_dir: &std::path::Path, warehouse: &std::path::Path, args: &[&str]) -> Output {
    let bin = bin_dir.join("floe");
    let mut cmd = if nix_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    cmd.args(args)
        .env("FLOE_WAREHOUSE", warehouse)
        .env("HOME", bin_dir)
        .env_remove("FLOE_FAULT")
        .output()
        .expect("run floe (setpriv from util-linux as root)")
}

fn nix_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A warehouse this process may only read (a read-only mount, another
/// user's files) still lists, shows and reads its tables; what would write
/// fails naming SQLite's read-only error.
#[test]
fn a_read_only_warehouse_lists_and_shows_its_tables() {
    use std::os::unix::fs::PermissionsExt;
    let wh = Warehouse::new();
    let file = wh.path().join("in.ndjson");
    std::fs::write(&file, "{\"id\":1,\"v\":\"a\"}\n{\"id\":2,\"v\":\"b\"}\n").unwrap();
    let file = file.to_str().unwrap();
    wh.floe(&["table", "create", "web.kv", "--infer", file, "--key", "id"]);
    wh.floe(&["ingest", "web.kv", file]);

    let bin = tempfile::tempdir().unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_floe"), bin.path().join("floe")).unwrap();
    let read_only = |mode: u32| {
        for dir in [bin.path(), wh.path()] {
            for entry in walk(dir) {
                let m = if entry.is_dir() { mode | 0o111 } else { mode };
                std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(m)).unwrap();
            }
        }
    };
    read_only(0o444);
    std::fs::set_permissions(
        bin.path().join("floe"),
        std::fs::Permissions::from_mode(0o555),
    )
    .unwrap();
    let list = floe_as_reader(bin.path(), wh.path(), &["table", "list"]);
    let show = floe_as_reader(
        bin.path(),
        wh.path(),
        &["table", "show", "web.kv", "--json"],
    );
    let write = floe_as_reader(bin.path(), wh.path(), &["ingest", "web.kv", file]);
    read_only(0o755);
    assert!(list.status.success(), "{}", text(&list));
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("web.kv"),
        "{}",
        text(&list)
    );
    assert!(show.status.success(), "{}", text(&show));
    let show: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(show["rows"], 2, "{show}");
    assert!(
        !write.status.success(),
        "an ingest cannot write: {}",
        text(&write)
    );
    assert!(
        text(&write).to_lowercase().contains("read"),
        "{}",
        text(&write)
    );
}

/// Every path under `dir`, `dir` itself last.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.push(dir.to_path_buf());
    out
}
