//! `floe maintain [NS.TABLE]`: compaction, manifest merging, snapshot expiry
//! and orphan cleanup, through the same commit engine as the committer. With
//! no table, every table of `maintenance.tables`, or, when that is empty,
//! every table of the catalog that floe writes.

use anyhow::{Result, bail};
use clap::Args;
use floe_core::deploy::Deployment;
use floe_core::embedded::Embedded;
use floe_core::ident;
use floe_core::maintain::owned::select;
use floe_core::maintain::{MaintainOptions, MaintainReport, maintain};

use crate::out::outln;

#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// The table (NAMESPACE.TABLE); none: the configured tables, else every
    /// table floe writes (tables other engines created are left alone).
    table: Option<String>,
    /// Report what would be done without changing anything.
    #[arg(long)]
    dry_run: bool,
    /// Expire snapshots older than this (default: the table's
    /// `history.expire.max-snapshot-age-ms`, else 24 h). Refs keep theirs.
    #[arg(long)]
    max_snapshot_age_ms: Option<i64>,
    /// Keep at most this many snapshots, expiring the oldest even when young
    /// (default: the table's `floe.expire.max-snapshots`, else no limit).
    /// Refs keep their snapshots and minimums whatever the count.
    #[arg(long)]
    max_snapshots: Option<usize>,
    /// Leave unreferenced files younger than this (default
    /// `maintenance.orphan_window_seconds`, 16 days). With an SQS commit
    /// queue never shorter than its or its DLQ's retention; on a local
    /// warehouse anything, while no `floe serve` request waits in its
    /// spool (do not run it beside an ingest into the same table).
    #[arg(long)]
    orphan_window_ms: Option<i64>,
    /// Start no compaction step after this many seconds; a large backlog
    /// goes on in the next run.
    #[arg(long)]
    max_seconds: Option<u64>,
    /// Print JSON (one line per table).
    #[arg(long)]
    json: bool,
}

pub async fn run(floe: &Embedded, deployment: &Deployment, args: MaintainArgs) -> Result<()> {
    let config = floe.config();
    let orphan_window_ms = match args.orphan_window_ms {
        // No commit queue: only the local spool can hold a request whose
        // files are not in a table yet.
        Some(ms) if deployment.queue_urls().is_empty() => {
            refuse_while_spooled(floe, deployment).await?;
            ms
        }
        Some(ms) => {
            config
                .maintenance
                .check_orphan_window(ms / 1000, &config.queue)?;
            ms
        }
        None => config.maintenance.orphan_window_ms(),
    };
    let opts = MaintainOptions {
        dry_run: args.dry_run,
        max_snapshot_age_ms: args.max_snapshot_age_ms,
        max_snapshots: args.max_snapshots,
        orphan_window_ms,
        // S3 locations are listed through the deployment's client.
        lister: deployment.lister.clone(),
        deadline: args
            .max_seconds
            .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s)),
        ..MaintainOptions::default()
    };
    let named = match &args.table {
        Some(t) => vec![ident::parse_table(t)?],
        None => config
            .maintenance
            .tables
            .iter()
            .map(|t| ident::parse_table(t))
            .collect::<Result<_, _>>()?,
    };
    let selection = select(&floe.catalog(), named).await?;
    for table in &selection.skipped {
        eprintln!("{table}: written by another engine; skipped (name it to maintain it)");
    }
    let mut failed = selection.failed;
    for ident in &selection.tables {
        match maintain(&floe.catalog(), ident, &opts).await {
            Ok(r) if args.json => outln!("{}", serde_json::to_string(&r)?),
            Ok(r) => print(&r, args.dry_run),
            Err(e) if args.table.is_some() => return Err(e.into()),
            Err(e) => {
                eprintln!("{}: {e}", ident::display(ident));
                failed.push((ident::display(ident), e.to_string()));
            }
        }
    }
    if !failed.is_empty() {
        let names: Vec<&str> = failed.iter().map(|(t, _)| t.as_str()).collect();
        bail!("maintenance failed for {}", names.join(", "));
    }
    Ok(())
}

/// Refuses a chosen orphan window while `floe serve`'s spool holds
/// accepted requests: their data files are in no table yet, and cleaning
/// them would turn an acknowledged batch into a dead-lettered request.
async fn refuse_while_spooled(floe: &Embedded, deployment: &Deployment) -> Result<()> {
    let spool = format!(
        "{}/{}/",
        floe.location().trim_end_matches('/'),
        floe_core::queue::spool::SPOOL_DIR
    );
    let waiting = deployment.lister.list(&spool).await?.len();
    if waiting > 0 {
        bail!(
            "{waiting} accepted commit requests wait in {spool}: their data files are in no table yet, \
             so --orphan-window-ms would delete them; start `floe serve` on this warehouse until they \
             are committed (or leave out --orphan-window-ms)"
        );
    }
    Ok(())
}

fn print(r: &MaintainReport, dry_run: bool) {
    let verb = if dry_run { "would" } else { "did" };
    outln!(
        "{}: {} snapshots, {} manifests, {} data files, {} delete files before",
        r.table,
        r.before.snapshots,
        r.before.manifests,
        r.before.data_files,
        r.before.delete_files
    );
    let dropped = match r.compacted_deleted_rows {
        0 => String::new(),
        n => format!(", dropping {n} deleted"),
    };
    outln!(
        "  {verb} compact {} files ({}{} rows kept{dropped}), expire {} snapshots and {} refs, delete {} unreferenced files and {} orphans",
        r.compacted_files,
        if r.compacted_rows_at_most {
            "at most "
        } else {
            ""
        },
        r.compacted_rows,
        r.expired_snapshots,
        r.expired_refs.len(),
        r.deleted_files.len(),
        r.orphans.len()
    );
    if !dry_run {
        outln!(
            "  after: {} snapshots, {} manifests, {} data files, {} delete files",
            r.after.snapshots,
            r.after.manifests,
            r.after.data_files,
            r.after.delete_files
        );
    }
}
