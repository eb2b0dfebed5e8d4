//! Files and stdin across reruns of the real `floe ingest`, against a model:
//! a file that grows, is rewritten (sharing a long prefix with what it was,
//! or none), gets a last line written in two goes, and a run that crashes
//! at a fault point and is rerun after the file grew further. Every
//! complete line of each version of the input is in the table once; an
//! unfinished line is never consumed. Read back with pyiceberg.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{EVENT_SCHEMA, Warehouse, events};
use serde_json::Value;

const KV_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

/// Fault points a run may crash at (`FLOE_FAULT`).
const FAULTS: [&str; 4] = [
    "after_upload@2",
    "after_enqueue@1",
    "catalog_swap@1",
    "after_commit@1",
];

/// A small deterministic generator, so a failing seed reruns the same.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Runs `floe ingest TABLE -` with `stdin` as its input, or `file`.
fn ingest(
    wh: &Warehouse,
    table: &str,
    file: Option<&Path>,
    stdin: &[u8],
    extra: &[&str],
    env: &[(&str, &str)],
) -> (bool, Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
    cmd.args(["ingest", table, "--json"])
        .arg(file.map_or("-".to_string(), |p| p.display().to_string()))
        .args(extra)
        .env("FLOE_WAREHOUSE", wh.path())
        .env_remove("FLOE_FAULT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run floe");
    let mut input = child.stdin.take().expect("stdin");
    // A run that crashes early may not read it all.
    let _ = input.write_all(if file.is_some() { b"" } else { stdin });
    drop(input);
    let out = child.wait_with_output().expect("floe output");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        report,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The input as it evolves, and what the table must hold from it.
struct Model {
    /// Its content: whole lines, then maybe an unfinished one.
    text: String,
    /// Complete lines of the current version already in the table.
    committed: usize,
    /// Ids the table must hold, with repeats (a rewrite that starts as the
    /// last version did is a new source, its lines new records).
    want: Vec<u64>,
    next_id: u64,
    /// Whether lines are written in two goes (a file; on stdin the input's
    /// end ends its last line, so half a line is a broken record).
    fragments: bool,
}

impl Model {
    fn lines(&self) -> Vec<&str> {
        let whole = self.text.rfind('\n').map_or(0, |p| p + 1);
        self.text[..whole].lines().collect()
    }

    fn fresh(&mut self, n: u64) -> String {
        let text = events(self.next_id..self.next_id + n);
        self.next_id += n;
        text
    }

    /// What a run that finished commits: the complete lines not yet in.
    fn settle(&mut self) {
        let lines = self.lines();
        let ids: Vec<u64> = lines[self.committed..]
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("a model line");
                v["id"].as_u64().expect("id")
            })
            .collect();
        self.committed = lines.len();
        self.want.extend(ids);
    }

    /// Finishes an unfinished last line, or appends `n` new lines.
    fn grow(&mut self, rng: &mut Rng) {
        if let Some(p) = self.text.rfind('\n').map(|p| p + 1)
            && p < self.text.len()
        {
            let rest = self.text.split_off(p);
            let line = self.fresh(1);
            assert!(line.starts_with(&rest));
            self.text.push_str(&line);
            return;
        }
        let n = 1 + rng.below(400);
        let more = self.fresh(n);
        self.text.push_str(&more);
        if self.fragments && rng.below(3) == 0 {
            // A line being written: its first half now, the rest later.
            let line = events(self.next_id..self.next_id + 1);
            self.text.push_str(&line[..line.len() / 2]);
        }
    }

    /// Rewrites the input: keeps its first `keep` lines (a new export that
    /// starts as the last one did), then new lines.
    fn rewrite(&mut self, rng: &mut Rng) {
        let lines = self.lines();
        let keep = rng.below(lines.len() as u64 + 1) as usize;
        let mut text: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
        let n = 1 + rng.below(300);
        text.push_str(&self.fresh(n));
        self.text = text;
        self.committed = 0;
    }
}

/// The table's ids as pyiceberg reads them, sorted, repeats kept.
fn table_ids(wh: &Warehouse, table: &str) -> Vec<u64> {
    common::ids(&wh.read(table, None))
}

