//! `floe bench history`: what a commit costs on a table that already holds
//! `--snapshots` snapshots (docs/benchmarks.md, "Commits against snapshot
//! history").
//!
//! Building 100,000 snapshots one commit at a time would take hours (each
//! commit rewrites the metadata file, so the build is quadratic), so the
//! history is written directly: the table gets one real batch, then its
//! metadata gains copies of that snapshot (same manifest list, the real
//! summary with a batch id of its own, one snapshot-log entry each), swapped
//! in through the catalog like any commit. What is timed is real: small
//! batches through the embedded writer and committer (the ledger, the
//! manifests, position deletes resolved against the table for a keyed one,
//! the metadata file written and swapped).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use floe_core::catalog::TableCommit;
use floe_core::embedded::Embedded;
use floe_core::iceberg::spec::TableMetadata;
use floe_core::ident;
use floe_core::tabledef;
use serde_json::Value;

use crate::out::outln;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Snapshots the table holds before the timed commits.
    #[arg(long)]
    snapshots: u64,
    /// A keyed table (position deletes) instead of an append table.
    #[arg(long)]
    keyed: bool,
    /// Rows of the real batch the history copies.
    #[arg(long, default_value_t = 10_000)]
    rows: u64,
    /// Records per timed commit (updates of existing keys on a keyed table).
    #[arg(long, default_value_t = 100)]
    records: u64,
    /// Timed commits.
    #[arg(long, default_value_t = 20)]
    commits: u64,
}

pub async fn run(floe: &Embedded, a: HistoryArgs) -> Result<()> {
    let kind = if a.keyed { "keyed" } else { "append" };
    let ident = ident::parse_table(&format!("bench.history_{kind}_{}", a.snapshots))?;
    let schema = super::id_v_n(a.keyed)?;
    floe.create_table(
        &ident,
        tabledef::creation(ident.name(), schema, Default::default(), Default::default()),
    )
    .await?;
    let opts = |batch_records| super::immediate(1, batch_records);
    let input = super::kafka_input;
    let mut text = Vec::new();
    for id in 0..a.rows {
        let _ = writeln!(text, r#"{{"id":{id},"v":"value {id}","n":{id}}}"#);
    }
    floe.ingest(
        Some(&ident),
        vec![input("load".into(), text)],
        &opts(a.rows),
    )
    .await?;

    let catalog = floe.catalog();
    let base = catalog.load_table(&ident).await?;
    let metadata = with_history(&base.metadata, a.snapshots.saturating_sub(1))?;
    catalog
        .commit(TableCommit {
            base,
            metadata,
            updates: Vec::new(),
            requirements: Vec::new(),
        })
        .await
        .landed()?;

    let loaded = catalog.load_table(&ident).await?;
    // What a cold committer (a new Lambda instance) pays before its first commit.
    let t = Instant::now();
    TableMetadata::read_from(catalog.file_io(), &loaded.metadata_location).await?;
    let load = t.elapsed();
    let bytes_before = metadata_bytes(&loaded.metadata_location)?;
    let mut times = Vec::new();
    for c in 0..a.commits {
        let mut text = Vec::new();
        for i in 0..a.records {
            let id = (c * a.records + i) % a.rows;
            let _ = writeln!(text, r#"{{"id":{id},"v":"changed in {c}","n":{i}}}"#);
        }
        let r = floe
            .ingest(
                Some(&ident),
                vec![input(format!("c{c}"), text)],
                &opts(a.records),
            )
            .await?;
        anyhow::ensure!(
            r.snapshots == 1,
            "commit {c} added {} snapshots",
            r.snapshots
        );
        times.push(r.elapsed);
    }
    let after = catalog.load_table(&ident).await?;
    let snapshots = after.metadata.snapshots().count();
    let bytes = metadata_bytes(&after.metadata_location)?;
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    outln!(
        "{}",
        serde_json::json!({
            "table": kind, "snapshots": snapshots,
            "metadata_bytes": bytes, "bytes_per_snapshot": bytes_before / a.snapshots.max(1),
            "metadata_read_ms": ms(load),
            "commit_p50_ms": ms(times[times.len() / 2]),
            "commit_max_ms": ms(times[times.len() - 1]),
            "metadata_log": after.metadata.metadata_log().len(),
        })
    );
    Ok(())
}

/// `metadata` with `extra` more snapshots on `main`, each a copy of the
/// current one under a new id and batch id, the last of them current.
fn with_history(metadata: &TableMetadata, extra: u64) -> Result<TableMetadata> {
    let mut json = serde_json::to_value(metadata)?;
    let current = metadata.current_snapshot().context("no snapshot")?;
    let template = json["snapshots"]
        .as_array()
        .and_then(|s| {
            s.iter()
                .find(|s| s["snapshot-id"] == current.snapshot_id())
                .cloned()
        })
        .context("current snapshot not in the metadata")?;
    let batch_key = template["summary"]
        .as_object()
        .and_then(|s| s.keys().find(|k| k.contains("batch")).cloned());
    let mut parent = current.snapshot_id();
    let mut sequence = metadata.last_sequence_number();
    let start_ms = current.timestamp_ms();
    let mut snapshots = Vec::with_capacity(extra as usize);
    let mut log = Vec::with_capacity(extra as usize);
    for i in 0..extra {
        let mut s = template.clone();
        let id = parent + 1;
        sequence += 1;
        // One timestamp for all: spaced out they would end in the future,
        // which the next commit's metadata builder refuses.
        let ts = start_ms;
        s["snapshot-id"] = id.into();
        s["parent-snapshot-id"] = parent.into();
        s["sequence-number"] = sequence.into();
        s["timestamp-ms"] = ts.into();
        if let Some(k) = &batch_key {
            s["summary"][k] = Value::String(format!("history-{i:016x}"));
        }
        snapshots.push(s);
        log.push(serde_json::json!({"snapshot-id": id, "timestamp-ms": ts}));
        parent = id;
    }
    push_all(&mut json["snapshots"], snapshots)?;
    push_all(&mut json["snapshot-log"], log)?;
    json["current-snapshot-id"] = parent.into();
    json["last-sequence-number"] = sequence.into();
    json["refs"]["main"]["snapshot-id"] = parent.into();
    Ok(serde_json::from_value(json)?)
}

fn push_all(array: &mut Value, items: Vec<Value>) -> Result<()> {
    array
        .as_array_mut()
        .context("metadata list missing")?
        .extend(items);
    Ok(())
}

fn metadata_bytes(location: &str) -> Result<u64> {
    let path = location.trim_start_matches("file://");
    Ok(std::fs::metadata(path)
        .with_context(|| path.to_string())?
        .len())
}
