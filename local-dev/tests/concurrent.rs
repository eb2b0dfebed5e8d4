//! Several `floe ingest` processes and `floe maintain` on one warehouse at
//! once, as a user's cron jobs overlap: no job fails because another moved
//! the table on (a ledger head or segment retired under a process that had
//! just loaded the table), no run loses another's input checkpoint, and
//! every record is in the table once.

mod common;

use std::process::{Command, Stdio};

use common::{EVENT_SCHEMA, Warehouse, events, ids};

#[test]
fn concurrent_ingests_and_maintenance_never_fail_and_commit_every_record_once() {
    let wh = Warehouse::new();
    wh.create_table(
        "raw.busy",
        EVENT_SCHEMA,
        // Seal often, so heads, segments and merges retire under the others.
        &["--property", "floe.ledger.seal-entries=2"],
    );
    let files: Vec<_> = (0..3u64)
        .map(|i| {
            wh.file(
                &format!("part-{i}.ndjson"),
                &events(i * 3_000..(i + 1) * 3_000),
            )
        })
        .collect();
    let spawn = |args: Vec<String>| {
        Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(&args)
            .env("FLOE_WAREHOUSE", wh.path())
            .env_remove("FLOE_FAULT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn floe")
    };
    for round in 0..2 {
        let mut jobs: Vec<_> = files
            .iter()
            .map(|f| {
                spawn(vec![
                    "ingest".into(),
                    "raw.busy".into(),
                    f.display().to_string(),
                    "--batch-size".into(),
                    "250".into(),
                    "--writers".into(),
                    "1".into(),
                    "--commit-window-ms".into(),
                    "0".into(),
                ])
            })
            .collect();
        for _ in 0..3 {
            jobs.push(spawn(vec![
                "maintain".into(),
                "raw.busy".into(),
                "--max-snapshot-age-ms".into(),
                "0".into(),
            ]));
        }
        for job in jobs {
            let out = job.wait_with_output().expect("wait for floe");
            assert!(
                out.status.success(),
                "round {round}: a job failed: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let table = wh.read("raw.busy", Some("id"));
    assert_eq!(
        ids(&table),
        (0..9_000).collect::<Vec<_>>(),
        "every record once, after a rerun of every file too"
    );
}

/// Stdin pipelines into several tables of one warehouse at once share the
/// warehouse's checkpoint of `stdin`: each must keep the others' versions,
/// or a retry of one reads as a new source and commits its records again.
#[test]
fn concurrent_stdin_runs_keep_each_others_checkpoints() {
    use std::io::Write;
    let wh = Warehouse::new();
    let tables: Vec<(String, u64)> = (0..4u64)
        .map(|i| (format!("raw.t{i}"), i * 1_000))
        .collect();
    for (t, _) in &tables {
        wh.create_table(t, EVENT_SCHEMA, &[]);
    }
    let run = |table: &str, text: String| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["ingest", table, "-"])
            .env("FLOE_WAREHOUSE", wh.path())
            .env_remove("FLOE_FAULT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn floe");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        (child, writer)
    };
    for round in 0..5 {
        let jobs: Vec<_> = tables
            .iter()
            .map(|(t, first)| run(t, events(*first..first + 10)))
            .collect();
        for (child, writer) in jobs {
            writer.join().unwrap().expect("write stdin");
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for (table, first) in &tables {
            assert_eq!(
                ids(&wh.read(table, None)),
                (*first..first + 10).collect::<Vec<_>>(),
                "round {round}: {table}"
            );
        }
    }
}