/// One seeded schedule on a file (or stdin): grows, rewrites, unfinished
/// lines, crashes at a fault point followed by more growth before the rerun.
fn schedule(seed: u64, stdin: bool) {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut m = Model {
        text: String::new(),
        committed: 0,
        want: Vec::new(),
        next_id: 0,
        fragments: !stdin,
    };
    let path = wh.path().join("_inputs").join("export.ndjson");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut log = Vec::new();
    m.grow(&mut rng);
    for step in 0..8 {
        std::fs::write(&path, &m.text).unwrap();
        let batch = (20 + rng.below(200)).to_string();
        let extra = ["--batch-size", batch.as_str(), "--commit-window-ms", "0"];
        let file = (!stdin).then_some(path.as_path());
        let crash = rng.below(3) == 0;
        if crash {
            let fault = FAULTS[rng.below(FAULTS.len() as u64) as usize];
            log.push(format!("step {step}: crash at {fault}"));
            let (ok, _, _) = ingest(
                &wh,
                "t.a",
                file,
                m.text.as_bytes(),
                &extra,
                &[("FLOE_FAULT", fault)],
            );
            if !ok {
                // The file grows before the rerun finds it.
                m.grow(&mut rng);
                std::fs::write(&path, &m.text).unwrap();
                log.push(format!("step {step}: grew to {} bytes", m.text.len()));
            }
        }
        let (ok, report, stderr) = ingest(&wh, "t.a", file, m.text.as_bytes(), &extra, &[]);
        assert!(ok, "seed {seed} {log:?}: {stderr}");
        let unfinished = report["unfinished"].as_array().map_or(0, Vec::len);
        let held = !stdin && !m.text.ends_with('\n') && !m.text.is_empty();
        assert_eq!(
            unfinished,
            usize::from(held),
            "seed {seed} {log:?}: {report}"
        );
        assert!(
            report["rejected"] == 0,
            "seed {seed} {log:?}: an unfinished line was dead-lettered: {report}"
        );
        m.settle();
        log.push(format!(
            "step {step}: {} lines, want {}",
            m.committed,
            m.want.len()
        ));
        if rng.below(3) == 0 {
            m.rewrite(&mut rng);
            log.push(format!("step {step}: rewritten"));
        } else {
            m.grow(&mut rng);
        }
    }
    let mut want = m.want.clone();
    want.sort_unstable();
    let got = table_ids(&wh, "t.a");
    assert_eq!(got.len(), want.len(), "seed {seed} {log:?}");
    assert_eq!(got, want, "seed {seed} {log:?}");
}

#[test]
fn files_that_grow_are_rewritten_and_crash_commit_each_line_of_each_version_once() {
    for seed in 1..=6 {
        schedule(seed, false);
    }
}

#[test]
fn stdin_reruns_continue_what_they_share_and_commit_what_is_new() {
    for seed in 11..=13 {
        schedule(seed, true);
    }
}

#[test]
fn a_small_file_that_grew_commits_only_its_new_lines() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    let f = wh.file("small.ndjson", &events(0..10));
    assert_eq!(wh.ingest("t.a", &[&f], &[])["records_committed"], 10);
    let f = wh.file("small.ndjson", &events(0..15));
    let again = wh.ingest("t.a", &[&f], &[]);
    assert_eq!(again["records_committed"], 5, "{again}");
    assert_eq!(table_ids(&wh, "t.a"), (0..15).collect::<Vec<_>>());
}

