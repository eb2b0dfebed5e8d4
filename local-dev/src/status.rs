//! `floe status`: what a deployment is doing, from what it leaves behind —
//! each table's recent snapshots (last commit, records per commit,
//! freshness), the commit queue's depth, and the dead letters by reason.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use floe_core::clock::now_ms;
use floe_core::commit::copy_on_write::ROWS_REWRITTEN;
use floe_core::deploy::Deployment;
use floe_core::embedded::Embedded;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::spec::{Operation, Snapshot, TableMetadata};
use floe_core::ident;
use serde::Serialize;
use serde_json::json;

use crate::dlq;
use crate::out::outln;
use crate::rows::{Rows, summary_u64};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this table (NAMESPACE.TABLE); default: every table the catalog lists.
    #[arg(long)]
    table: Option<String>,
    /// Records per commit over this many of each table's latest snapshots.
    #[arg(long, default_value_t = 20)]
    window: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One table's recent commits.
#[derive(Debug, Serialize)]
struct TableLine {
    table: String,
    snapshots: usize,
    /// Rows a reader sees (`rows.written` less deleted rows).
    rows: Rows,
    /// Rows in data files, deleted or not (before: the only count).
    total_records: u64,
    last_commit_ms: Option<i64>,
    freshness_ms: Option<i64>,
    /// Over the last `commits` snapshots that added records.
    commits: usize,
    records: u64,
    records_per_commit: Option<f64>,
    /// Commit requests those commits held (floe's `floe.requests` summary).
    requests: u64,
    /// Compaction snapshots (`replace`) among the table's snapshots, and the
    /// rows they rewrote: moved, not ingested.
    compactions: usize,
    rows_compacted: u64,
}

