//! Crash the real `floe` process at each step of the pipeline, rerun the same
//! input, and check with pyiceberg that the table holds every row exactly once.

mod common;

use common::{EVENT_SCHEMA, Warehouse, events, ids};
use serde_json::Value;

/// Crashes the `nth` time `point` is reached, then reruns without faults.
/// Writer points crash on the second batch, so one batch got further than the
/// other; committer points on the first commit, since all six batches may
/// coalesce into one.
fn crash_then_retry(point: &str, nth: u32) {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let a = wh.file("a.ndjson", &events(0..1500));
    let b = wh.file("b.ndjson", &events(1500..3000));
    let args = [
        "ingest",
        "bronze.events",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--batch-size",
        "500",
        "--writers",
        "2",
        "--commit-window-ms",
        "0",
    ];
    let fault = format!("{point}@{nth}");
    let crashed = wh.floe_env(&args, &[("FLOE_FAULT", &fault)]);
    assert!(
        !crashed.status.success(),
        "{point}: the injected crash did not stop floe"
    );
    assert!(
        String::from_utf8_lossy(&crashed.stderr).contains(&format!("injected crash at {point}")),
        "{point}: {}",
        String::from_utf8_lossy(&crashed.stderr)
    );

    let retry = wh.floe_env(&args, &[]);
    assert!(
        retry.status.success(),
        "{}",
        String::from_utf8_lossy(&retry.stderr)
    );

    let table = wh.read("bronze.events", None);
    assert_eq!(table["count"], 3000, "{point}: row count after retry");
    assert_eq!(
        ids(&table),
        (0..3000).collect::<Vec<_>>(),
        "{point}: ids lost or doubled"
    );
}

#[test]
fn crash_after_upload_then_retry_is_exact() {
    crash_then_retry("after_upload", 2);
}

#[test]
fn crash_after_enqueue_then_retry_is_exact() {
    crash_then_retry("after_enqueue", 2);
}

#[test]
fn crash_inside_catalog_commit_then_retry_is_exact() {
    crash_then_retry("catalog_swap", 1);
}

#[test]
fn crash_after_catalog_swap_with_lost_answer_then_retry_is_exact() {
    crash_then_retry("catalog_ambiguous", 1);
}

#[test]
fn crash_after_commit_before_ack_then_retry_is_exact() {
    crash_then_retry("after_commit", 1);
}

/// A crash between writing the ledger head and the catalog swap leaves a
/// head no commit named; `floe ledger repair` (the ledger is intact, so a
/// user runs it needlessly, perhaps twice) must not trust it, or the rerun
/// skips the crashed batch's records as committed.
#[test]
fn repair_after_a_crash_before_the_swap_trusts_only_named_heads() {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let a = wh.file("a.ndjson", &events(0..10));
    let b = wh.file("b.ndjson", &events(10..20));
    wh.ingest("bronze.events", &[&a], &[]);
    let args = ["ingest", "bronze.events", b.to_str().unwrap()];
    let crashed = wh.floe_env(&args, &[("FLOE_FAULT", "catalog_swap:crash@1")]);
    assert!(
        !crashed.status.success(),
        "the injected crash did not stop floe"
    );
    for _ in 0..2 {
        let repaired = wh.floe(&["ledger", "repair", "bronze.events"]);
        assert!(repaired.contains("rebuilt from"), "{repaired}");
    }
    let rerun = wh.ingest("bronze.events", &[&b], &[]);
    assert_eq!(rerun["records_committed"], 10, "{rerun}");
    let table = wh.read("bronze.events", None);
    assert_eq!(ids(&table), (0..20).collect::<Vec<_>>());
    // And once more: now everything is a duplicate.
    let again = wh.ingest("bronze.events", &[&a, &b], &[]);
    assert_eq!(again["records_committed"], 0, "{again}");
    assert_eq!(wh.read("bronze.events", None)["count"], 20);
}

