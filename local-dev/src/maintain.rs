//! `floe maintain NS.TABLE`: compaction, manifest merging, snapshot expiry and
//! orphan cleanup, through the same commit engine as the committer.

use anyhow::Result;
use clap::Args;
use floe_core::deploy::Deployment;
use floe_core::embedded::Embedded;
use floe_core::ident;
use floe_core::maintain::{MaintainOptions, maintain};

#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// The table (NAMESPACE.TABLE).
    table: String,
    /// Report what would be done without changing anything.
    #[arg(long)]
    dry_run: bool,
    /// Expire snapshots older than this (default: the table's
    /// `history.expire.max-snapshot-age-ms`, else 24 h).
    #[arg(long)]
    max_snapshot_age_ms: Option<i64>,
    /// Leave unreferenced files younger than this (default 3 days).
    #[arg(long)]
    orphan_window_ms: Option<i64>,
    /// Start no compaction step after this many seconds; a large backlog
    /// goes on in the next run.
    #[arg(long)]
    max_seconds: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(floe: &Embedded, deployment: &Deployment, args: MaintainArgs) -> Result<()> {
    let table = ident::parse_table(&args.table)?;
    let defaults = MaintainOptions::default();
    let opts = MaintainOptions {
        dry_run: args.dry_run,
        max_snapshot_age_ms: args.max_snapshot_age_ms,
        orphan_window_ms: args.orphan_window_ms.unwrap_or(defaults.orphan_window_ms),
        // S3 locations are listed through the deployment's client.
        lister: deployment.lister.clone(),
        deadline: args
            .max_seconds
            .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s)),
        ..defaults
    };
    let r = maintain(&floe.catalog(), &table, &opts).await?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let verb = if args.dry_run { "would" } else { "did" };
    println!(
        "{}: {} snapshots, {} manifests, {} data files, {} delete files before",
        r.table, r.before.snapshots, r.before.manifests, r.before.data_files, r.before.delete_files
    );
    println!(
        "  {verb} compact {} files ({} rows), expire {} snapshots, delete {} unreferenced files and {} orphans",
        r.compacted_files,
        r.compacted_rows,
        r.expired_snapshots,
        r.deleted_files.len(),
        r.orphans.len()
    );
    if !args.dry_run {
        println!(
            "  after: {} snapshots, {} manifests, {} data files, {} delete files",
            r.after.snapshots, r.after.manifests, r.after.data_files, r.after.delete_files
        );
    }
    Ok(())
}