/// Prints each table's recent commits, the commit queue's depth and the
/// dead letters by reason, as text or (`--json`) one document.
pub async fn run(floe: &Embedded, deployment: &Deployment, args: StatusArgs) -> Result<()> {
    let (lines, unreadable) = read_tables(floe, &args).await?;
    let queues = queue_depths(deployment).await?;
    let only = args.table.as_deref().map(ident::parse_table).transpose()?;
    let files = floe.dead_letter_files(only.as_ref()).await?;
    let dead = dlq::by_reason(&files);
    if args.json {
        let out = json!({
            "tables": lines,
            "unreadable": unreadable,
            // One shard (the default): its depth, as before sharding;
            // every shard's under "queues".
            "queue": match &queues[..] { [only] => only.clone(), _ => serde_json::Value::Null },
            "queues": queues,
            "dead_letters": dead,
            "dead_letter_location": floe.dead_letter_prefix(),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for l in &lines {
        l.print();
    }
    if lines.is_empty() && unreadable.is_empty() {
        outln!("no tables");
    }
    for t in &unreadable {
        outln!("{t}: cannot be read (`floe status --table {t}` says why)");
    }
    for (i, q) in queues.iter().enumerate() {
        print_queue(q, i, queues.len());
    }
    if queues.is_empty() {
        outln!("queue: in-process (nothing waits between runs)");
    }
    if dead.is_empty() {
        outln!(
            "{}",
            dlq::none_message(floe, only.as_ref(), &Default::default()).await?
        );
    }
    dlq::print_by_reason(&dead, "dead letters of ");
    Ok(())
}

/// The status line of `--table`, or of every table the catalog lists, and
/// the names of the tables that could not be read.
async fn read_tables(floe: &Embedded, args: &StatusArgs) -> Result<(Vec<TableLine>, Vec<String>)> {
    let catalog = floe.catalog();
    let tables: Vec<TableIdent> = match &args.table {
        Some(t) => vec![ident::parse_table(t)?],
        None => catalog.list_tables().await?,
    };
    let now = now_ms();
    let mut lines = Vec::new();
    // One table that cannot be read (its files deleted under the catalog,
    // no access) must not hide the others' status.
    let mut unreadable = Vec::new();
    for t in &tables {
        match catalog.load_table(t).await {
            Ok(loaded) => lines.push(table_line(t, &loaded.metadata, args.window, now)),
            Err(e) if args.table.is_none() => {
                tracing::warn!(table = %ident::display(t), error = %e, "cannot be read");
                unreadable.push(ident::display(t));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((lines, unreadable))
}

impl TableLine {
    fn print(&self) {
        let age = |ms: Option<i64>| ms.map_or_else(|| "-".to_string(), human);
        outln!(
            "{}: {}, {} snapshots, last commit {} ago",
            self.table,
            self.rows.describe(),
            self.snapshots,
            age(self.freshness_ms)
        );
        if let Some(rpc) = self.records_per_commit {
            outln!(
                "  last {} ingest commits: {} records, {rpc:.0} records/commit, {} requests",
                self.commits,
                self.records,
                self.requests
            );
        }
        if self.compactions > 0 {
            outln!(
                "  {} compactions rewrote {} rows (not counted as ingested)",
                self.compactions,
                self.rows_compacted
            );
        }
    }
}

/// Prints the depth of shard `i` of `n` of the commit queue, naming the
/// shard only when there are several.
fn print_queue(q: &serde_json::Value, i: usize, n: usize) {
    let shard = match n {
        1 => String::new(),
        n => format!(" (shard {i} of {n})"),
    };
    outln!(
        "queue {}{shard}: {} waiting, {} in flight, {} delayed{}",
        q["url"].as_str().unwrap_or_default(),
        q["visible"],
        q["in_flight"],
        q["delayed"],
        match q["dead_letter_queue"].as_object() {
            Some(d) => format!(
                "; its dead-letter queue holds {} (after {} receives)",
                d["visible"], q["max_receive_count"]
            ),
            None => String::new(),
        }
    );
}

fn table_line(t: &TableIdent, m: &TableMetadata, window: usize, now: i64) -> TableLine {
    let mut snaps: Vec<_> = m.snapshots().collect();
    snaps.sort_by_key(|s| s.sequence_number());
    let (compactions, ingests): (Vec<&Arc<Snapshot>>, Vec<_>) = snaps
        .into_iter()
        .partition(|s| s.summary().operation == Operation::Replace);
    // A copy-on-write commit re-adds the unchanged rows of the files it
    // rewrites; they were ingested before.
    let ingested = |s: &Snapshot| {
        summary_u64(s, "added-records").saturating_sub(summary_u64(s, ROWS_REWRITTEN))
    };
    let recent: Vec<_> = ingests
        .iter()
        .rev()
        .filter(|s| ingested(s) > 0)
        .take(window)
        .collect();
    let records: u64 = recent.iter().map(|s| ingested(s)).sum();
    let requests: u64 = recent
        .iter()
        .map(|s| summary_u64(s, floe_core::ledger::REQUESTS))
        .sum();
    let current = m.current_snapshot();
    let last = current.map(|s| s.timestamp_ms());
    let rows = Rows::of(m);
    TableLine {
        table: ident::display(t),
        snapshots: m.snapshots().len(),
        rows,
        total_records: rows.written,
        last_commit_ms: last,
        freshness_ms: last.map(|ts| (now - ts).max(0)),
        commits: recent.len(),
        records,
        records_per_commit: (!recent.is_empty()).then(|| records as f64 / recent.len() as f64),
        requests,
        compactions: compactions.len(),
        rows_compacted: compactions
            .iter()
            .map(|s| summary_u64(s, "added-records"))
            .sum(),
    }
}

/// The depth of each shard of the SQS commit queue (one, unless sharded)
/// and of its dead-letter queue; empty when the deployment has none.
#[cfg(not(feature = "aws"))]
async fn queue_depths(_deployment: &Deployment) -> Result<Vec<serde_json::Value>> {
    Ok(Vec::new())
}

/// The depth of each shard of the SQS commit queue (one, unless sharded)
/// and of its dead-letter queue; empty when the deployment has none.
#[cfg(feature = "aws")]
async fn queue_depths(deployment: &Deployment) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::with_capacity(deployment.shards.len());
    for sqs in &deployment.shards {
        out.push(queue_depth(deployment, sqs).await?);
    }
    Ok(out)
}

/// One SQS commit queue's depth and its dead-letter queue's.
#[cfg(feature = "aws")]
async fn queue_depth(
    deployment: &Deployment,
    sqs: &floe_core::queue::SqsQueue,
) -> Result<serde_json::Value> {
    let depth = sqs.depth().await?;
    let mut out = serde_json::to_value(&depth)?;
    if let (Some(arn), Some(aws)) = (&depth.dead_letter_arn, &deployment.aws) {
        // arn:aws:sqs:REGION:ACCOUNT:NAME → the queue's URL, by name.
        let name = arn.rsplit(':').next().unwrap_or_default();
        let url = aws
            .sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("SQS GetQueueUrl {name}: {e}"))?;
        if let Some(url) = url.queue_url() {
            let claims = deployment.config.claim_prefix().to_string();
            let dlq =
                floe_core::queue::SqsQueue::new(aws, url, &claims).map_err(anyhow::Error::from)?;
            out["dead_letter_queue"] = serde_json::to_value(dlq.depth().await?)?;
        }
    }
    Ok(out)
}

/// `3 s`, `4 min`, `2.5 h`.
fn human(ms: i64) -> String {
    match ms {
        ..=999 => format!("{ms} ms"),
        1_000..=119_999 => format!("{} s", ms / 1000),
        120_000..=7_199_999 => format!("{} min", ms / 60_000),
        _ => format!("{:.1} h", ms as f64 / 3_600_000.0),
    }
}
