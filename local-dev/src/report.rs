//! Printing an ingest report for people (text) or scripts (`--json`), and
//! the exit code a script reads from it.

use std::process::ExitCode;

use floe_core::embedded::IngestReport;
use serde_json::json;

use crate::out::outln;

/// Rejected records listed in text output before "... and N more".
const SHOWN_REJECTS: usize = 20;

/// Exit code: some records were rejected (dead-lettered), the others are in
/// the table (or, with `--via-queue`, queued for it).
pub const EXIT_PARTIAL: u8 = 3;
/// Exit code: records were read and every one was rejected.
pub const EXIT_NOTHING_COMMITTED: u8 = 4;

/// Where a run's requests went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Committed by this process: the report counts commits.
    Committed,
    /// Sent to the deployment's commit queue (`--via-queue`): its committer
    /// commits them later, so this run commits nothing itself.
    Queued,
}

/// The exit code for a finished run: 0 when every record read is in the
/// table (now or from an earlier run), [`EXIT_PARTIAL`] when some were
/// rejected (0 with `allow_partial`), [`EXIT_NOTHING_COMMITTED`] when all were.
pub fn exit_code(r: &IngestReport, allow_partial: bool) -> ExitCode {
    let rejected = r.rejected.len() as u64;
    if rejected == 0 {
        ExitCode::SUCCESS
    } else if rejected >= r.records_in {
        eprintln!(
            "floe: nothing committed: all {rejected} records were rejected (exit {EXIT_NOTHING_COMMITTED})"
        );
        ExitCode::from(EXIT_NOTHING_COMMITTED)
    } else if allow_partial {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "floe: {rejected} of {} records rejected, the rest committed (exit {EXIT_PARTIAL}; --allow-partial exits 0)",
            r.records_in
        );
        ExitCode::from(EXIT_PARTIAL)
    }
}

/// Prints the report.
pub fn print(table: &str, r: &IngestReport, delivery: Delivery, as_json: bool) {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let per_commit = r.records_committed.checked_div(r.commits).unwrap_or(0);
    if as_json {
        let out = json!({
            "table": table,
            "queued": delivery == Delivery::Queued,
            "records_in": r.records_in,
            "records_written": r.records_written,
            "records_committed": r.records_committed,
            "rejected": r.rejected.len(),
            "rejected_records": r.rejected,
            "dead_letter_locations": r.dead_letter_locations,
            "data_files": r.data_files,
            "requests": r.requests,
            "commits": r.commits,
            "snapshots": r.snapshots,
            "duplicates": r.duplicates,
            "unfinished": r.unfinished.iter().map(|u| json!({"input": u.source, "bytes": u.bytes})).collect::<Vec<_>>(),
            "created": r.created,
            "evolved": r.evolved,
            "records_per_commit": per_commit,
            "seconds": secs,
            "records_per_second": r.records_in as f64 / secs,
        });
        outln!("{out}");
        return;
    }
    outln!(
        "{table}: {} records in {:.2}s ({:.0} records/s)",
        r.records_in,
        secs,
        r.records_in as f64 / secs
    );
    outln!(
        "  committed {} records in {} commits ({} records/commit) from {} requests, {} data files",
        r.records_committed,
        r.commits,
        per_commit,
        r.requests,
        r.data_files
    );
    for t in &r.created {
        outln!("  created table {t}");
    }
    for c in &r.evolved {
        outln!("  schema: {c}");
    }
    if r.duplicates > 0 {
        outln!(
            "  {} batches were already in the table (same input as an earlier run) and were skipped",
            r.duplicates
        );
    }
    for u in &r.unfinished {
        outln!(
            "  {}: its last line ({} bytes) has no newline yet; a later run reads it once it is finished",
            u.source,
            u.bytes
        );
    }
    if !r.rejected.is_empty() {
        outln!("  rejected {} records:", r.rejected.len());
        for rej in r.rejected.iter().take(SHOWN_REJECTS) {
            let field = if rej.field.is_empty() {
                String::new()
            } else {
                format!(" field `{}`:", rej.field)
            };
            outln!("    {} {}:{field} {}", rej.source, rej.position, rej.reason);
        }
        if r.rejected.len() > SHOWN_REJECTS {
            outln!("    ... and {} more", r.rejected.len() - SHOWN_REJECTS);
        }
        for loc in &r.dead_letter_locations {
            outln!("  dead letters: {loc}");
        }
    }
}
