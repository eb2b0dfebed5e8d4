//! Crash the real `floe` process at each step of the pipeline, rerun the same
//! input, and check with pyiceberg that the table holds every row exactly once.

mod common;

use common::{EVENT_SCHEMA, Warehouse, events, ids};

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
