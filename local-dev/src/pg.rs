//! `floe pg setup|sync`: a Postgres logical replication slot into keyed
//! Iceberg tables.

use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use floe_core::embedded::{Embedded, IngestOptions};
use floe_core::iceberg::NamespaceIdent;
use floe_core::postgres::sync::{SyncOptions, sync};
use floe_core::postgres::{PgConfig, PgSource, format_lsn, setup};

#[derive(Debug, Subcommand)]
pub enum PgCommand {
    /// Create the publication and the slot (pgoutput) when missing.
    Setup(Source),
    /// Copy the tables (an initial snapshot, chunk by chunk) and stream their
    /// changes into NAMESPACE.<table>, exactly once, until caught up.
    Sync(SyncArgs),
}

#[derive(Debug, Args)]
pub struct Source {
    /// libpq connection string (`host=… port=… user=… dbname=…`).
    #[arg(long, env = "FLOE_PG_CONNINFO")]
    conninfo: String,
    /// Logical replication slot.
    #[arg(long, default_value = "floe")]
    slot: String,
    /// Publication.
    #[arg(long, default_value = "floe")]
    publication: String,
    /// A table to replicate, `schema.table` (repeatable).
    #[arg(long = "table", required = true)]
    tables: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    #[command(flatten)]
    source: Source,
    /// Namespace of the Iceberg tables.
    #[arg(long, default_value = "raw")]
    namespace: String,
    /// Rows per snapshot chunk.
    #[arg(long, default_value_t = 10_000)]
    chunk_rows: usize,
    /// Most changes per micro-batch.
    #[arg(long, default_value_t = 50_000)]
    max_changes: usize,
    /// Stop after this many micro-batches.
    #[arg(long)]
    max_batches: Option<usize>,
    /// Keep polling after catching up, every this many milliseconds.
    #[arg(long)]
    follow_ms: Option<u64>,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

impl Source {
    fn config(&self) -> PgConfig {
        PgConfig::new(
            self.conninfo.clone(),
            self.slot.clone(),
            self.publication.clone(),
            self.tables.clone(),
        )
    }
}

pub async fn run(floe: &Embedded, cmd: PgCommand) -> Result<()> {
    match cmd {
        PgCommand::Setup(source) => {
            setup(&source.config()).await?;
            println!(
                "publication {} and slot {} are ready",
                source.publication, source.slot
            );
            Ok(())
        }
        PgCommand::Sync(args) => {
            let config = PgConfig {
                chunk_rows: args.chunk_rows,
                max_changes: args.max_changes,
                ..args.source.config()
            };
            let mut source = PgSource::connect(config.clone()).await?;
            let opts = SyncOptions {
                namespace: NamespaceIdent::from_strs(args.namespace.split('.'))?,
                max_batches: args.max_batches,
                follow: args.follow_ms.map(Duration::from_millis),
                ingest: IngestOptions {
                    commit_window: Duration::from_millis(50),
                    ..IngestOptions::default()
                },
            };
            let r = sync(floe, &mut source, &config, &opts).await?;
            let lsn = r.confirmed_lsn.map(format_lsn).unwrap_or_default();
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "batches": r.batches, "lines": r.lines, "skipped": r.skipped,
                        "confirmed_lsn": lsn, "snapshot_done": r.snapshot_done,
                        "records_committed": r.ingest.records_committed,
                        "rejected": r.ingest.rejected.len(), "commits": r.ingest.commits,
                    })
                );
            } else {
                println!(
                    "{} batches, {} changes ({} already held), slot at {lsn}, snapshot {}",
                    r.batches,
                    r.lines,
                    r.skipped,
                    if r.snapshot_done {
                        "done"
                    } else {
                        "in progress"
                    }
                );
                for rej in &r.ingest.rejected {
                    println!(
                        "rejected: {} at {} (LSN): `{}`: {}",
                        rej.table, rej.position, rej.field, rej.reason
                    );
                }
            }
            Ok(())
        }
    }
}