#[test]
fn a_new_export_with_the_same_first_64_kib_commits_its_new_records() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    // ~150 bytes a line: the first 600 lines are over 64 KiB.
    let day1 = events(0..1000);
    let f = wh.file("export.ndjson", &day1);
    wh.ingest("t.a", &[&f], &[]);
    let same_start = format!("{}{}", events(0..600), events(2000..2010));
    assert_eq!(day1.as_bytes()[..65536], same_start.as_bytes()[..65536]);
    let f = wh.file("export.ndjson", &same_start);
    let r = wh.ingest("t.a", &[&f], &[]);
    assert_eq!(r["records_committed"], 610, "{r}");
    let (ok, r, err) = ingest(&wh, "t.a", None, same_start.as_bytes(), &[], &[]);
    assert!(ok, "{err}");
    assert_eq!(r["records_committed"], 610, "{r}");
    let (ok, r, err) = ingest(&wh, "t.a", None, same_start.as_bytes(), &[], &[]);
    assert!(ok, "{err}");
    assert_eq!(r["records_committed"], 0, "the same stdin again: {r}");
    // Another export on stdin, then the first one retried: only the
    // retry's new lines commit.
    let other = events(3000..3005);
    let (ok, r, err) = ingest(&wh, "t.a", None, other.as_bytes(), &[], &[]);
    assert!(ok, "{err}");
    assert_eq!(r["records_committed"], 5, "{r}");
    let retried = format!("{same_start}{}", events(4000..4002));
    let (ok, r, err) = ingest(&wh, "t.a", None, retried.as_bytes(), &[], &[]);
    assert!(ok, "{err}");
    assert_eq!(
        r["records_committed"], 2,
        "a retry of the first export after another: {r}"
    );
    let ids = table_ids(&wh, "t.a");
    assert_eq!(ids.len(), 1000 + 610 + 610 + 5 + 2);
    assert_eq!(ids.iter().filter(|i| **i >= 2000).count(), 20 + 5 + 2);
}

#[test]
fn an_unfinished_last_line_waits_for_its_end() {
    let wh = Warehouse::new();
    wh.create_table("t.a", EVENT_SCHEMA, &[]);
    let whole = events(0..4);
    let cut = whole.len() - 40;
    let f = wh.file("growing.log", &whole[..cut]);
    let r = wh.ingest("t.a", &[&f], &[]);
    assert_eq!(r["records_committed"], 3, "{r}");
    assert_eq!(r["rejected"], 0, "{r}");
    assert_eq!(
        r["unfinished"][0]["bytes"],
        whole[..cut].len() - events(0..3).len()
    );
    let f = wh.file("growing.log", &format!("{whole}{}", events(4..5)));
    let r = wh.ingest("t.a", &[&f], &[]);
    assert_eq!(r["records_committed"], 2, "{r}");
    assert_eq!(r["unfinished"], serde_json::json!([]), "{r}");
    assert_eq!(table_ids(&wh, "t.a"), (0..5).collect::<Vec<_>>());
    let dlq = wh.path().join("_floe").join("dlq");
    assert!(!dlq.exists(), "nothing dead-lettered");
}

#[test]
fn a_keyed_file_rerun_long_after_keeps_newer_values() {
    let wh = Warehouse::new();
    wh.create_table("t.kv", KV_SCHEMA, &[]);
    let f = wh.file(
        "f.ndjson",
        "{\"id\":1,\"v\":\"f\"}\n{\"id\":2,\"v\":\"f\"}\n",
    );
    let g = wh.file("g.ndjson", "{\"id\":1,\"v\":\"g\"}\n");
    wh.ingest("t.kv", &[&f], &[]);
    wh.ingest("t.kv", &[&g], &[]);
    let f = wh.file(
        "f.ndjson",
        "{\"id\":1,\"v\":\"f\"}\n{\"id\":2,\"v\":\"f\"}\n{\"id\":3,\"v\":\"f\"}\n",
    );
    let later = wh.floe_env(
        &["ingest", "t.kv", "--json", f.to_str().unwrap()],
        &[("FLOE_CLOCK_SHIFT_MS", "130000")],
    );
    assert!(
        later.status.success(),
        "{}",
        String::from_utf8_lossy(&later.stderr)
    );
    let r: Value = serde_json::from_slice(&later.stdout).unwrap();
    assert_eq!(r["records_committed"], 1, "{r}");
    let read = wh.read("t.kv", Some("id"));
    let rows: Vec<(u64, String)> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["v"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![(1, "g".into()), (2, "f".into()), (3, "f".into())]
    );
}