/// Another engine rolls the table back past floe's last commit (pyiceberg's
/// `rollback_to_snapshot`, as a user undoing a bad batch does): the
/// ledger follows main's history, so sending the undone input again
/// commits it, and what the rollback kept stays exactly once. Also when
/// `floe ledger repair` ran just before the rollback (a repaired head has
/// no snapshot of its own), and when maintenance expires the undone
/// snapshot before the input is sent again (maintain settles the ledger on
/// the table's history first): the product harness found both, the resent
/// input skipped as a duplicate.
#[test]
fn after_another_engines_rollback_the_undone_input_commits_again() {
    for (repair, maintain) in [(false, false), (true, false), (false, true)] {
        let wh = Warehouse::new();
        wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
        let a = wh.file("a.ndjson", &events(0..10));
        let b = wh.file("b.ndjson", &events(10..20));
        wh.ingest("bronze.events", &[&a], &[]);
        wh.ingest("bronze.events", &[&b], &[]);
        if repair {
            wh.floe(&["ledger", "repair", "bronze.events"]);
        }
        roll_back_one(&wh);
        assert_eq!(
            ids(&wh.read("bronze.events", None)),
            (0..10).collect::<Vec<_>>()
        );
        if maintain {
            wh.floe(&["maintain", "bronze.events", "--max-snapshots", "1"]);
        }
        let resent = wh.ingest("bronze.events", &[&a, &b], &[]);
        assert_eq!(
            resent["records_committed"], 10,
            "repair {repair}, maintain {maintain}: {resent}"
        );
        assert_eq!(
            ids(&wh.read("bronze.events", None)),
            (0..20).collect::<Vec<_>>()
        );
        let again = wh.ingest("bronze.events", &[&a, &b], &[]);
        assert_eq!(again["records_committed"], 0, "{again}");
    }
}

/// Another engine rolls the table back to a compaction whose ancestors
/// maintenance expired: the compaction names the ledger head the table had,
/// so what the table holds is still known (resending it commits nothing)
/// and only what the rollback undid commits again. The product harness
/// found it under load: the compaction's snapshot named no head, the ledger
/// rebuilt from main's history was empty, and a resent input went in twice.
#[test]
fn a_rollback_to_a_compaction_keeps_what_the_table_holds() {
    let wh = Warehouse::new();
    wh.create_table("bronze.events", EVENT_SCHEMA, &[]);
    let parts: Vec<_> = (0..3u64)
        .map(|p| wh.file(&format!("p{p}.ndjson"), &events(p * 10..p * 10 + 10)))
        .collect();
    for p in &parts {
        wh.ingest("bronze.events", &[p], &[]);
    }
    let maintained = wh.floe(&[
        "maintain",
        "bronze.events",
        "--max-snapshots",
        "1",
        "--json",
    ]);
    let show: Value =
        serde_json::from_str(&wh.floe(&["table", "show", "bronze.events", "--json"])).unwrap();
    let snapshots = show["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 1, "{maintained}");
    assert_eq!(
        snapshots[0]["summary"]["operation"], "replace",
        "{maintained}"
    );
    let late = wh.file("late.ndjson", &events(30..40));
    wh.ingest("bronze.events", &[&late], &[]);
    roll_back_one(&wh);
    assert_eq!(
        ids(&wh.read("bronze.events", None)),
        (0..30).collect::<Vec<_>>()
    );
    let mut all: Vec<&std::path::Path> = parts.iter().map(|p| p.as_path()).collect();
    all.push(&late);
    let resent = wh.ingest("bronze.events", &all, &[]);
    assert_eq!(resent["records_committed"], 10, "{resent}");
    assert_eq!(
        ids(&wh.read("bronze.events", None)),
        (0..40).collect::<Vec<_>>()
    );
}

/// pyiceberg rolls `bronze.events` back to its current snapshot's parent.
fn roll_back_one(wh: &Warehouse) {
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         c = SqlCatalog('floe', uri='sqlite:///{w}/catalog.db', warehouse='file://{w}')\n\
         t = c.load_table('bronze.events')\n\
         parent = t.current_snapshot().parent_snapshot_id\n\
         t.manage_snapshots().rollback_to_snapshot(parent).commit()\n",
        w = wh.path().display()
    );
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .expect("run pyiceberg");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
