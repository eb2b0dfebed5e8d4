//! Printing an ingest report for people (text) or scripts (`--json`).

use floe_core::embedded::IngestReport;
use serde_json::json;

/// Rejected records listed in text output before "... and N more".
const SHOWN_REJECTS: usize = 20;

/// Prints the report.
pub fn print(table: &str, r: &IngestReport, as_json: bool) {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let per_commit = r.records_committed.checked_div(r.commits).unwrap_or(0);
    if as_json {
        let out = json!({
            "table": table,
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
        println!("{out}");
        return;
    }
    println!(
        "{table}: {} records in {:.2}s ({:.0} records/s)",
        r.records_in,
        secs,
        r.records_in as f64 / secs
    );
    println!(
        "  committed {} records in {} commits ({} records/commit) from {} requests, {} data files",
        r.records_committed, r.commits, per_commit, r.requests, r.data_files
    );
    for t in &r.created {
        println!("  created table {t}");
    }
    for c in &r.evolved {
        println!("  schema: {c}");
    }
    if r.duplicates > 0 {
        println!(
            "  {} batches were already in the table (same input as an earlier run) and were skipped",
            r.duplicates
        );
    }
    for u in &r.unfinished {
        println!(
            "  {}: its last line ({} bytes) has no newline yet; a later run reads it once it is finished",
            u.source, u.bytes
        );
    }
    if !r.rejected.is_empty() {
        println!("  rejected {} records:", r.rejected.len());
        for rej in r.rejected.iter().take(SHOWN_REJECTS) {
            let field = if rej.field.is_empty() {
                String::new()
            } else {
                format!(" field `{}`:", rej.field)
            };
            println!("    {} {}:{field} {}", rej.source, rej.position, rej.reason);
        }
        if r.rejected.len() > SHOWN_REJECTS {
            println!("    ... and {} more", r.rejected.len() - SHOWN_REJECTS);
        }
        for loc in &r.dead_letter_locations {
            println!("  dead letters: {loc}");
        }
    }
}
