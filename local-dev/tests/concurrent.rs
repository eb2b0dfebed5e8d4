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

/// Two stdin pipelines into two tables of one warehouse at once share the
/// warehouse's checkpoint of `stdin`: each must keep the other's version,
/// or a retry of one reads as a new source and commits its records again.
#[test]
fn concurrent_stdin_runs_keep_each_others_checkpoints() {
    use std::io::Write;
    let wh = Warehouse::new();
    for t in ["raw.left", "raw.right"] {
        wh.create_table(t, EVENT_SCHEMA, &[]);
    }
    let inputs = [
        ("raw.left", events(0..20_000)),
        ("raw.right", events(50_000..70_000)),
    ];
    let run = |table: &str, text: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .args(["ingest", table, "-", "--batch-size", "1000"])
            .env("FLOE_WAREHOUSE", wh.path())
            .env_remove("FLOE_FAULT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn floe");
        let mut stdin = child.stdin.take().expect("stdin");
        let text = text.to_string();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        (child, writer)
    };
    for round in 0..3 {
        let jobs: Vec<_> = inputs.iter().map(|(t, text)| run(t, text)).collect();
        for (child, writer) in jobs {
            writer.join().unwrap().expect("write stdin");
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for (table, first) in [("raw.left", 0), ("raw.right", 50_000)] {
            assert_eq!(
                ids(&wh.read(table, None)),
                (first..first + 20_000).collect::<Vec<_>>(),
                "round {round}: {table}"
            );
        }
    }
}
